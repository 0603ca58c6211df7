"""Layer `adapter`: what both cluster adapters (the Kubernetes cache and the simulator) share.

The snapshot builder (which pod belongs to which gang, what a node holds) and the partial-gang give-up
policy live here, so the simulator and the production scheduler decide them with the same code.
"""
