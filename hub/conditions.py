"""metav1.Condition and the helpers that build and merge them, after Cluster API's util/conditions.

Owns ``Condition`` (the Kubernetes ``metav1.Condition`` as a frozen pydantic model with the wire's
camelCase aliases, so ``hub.api.rkcp`` embeds it in the RemoteKamajiControlPlane status and the CRD
schema comes from one place) and the pure functions over a list of them:

    new_condition   build one (timestamp truncated to seconds, message checked for secrets)
    set_condition   put one into a list: lastTransitionTime moves only when the status changes
    get             the condition of a type, or None
    summary         fold several conditions into one (``Ready``/``Available``), CAPI v1beta2 style

Talks to nothing and reads no clock: every timestamp is passed in as ``now`` (an aware
datetime), so the reconcile functions that use these stay pure and table-testable.

**No secret material in a condition, ever**: conditions are world-readable to anyone
who may ``get`` the object, end up in ``kubectl describe``, events and support bundles. Write
reasons and short human messages (``"TCP tenants/cp1 reports Ready"``), never a kubeconfig, key,
token or certificate. ``new_condition`` redacts a message that looks like one anyway, as a
backstop, not as the policy.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Sequence
from typing import Annotated, Final, Literal

import pydantic

from protocol import text

TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"

Status = Literal["True", "False", "Unknown"]

MAX_MESSAGE: Final = 32768
"""metav1.Condition's ``message`` limit (bytes; we count characters and stay well below)."""

REDACTED: Final = "[redacted: the message looked like secret material]"

# metav1.Condition's own validation, copied from k8s.io/apimachinery so our CRD refuses exactly
# what a built-in type would.
TYPE_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"  # optional DNS prefix/
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_PATTERN: Final = text.REASON_PATTERN

# Summary reasons, as Cluster API v1beta2 names them.
MULTIPLE_ISSUES: Final = "MultipleIssuesReported"
MULTIPLE_UNKNOWN: Final = "MultipleUnknownReported"
NOT_YET_REPORTED: Final = "NotYetReported"
AS_EXPECTED: Final = "AsExpected"

# What secret material looks like in text: PEM blocks, kubeconfig credential keys, bearer tokens,
# NATS/NKey seeds (S + type letter + base32). Cheap and deliberately broad: a false positive only
# hides a message, a false negative leaks a credential.
_SECRET_LIKE: Final = re.compile(
    r"-----BEGIN [A-Z ]*-----"
    r"|\b(client-key-data|client-certificate-data|certificate-authority-data|token|password|secret)"
    r"\s*[:=]\s*[\"']?[A-Za-z0-9._~+/=-]{16,}"
    r"|\bBearer\s+[A-Za-z0-9._~+/=-]{16,}"
    r"|\bS[ACNOUX][A-Z2-7]{56}\b",
    re.IGNORECASE,
)


class Condition(pydantic.BaseModel):
    """One aspect of an object's state (``metav1.Condition``)."""

    model_config = pydantic.ConfigDict(frozen=True, populate_by_name=True, use_attribute_docstrings=True)

    type: Annotated[str, pydantic.Field(max_length=316, pattern=TYPE_PATTERN)]
    """Type of condition in CamelCase, e.g. ``Available``, ``SiteConnected``."""
    status: Status
    """True, False or Unknown."""
    observed_generation: Annotated[int | None, pydantic.Field(alias="observedGeneration", ge=0)] = None
    """The ``metadata.generation`` the condition was set for."""
    last_transition_time: dt.datetime = pydantic.Field(alias="lastTransitionTime")
    """When the status last changed (seconds precision, as ``metav1.Time``)."""
    reason: Annotated[str, pydantic.Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)]
    """Programmatic identifier of the last transition, in CamelCase."""
    message: Annotated[str, pydantic.Field(max_length=MAX_MESSAGE)]
    """Human-readable details; never secret material."""

    def to_dict(self) -> dict[str, object]:
        """The wire form (camelCase keys, RFC 3339 time, no nulls)."""
        dumped: dict[str, object] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped


