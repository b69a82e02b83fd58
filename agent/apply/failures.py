"""What the API's refusal of an action on a TCP means for its intent: pure, no I/O.

``after_error`` maps the refusal onto a ``intents.Decision`` (rejected for good, or retried
after ``redelivery_delay``), so every outcome of an intent is decided by tables;
``exists_after_all`` says whether a create decided without reading found a TCP after all.
"""

from __future__ import annotations

from agent.apply.intents import Context, Decision, Report
from agent.apply.outcomes import Result, Settle
from common import backoff
from common.kube import errors as kerrors
from protocol import messages

UID_FIELD = "metadata.uid"
"""The field a 422 names when an apply's uid is another object's: a race, not a bad intent
(whatever else that other TCP's validation says beside it)."""


WHY_LENGTH = 300
"""How much of the API's refusal a retry's log line keeps."""


def redelivery_delay(num_delivered: int, *, cap: float = 60.0) -> float:
    """Redelivery delay for a transient failure: 0.5 s doubling per delivery, capped."""
    return backoff.delay(max(1, num_delivered), base=0.5, cap=cap, jitter=False)


MESSAGE_LENGTH = 1000
"""How much of a refusal's message a Rejected report carries."""

NOT_DECLARED = "field not declared in schema"
"""What the API server says when a server-side apply names a field the CRD does not have (a
500, though nothing will change until the CRD does)."""


def site_refusal(error: kerrors.KubeError) -> str | None:
    """The reason a refusal is the site's answer to this intent rather than a passing failure:

    - ``AdmissionDenied``: an admission webhook (Kamaji's) denied the request (a 403 whose
      message says so; an RBAC refusal says ``forbidden: User``);
    - ``FieldNotDeclared``: the site's TenantControlPlane CRD lacks a field of the intent (an
      older Kamaji).

    Either stands until the intent or the site changes: it is reported, and the intent is tried
    again only after the slow ``namespace_retry``, never in a fast loop. None for anything else.
    """
    if error.status == 403 and "admission webhook" in error.message and "denied the request" in error.message:
        return "AdmissionDenied"
    if error.status >= 500 and NOT_DECLARED in error.message:
        return "FieldNotDeclared"
    return None


def exists_after_all(error: kerrors.KubeError) -> bool:
    """Whether a create decided without reading failed because a TCP of that name exists.

    One the cache does not show (unmanaged, another site's, or the watch lagging): the intent
    is then read and decided again on what is there, as if the cache had not been asked.
    """
    return isinstance(error, kerrors.Conflict) and error.reason == "AlreadyExists"


def after_error(
    intent: messages.Intent, error: kerrors.KubeError, *, num_delivered: int, ctx: Context
) -> Decision:
    """The decision once the API refused the action; transient failures are retried with backoff."""
    if isinstance(error, kerrors.Invalid) and UID_FIELD not in error.fields:
        return Decision(Result.REJECTED, report=Report("Rejected", "Invalid", error.message or str(error)))
    refusal = site_refusal(error)
    if refusal is not None:
        return Decision(
            Result.REJECTED,
            report=Report("Rejected", refusal, error.message[:MESSAGE_LENGTH]),
            settle=Settle.NAK,
            delay=ctx.namespace_retry,
        )
    if isinstance(error, kerrors.NotFound) and error.kind == "namespaces":
        return Decision(
            Result.REJECTED,
            report=Report(
                "Rejected",
                "NamespaceNotFound",
                f"namespace {intent.namespace!r} does not exist at site {ctx.site!r}",
            ),
            settle=Settle.NAK,
            delay=ctx.namespace_retry,
        )
    # Anything else is transient or raced (a failed uid precondition, another object's uid in
    # an apply, AlreadyExists, 5xx, no answer): decide again on redelivery, after a backoff.
    return Decision(
        Result.RETRY, settle=Settle.NAK, delay=redelivery_delay(num_delivered), why=str(error)[:WHY_LENGTH]
    )
