"""The spec the agent last applied to each TCP, in memory: what its drift is measured from.

The TCP's managedFields say which fields the agent owns, not which it should own: a field a
site admin changed is no longer the agent's there, and nothing on the object says it was. The
apply loop and the cleanup loop record here each intent they apply or read (``record``); the
status loop asks, on every watch event, whether the TCP still is what that intent makes it
(``managed.drifted``). A TCP that is gone is forgotten (``forget``): what is recorded is what
the TCP of that name, if there is one, should be. After a restart nothing is known until the
cleanup loop's first pass (run at start) has read the intents; a TCP edited meanwhile is
reverted by that pass. Pure state: talks to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol import messages


@dataclass(frozen=True)
class Desire:
    seq: int
    owner_uid: str
    spec: Mapping[str, Any]


@dataclass
class Desires:
    by_tcp: dict[tuple[str, str], Desire] = field(default_factory=dict)

    def record(self, intent: messages.Intent, *, seq: int) -> None:
        """``intent`` (stream sequence ``seq``) is the TCP's desired state, if it is a provision."""
        key = (intent.namespace, intent.name)
        if intent.op != "provision":
            self.by_tcp.pop(key, None)
        else:
            self.by_tcp[key] = Desire(seq=seq, owner_uid=intent.owner.uid, spec=intent.spec)

    def forget(self, namespace: str, name: str, *, up_to: int) -> None:
        """The TCP that ran an intent of sequence ``up_to`` or older is gone: nothing is desired
        of it until an intent is recorded again. A newer one recorded meanwhile (the TCP made
        anew under that name) stays."""
        found = self.by_tcp.get((namespace, name))
        if found is not None and found.seq <= up_to:
            del self.by_tcp[(namespace, name)]

    def spec(self, namespace: str, name: str, *, seq: int, owner_uid: str) -> Mapping[str, Any] | None:
        """The spec of intent ``seq`` of ``owner_uid`` for the TCP, if that is the one recorded."""
        found = self.by_tcp.get((namespace, name))
        if found is None or (found.seq, found.owner_uid) != (seq, owner_uid):
            return None
        return found.spec
