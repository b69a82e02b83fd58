"""Whether the site's sealed secrets reach an RKCP's CAPI Secrets, decided from checksums. Pure.

The hub keeps of the latest box only what this needs (``vocabulary.SiteReport``: its sequence,
checksum, the owner it names and why it did not open); the CAPI Secrets' checksum annotations
say whether they carry it. A write is planned as ``WriteSecrets`` (open, write: the
shell's one path to the plaintext, ``hub.controllers.rkcp.writing``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hub.api import cluster
from hub.reconcile.rkcp import intents, vocabulary
from hub.reconcile.rkcp.facts import Secrets
from protocol import names

if TYPE_CHECKING:
    from hub.reconcile.rkcp.vocabulary import Observed

REFUSALS = (Secrets.OWNER_MISMATCH, Secrets.NOT_AUTHORIZED, Secrets.CONFLICT, Secrets.PAUSED)
"""Why sealed secrets are withheld from an RKCP; each is also its SecretsSynced reason."""


@dataclass(frozen=True)
class SecretsDecision:
    state: Secrets
    message: str = ""
    actions: list[vocabulary.Action] = field(default_factory=list)
    refused: str = ""
    """A reason of ``REFUSALS`` when the site sent secrets this object must not get."""


def decide_secrets(o: Observed) -> SecretsDecision:
    """Whether the site's sealed secrets are written into this object's CAPI Secrets.

    Secrets reach only their owner: the RKCP whose uid the sealed message names, and only while
    it is authorized, not in conflict and not paused (paused means hands off, CAPI: the
    secrets are written when it resumes). Any other RKCP naming the same coordinates (a tenant
    grabbing another's TenantControlPlane) gets nothing, however often the box comes again.
    Messages never carry secret material nor the other owner's identity.
    """
    report = o.report
    if report.secrets_error:
        return SecretsDecision(Secrets.DECRYPT_FAILED, report.secrets_error)
    sealed = bool(report.secrets_checksum)
    if sealed and report.secrets_owner_uid in intents.replaced_owners(o, None):
        # The released owner's secrets, still on the subject while its TCP is replaced: not ours,
        # and not a refusal either (nobody is trying to take them).
        return SecretsDecision(Secrets.WAITING, "waiting for the TenantControlPlane of this owner")
    if sealed and report.secrets_owner_uid != o.owner_uid:
        return SecretsDecision(
            Secrets.OWNER_MISMATCH,
            "the site's secrets for this TenantControlPlane belong to another owner; nothing is written",
            refused=Secrets.OWNER_MISMATCH,
        )
    if o.not_authorized or o.conflict_with:
        reason = Secrets.NOT_AUTHORIZED if o.not_authorized else Secrets.CONFLICT
        return SecretsDecision(
            reason,
            "secrets are written only for an authorized placement without conflict",
            refused=reason if sealed else "",
        )
    writes = _writes(o)
    paused = cluster.pause_message(o.cluster, o.rkcp)
    if writes and paused:
        return SecretsDecision(
            Secrets.PAUSED,
            f"reconciliation is paused ({paused}): the site's secrets are written when it resumes",
            refused=Secrets.PAUSED,
        )
    return SecretsDecision(Secrets.SYNCED if o.report.secrets_checksum else Secrets.WAITING, "", writes)


def _writes(o: Observed) -> list[vocabulary.Action]:
    checksum = o.report.secrets_checksum
    current = (names.capi_kubeconfig(o.cluster_name), names.capi_ca(o.cluster_name))
    if not checksum or all(o.secrets_checksums.get(n) == checksum for n in current):
        return []
    # Missing or stale (another checksum): the box (kept, or read from the stream) is written.
    return [vocabulary.WriteSecrets(checksum=checksum, owner_uid=o.report.secrets_owner_uid)]
