"""`make differential`: seeded random workloads under Volcano and under volcano-py, outcomes compared per gang and
per queue. workloads.py generates (pure), outcome.py observes and compares (pure), run.py drives a control plane."""