def _utc_seconds(now: dt.datetime) -> dt.datetime:
    # metav1.Time serializes whole seconds: keeping microseconds would make every comparison of a
    # condition we wrote with the one we read back differ, and change-only writes never settle.
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    return now.astimezone(dt.UTC).replace(microsecond=0)


def moment(when: dt.datetime | None) -> str:
    """A time as a condition's message gives it: UTC, whole seconds (``2026-12-04T02:57:05Z``),
    as every other time on the object is; ``never`` for None. Readers show it as an age."""
    if when is None:
        return "never"
    return (
        when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if when.tzinfo
        else when.isoformat("T", "seconds")
    )


def _safe_message(message: str) -> str:
    if _SECRET_LIKE.search(message):
        return REDACTED
    if len(message) > MAX_MESSAGE:
        return message[: MAX_MESSAGE - 3] + "..."
    return message


def new_condition(
    type: str,
    status: Status,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None,
    now: dt.datetime,
) -> Condition:
    """A Condition stamped ``now``; a message that looks like secret material is replaced by ``REDACTED``."""
    return Condition(
        type=type,
        status=status,
        reason=reason,
        message=_safe_message(message),
        observed_generation=observed_generation,
        last_transition_time=_utc_seconds(now),
    )


def get(conditions: Sequence[Condition], type: str) -> Condition | None:
    """The condition of ``type``, or None."""
    return next((c for c in conditions if c.type == type), None)


def set_condition(conditions: Sequence[Condition], cond: Condition, *, now: dt.datetime) -> list[Condition]:
    """A new list with ``cond`` in place of the condition of its type (appended when new).

    lastTransitionTime records a *transition*: it is kept from the existing condition while the
    status stays the same (a new reason or message is not a transition), and becomes ``now``
    when the status changes or the type is new. The input list is not modified; the order of
    the other conditions is kept, so equal inputs give equal lists (change-only status writes).
    """
    existing = get(conditions, cond.type)
    if existing is not None and existing.status == cond.status:
        stamped = cond.model_copy(update={"last_transition_time": existing.last_transition_time})
    else:
        stamped = cond.model_copy(update={"last_transition_time": _utc_seconds(now)})
    if existing is None:
        return [*conditions, stamped]
    return [stamped if c.type == cond.type else c for c in conditions]


def _lines(conds: Sequence[Condition]) -> str:
    return "\n".join(f"* {c.type}: {c.message}" if c.message else f"* {c.type}: {c.reason}" for c in conds)


def summary(
    conditions: Sequence[Condition],
    type: str,
    *,
    of: Sequence[str],
    observed_generation: int | None,
    now: dt.datetime,
    negative: Collection[str] = (),
) -> Condition:
    """One condition of ``type`` that folds the conditions named in ``of`` (CAPI v1beta2 summary).

    Conditions in ``negative`` are bad when True (``Deleting``, ``Paused``); all others are bad
    when False. Precedence: any issue → False; else anything Unknown or not yet reported →
    Unknown; else True with reason ``AsExpected``. With one culprit its reason is used; with
    several, ``MultipleIssuesReported``/``MultipleUnknownReported`` and a ``* Type: message``
    line each, in the order of ``of`` (one line for a single culprit too, so the message always
    says which condition it comes from). The result carries ``now``; pass it through
    ``set_condition`` to keep the transition time.
    """
    issues: list[Condition] = []
    unknown: list[Condition] = []
    for name in of:
        found = get(conditions, name)
        if found is None:
            unknown.append(
                new_condition(
                    name, UNKNOWN, NOT_YET_REPORTED, "not yet reported", observed_generation=None, now=now
                )
            )
        elif found.status == UNKNOWN:
            unknown.append(found)
        elif (found.status == TRUE) == (name in negative):
            issues.append(found)
    if issues:
        status: Status = FALSE
        culprits = issues
        several = MULTIPLE_ISSUES
    elif unknown:
        status, culprits, several = UNKNOWN, unknown, MULTIPLE_UNKNOWN
    else:
        return new_condition(type, TRUE, AS_EXPECTED, observed_generation=observed_generation, now=now)
    reason = culprits[0].reason if len(culprits) == 1 else several
    return new_condition(
        type, status, reason, _lines(culprits), observed_generation=observed_generation, now=now
    )
