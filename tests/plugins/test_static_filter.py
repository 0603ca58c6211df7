"""predicates' StaticFilter answers for all nodes at once; each node's answer must be the per-node rule's.

The per-node rule, written here as the specification: a node that is not ready, then cordoned, then one whose
labels miss a nodeSelector pair, then one that no required node-affinity term matches (terms may name the
node), then one with a NoSchedule/NoExecute taint no toleration tolerates (the first such taint is named).
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from scheduler.api import reasons as R
from scheduler.api.decision import SUCCESS, Status, unresolvable
from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.pod import Constraints, NodeSelectorTerm, Requirement, Taint, Toleration
from scheduler.api.resources import Resource
from scheduler.plugins.predicates import AFFINITY, NOT_READY, UNSCHEDULABLE, StaticFilter


def per_node(constraints: Constraints, node: NodeInfo) -> Status:
    if not node.ready:
        return NOT_READY
    if node.unschedulable:
        return UNSCHEDULABLE
    if any(node.labels.get(k) != v for k, v in constraints.node_selector):
        return AFFINITY
    terms = constraints.required_terms
    if terms and not any(t.matches(node.labels, node.name) for t in terms):
        return AFFINITY
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in constraints.tolerations):
            shown = f"{taint.key}: {taint.value}" if taint.value else taint.key
            return unresolvable(R.NodeFilter(R.TAINT_TOLERATION, shown))
    return SUCCESS


KEYS = ("zone", "pool", "gpu")
VALUES = ("a", "b")
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
taints = st.builds(Taint, st.sampled_from(("dedicated", "gpu")), st.sampled_from(("", "x")),
                   st.sampled_from(("NoSchedule", "NoExecute", "PreferNoSchedule")))
requirements = st.builds(Requirement, st.sampled_from(KEYS),
                         st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")),
                         st.lists(st.sampled_from(VALUES), max_size=2).map(tuple))
field_requirements = st.builds(Requirement, st.just("metadata.name"), st.sampled_from(("In", "NotIn")),
                               st.lists(st.sampled_from(("n0", "n1", "n2")), min_size=1, max_size=2).map(tuple))
terms = st.builds(NodeSelectorTerm, st.lists(requirements, max_size=2).map(tuple),
                  st.lists(field_requirements, max_size=1).map(tuple))
tolerations = st.builds(Toleration, st.sampled_from(("", "dedicated", "gpu")), st.sampled_from(("Equal", "Exists")),
                        st.sampled_from(("", "x")), st.sampled_from(("", "NoSchedule", "NoExecute")))
constraint_sets = st.builds(
    Constraints,
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2).map(lambda d: tuple(sorted(d.items()))),
    st.lists(terms, max_size=2).map(tuple),
    st.lists(tolerations, max_size=2).map(tuple),
)


@st.composite
def node_lists(draw: st.DrawFn) -> list[NodeInfo]:
    count = draw(st.integers(0, 12))
    return [
        NodeInfo(f"n{i}", Resource({"cpu": 1000}), draw(label_sets), tuple(draw(st.lists(taints, max_size=2))),
                 unschedulable=draw(st.booleans()), ready=draw(st.booleans()))
        for i in range(count)
    ]


@settings(max_examples=300, deadline=None)
@given(node_lists(), st.lists(constraint_sets, min_size=1, max_size=4))
def test_each_node_gets_the_per_node_answer(nodes: list[NodeInfo], asked: list[Constraints]) -> None:
    filter_ = StaticFilter()  # one per session: several constraint sets over the same node list
    for constraints in asked:
        task = TaskInfo("t", "j", "ns", "t-0", Resource({"cpu": 1}), constraints=constraints)
        assert filter_(task, nodes) == [per_node(constraints, n) for n in nodes]


def test_a_new_node_list_is_read_afresh() -> None:
    """The columns belong to one node list; a session with other nodes must not see the last one's labels."""
    filter_ = StaticFilter()
    task = TaskInfo("t", "j", "ns", "t-0", Resource({"cpu": 1}), constraints=Constraints((("zone", "a"),)))
    assert filter_(task, [NodeInfo("n0", Resource({"cpu": 1}), {"zone": "a"})]) == [SUCCESS]
    assert filter_(task, [NodeInfo("n0", Resource({"cpu": 1}), {"zone": "b"})]) == [AFFINITY]
