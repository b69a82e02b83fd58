"""agent.tcp.desires: what each TCP should be, recorded from intents and forgotten with the TCP."""

from __future__ import annotations

import pytest

from agent.tcp import desires
from tests import helpers

NS, NAME = "tenants", "cp1"


def recorded(seq: int) -> desires.Desires:
    d = desires.Desires()
    d.record(helpers.intent(name=NAME, namespace=NS), seq=seq)
    return d


FORGET = [
    # id, recorded seq, forgotten up to, still recorded?
    ("the TCP of that intent is gone", 5, 5, False),
    ("gone with a later delete intent", 5, 9, False),
    ("a newer intent recorded meanwhile (the TCP made anew) stays", 12, 9, True),
]


@pytest.mark.parametrize(("seq", "up_to", "kept"), [c[1:] for c in FORGET], ids=[c[0] for c in FORGET])
def test_forget(seq: int, up_to: int, kept: bool) -> None:
    d = recorded(seq)
    d.forget(NS, NAME, up_to=up_to)
    assert ((NS, NAME) in d.by_tcp) is kept
    d.forget("other", NAME, up_to=up_to)  # nothing recorded there: nothing happens


def test_a_delete_intent_is_no_desire_and_the_spec_is_that_of_the_recorded_intent() -> None:
    d = recorded(5)
    owner = helpers.intent().owner.uid
    assert d.spec(NS, NAME, seq=5, owner_uid=owner) is not None
    assert d.spec(NS, NAME, seq=6, owner_uid=owner) is None
    d.record(helpers.intent(name=NAME, namespace=NS, op="delete", spec={}), seq=6)
    assert (NS, NAME) not in d.by_tcp
