"""The differential's partitions family (tools/differential/partitions.py): deterministic workloads Volcano would
admit, whose Jobs' controller-made PodGroups carry subGroupPolicy, and the partition property the run checks."""

from differential.partitions import MAX_PODS, PARTITION_ID, generate, partition_violations

from scheduler.jobs import podgroup_for, pods_for, validate_job

SEEDS = range(1, 201)


def test_same_seed_same_workload() -> None:
    a, b = generate(7), generate(7)
    assert a.describe() == b.describe() and a.hypernodes == b.hypernodes
    assert len({tuple(generate(s).describe()) for s in range(1, 41)}) == 40


def test_every_job_is_valid_and_partitioned_and_the_budget_holds() -> None:
    for seed in SEEDS:
        wl = generate(seed)
        assert sum(g.replicas for g in wl.gangs) <= MAX_PODS
        racks = [h for h in wl.hypernodes if h["spec"]["tier"] == 1]
        assert len({len(h["spec"]["members"]) for h in racks}) == 1  # all racks alike
        for gang in wl.gangs:
            (job,) = gang.manifests
            assert validate_job(job) == [], (seed, gang.name)
            (policy,) = podgroup_for(job)["spec"]["subGroupPolicy"]
            size = wl.partitions[gang.name][0]
            assert policy["subGroupSize"] == size
            labels = [p["metadata"]["labels"].get(PARTITION_ID) for p in pods_for(job)
                      if p["metadata"]["name"].startswith(f"{gang.name}-stage-")]
            assert labels == [str(i // size) for i in range(len(labels))]


def record(pods: list[tuple[str, str | None]]) -> dict:
    return {"observed": {"pods": [[name, node, "Running" if node else "Pending"] for name, node in pods]}}


def test_the_partition_property_names_a_split_partition_and_a_partial_one() -> None:
    wl = generate(5)  # j0: 2 x 1, j1: 1 x 4 and a master, j2: 2 x 3 min 1; all hard tier 1; racks of 2 nodes
    assert wl.partitions["w5-j2"] == (3, 1, 1)
    good = record([("w5-j2-stage-0", "w5-r0n0"), ("w5-j2-stage-1", "w5-r0n1"), ("w5-j2-stage-2", "w5-r0n1"),
                   ("w5-j2-stage-3", None), ("w5-j2-stage-4", None), ("w5-j2-stage-5", None)])
    assert partition_violations(wl, good) == []
    split = record([("w5-j2-stage-0", "w5-r0n0"), ("w5-j2-stage-1", "w5-r1n1"), ("w5-j2-stage-2", "w5-r0n1")])
    assert partition_violations(wl, split) == ["w5-j2 partition 0: spans ['w5-rack0', 'w5-rack1']"]
    partial = record([("w5-j2-stage-0", "w5-r0n0"), ("w5-j2-stage-1", "w5-r0n0")])
    assert partition_violations(wl, partial) == ["w5-j2 partition 0: 2/3 pods bound",
                                                 "w5-j2: 0 whole partitions bound, minPartitions 1"]
