"""Layer `webhook`: the admission webhook volcano-py serves in place of Volcano's vc-webhook-manager."""
