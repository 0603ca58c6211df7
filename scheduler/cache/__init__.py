"""Layer `cache`: the Kubernetes side of the cluster adapter (watches -> snapshot, decisions -> API)."""
