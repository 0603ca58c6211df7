"""Layer `dra`: Dynamic Resource Allocation's structured allocator, beside `solver` and `gpu`: CEL device
selectors (`dra/cel.py`), the devices each node reaches (`dra/inventory.py`), and the allocation of a gang's
ResourceClaims with a tentative state discarded whole when the gang does not place (`dra/allocator.py`).

It follows the allocation rules of Kubernetes' structured allocator (k8s.io/dynamic-resource-allocation,
`structured` package, used by kube-scheduler's DynamicResources plugin), re-stated for volcano-py; Volcano
reaches the same plugin through its predicates (pkg/scheduler/plugins/predicates/predicates.go).
"""
