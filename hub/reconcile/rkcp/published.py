"""The hub's record of the latest intent on a control plane's subject: ``Published`` (its
sequence, operation, owner and a digest of its spec) and ``Op``. Pure data, read from the
stream by ``hub.controllers.rkcp.published`` and compared by ``intents`` and ``owner``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol import names

__all__ = ["Op", "Published"]


class Op(enum.StrEnum):
    PROVISION = "provision"
    DELETE = "delete"
    UNDECODABLE = "undecodable"
    """The subject holds a message the hub cannot decode: nobody's intent, replaced like one."""


@dataclass(frozen=True, slots=True)
class Published:
    """The latest intent on the control plane's subject, as stored in the stream."""

    seq: int
    op: Op
    generation: int
    owner_uid: str
    spec_digest: str
    """``spec_digest`` of the intent's TCP spec (a digest, not the spec: the hub keeps one per
    control plane, and ten thousand parsed specs cost a hundred megabytes)."""
    kubeconfig_key: str = names.ADMIN_KUBECONFIG_KEY
    key_id: str = ""
    """The signing key id the intent names."""
    signed: bool = True
    """The signature verifies against a signing key of the hub's: its current key, or an earlier
    one it still trusts (``--hub-public-keys``, not retired). Anyone with the hub's NATS
    credentials can publish on the subject; what the hub did not sign is replaced, and what an
    earlier key signed is signed again (``signed_by_another_key``)."""
    replaces: tuple[str, ...] = ()
    """The intent's ``replaces``: earlier owners whose released deletion it carries on."""
    owner_object: tuple[str, str] = ("", "")
    """The namespace and name of the RKCP the intent's owner was (``hub.reconcile.rkcp.owner``)."""

    @classmethod
    def undecodable(cls, seq: int) -> Published:
        """A message at ``seq`` that is no intent at all: it names no owner and no generation."""
        return cls(seq=seq, op=Op.UNDECODABLE, generation=0, owner_uid="", spec_digest="")
