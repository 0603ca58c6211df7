"""Layer `controllers`: kopf handlers for Volcano Jobs, Queues, Commands and CronJobs.

Each handler is thin: read the objects it needs, ask a pure function of `scheduler.jobs` what to do, and carry
the answer out with the raw-JSON client of `scheduler.cache.kube`. `operator.run` wires them into kopf.
"""
