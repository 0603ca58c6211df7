"""The runner's pure parts: which gangs already have a PodGroup (the gate waits for all of them)."""

from differential.run import podgroup_gangs
from differential.workloads import generate


class _Cluster:
    def __init__(self, podgroups):
        self._pgs = podgroups

    def podgroups(self):
        return self._pgs


def test_podgroup_gangs_names_jobs_by_their_owner_and_bare_groups_by_name():
    wl = next(w for w in map(generate, range(1, 200))
              if {g.kind for g in w.gangs} == {"job", "podgroup"})
    job = next(g for g in wl.gangs if g.kind == "job")
    group = next(g for g in wl.gangs if g.kind == "podgroup")
    pgs = [
        {"metadata": {"name": f"{job.name}-3f2a", "ownerReferences": [{"kind": "Job", "name": job.name}]}},
        {"metadata": {"name": group.name}},
        {"metadata": {"name": "someone-else"}},
    ]
    assert podgroup_gangs(_Cluster(pgs), wl) == {job.key, group.key}
    assert podgroup_gangs(_Cluster(pgs[1:]), wl) == {group.key}
