"""Layer `solver`: whole-gang placement over the cluster's topology tree (CP-SAT, with greedy baselines).

The solver works on arrays, never on session objects: a `GangProblem` holds the gang's task groups (identical
request and feasible nodes), the nodes' idle resources and the topology's per-tier domain ids. The plugin
`network-topology-aware` builds the problem from a session and turns the answer back into (task, node) pairs.
"""
