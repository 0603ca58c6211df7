"""KeySets (adapter/keysets.py) against a dict of sets, on random adds and discards."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from scheduler.adapter.keysets import KeySets

_ops = st.lists(st.tuples(st.booleans(), st.sampled_from("abc"), st.sampled_from("xyz")), max_size=60)


@given(_ops)
@settings(max_examples=300, deadline=None)
def test_keysets_hold_what_a_dict_of_sets_holds(ops: list[tuple[bool, str, str]]) -> None:
    ks, model = KeySets(), dict[str, set[str]]()
    for add, key, member in ops:
        if add:
            ks.add(key, member)
            model.setdefault(key, set()).add(member)
        else:
            ks.discard(key, member)
            if key in model:
                model[key].discard(member)
                if not model[key]:
                    del model[key]
        assert {k: set(ks.get(k)) for k in ks} == model
        assert len(ks) == len(model)
        assert all((k in ks) == (k in model) for k in "abc")
        assert all(set(ks.get(k)) == model.get(k, set()) for k in "abc")
