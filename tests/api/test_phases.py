"""Reading a PodGroup's phase and a Queue's state (api/phases.py): the member whose value is the string read,
anything else the default, whatever the object holds there."""

from __future__ import annotations

from hypothesis import given, strategies as st

from scheduler.api.phases import PodGroupPhase, QueueState

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)
NAMES = st.sampled_from([m.value for m in PodGroupPhase] + [m.value for m in QueueState] + ["running", " Running"])


def test_each_phase_and_state_reads_as_its_member() -> None:
    assert [PodGroupPhase.parse(v) for v in ("Pending", "Inqueue", "Running", "Unknown", "Completed")] == [
        PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN,
        PodGroupPhase.COMPLETED]
    assert [QueueState.parse(v) for v in ("Open", "Closed", "Closing", "Unknown")] == [
        QueueState.OPEN, QueueState.CLOSED, QueueState.CLOSING, QueueState.UNKNOWN]


@given(value=JSON | NAMES)
def test_anything_else_reads_as_the_default_and_a_value_as_its_member(value: object) -> None:
    phase, state = PodGroupPhase.parse(value), QueueState.parse(value)
    phases = {m.value: m for m in PodGroupPhase}
    states = {m.value: m for m in QueueState}
    named = type(value) is str
    assert phase is (phases[value] if named and value in phases else PodGroupPhase.PENDING)
    assert state is (states[value] if named and value in states else QueueState.OPEN)
