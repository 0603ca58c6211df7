"""The simulated apiserver of `make bench-shards` (docs/scale-out.md, "Simulated apiserver"): an in-memory store
that answers the part of the Kubernetes REST API the scheduler uses, with the semantics Kubernetes documents, and
charges each request a cost from a calibration file so that replicas can be measured in virtual time."""
