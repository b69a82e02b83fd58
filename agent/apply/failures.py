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


def redelivery_delay(num_delivered: int, *, cap: float = 60.0) -> float:
    """Redelivery delay for a transient failure: 0.5 s doubling per delivery, capped."""
    return backoff.delay(max(1, num_delivered), base=0.5, cap=cap, jitter=False)


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
    return Decision(Result.RETRY, settle=Settle.NAK, delay=redelivery_delay(num_delivered))
