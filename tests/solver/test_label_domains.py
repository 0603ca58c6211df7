"""One topology model: label domains per key (`api.topology`), which the solver's tiers are built from."""

from __future__ import annotations

import numpy as np

from scheduler.api.topology import NO_DOMAIN, NodeDomains
from scheduler.cycle import builtin_default_conf
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.solver.topology import from_domains, from_labels
from scheduler.testing import cluster

ZONE, RACK = "topology.kubernetes.io/zone", "volcano.sh/rack"
LABELS = [{ZONE: "a", RACK: "r1"}, {ZONE: "b", RACK: "r1"}, {ZONE: "a"}, {RACK: "r2"}]


def test_nodes_sharing_a_value_are_one_domain_and_a_node_without_the_label_is_in_none() -> None:
    domains = NodeDomains(LABELS)
    zone = domains.key(ZONE)
    assert zone.of.tolist() == [0, 1, 0, NO_DOMAIN]
    assert zone.values == ("a", "b")
    assert zone.per_node() == ["a", "b", "a", None]
    assert domains.key(RACK).values == ("r1", "r2")  # any key: pod affinity does not nest racks in zones
    assert domains.key(ZONE) is zone  # built once per key
    assert domains.key("absent").count == 0


def test_the_solver_tiers_come_from_the_session_domains_and_equal_the_label_tiers() -> None:
    c = cluster()
    for i, labels in enumerate(LABELS):
        c.node(f"n{i}", labels=labels)
    ssn = Session(c.sim.snapshot(), builtin_default_conf(), PLUGINS)
    names = [n.name for n in ssn.node_list]
    shared = from_domains(names, ssn.domains)
    alone = from_labels(names, [n.labels for n in ssn.node_list])
    assert np.array_equal(shared.domain, alone.domain)
    assert shared.domain_names == alone.domain_names
    assert shared.domain_names[2] == ["zone:a/rack:r1", "zone:b/rack:r1", "node:n2", "rack:r2/rack:r2"]
