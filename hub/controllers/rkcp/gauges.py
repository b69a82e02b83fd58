"""The fleet as the hub's metrics show it: control planes by site and phase, those Ready at their
site whose CAPI Secrets lag, and how long each update takes to be Ready.

Owns, per RKCP, what the gauges count it as (a ``Standing``) and the loop time of its pending
update (the publish of a provision intent for a newer generation than the subject held), until
the site runs it Ready. The reconcile hands over each RKCP it finished (``Fleet.reconciled``)
and each it forgot (``Fleet.forget``): one dictionary step and at most two gauge moves each,
never a scan, so the gauges add next to nothing to a reconcile. ``standing``, ``update_generation`` and
``ready_generation`` are pure. Talks to nothing but ``hub.metrics``.

Labels are sites and phases only (bounded: the protocol's phases and the hub's three below),
never an RKCP's name: ten thousand control planes are a handful of series.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Final

from common import objects
from hub import conditions as c
from hub import metrics as hub_metrics
from hub.api import rkcp as api
from hub.reconcile.rkcp import decide, intents, vocabulary
from hub.reconcile.rkcp import status as rkcp_status
from hub.reconcile.rkcp.published import Op

UNKNOWN: Final = "Unknown"
"""The phase of an RKCP whose site has not reported its TenantControlPlane yet."""
DELETING: Final = "Deleting"
"""The phase of an RKCP being deleted, whatever its site last reported."""
NOT_AUTHORIZED: Final = "NotAuthorized"
"""The phase of an RKCP whose placement its Site does not grant (or names no known site)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Standing:
    site: str
    """"" for a placement that is not the site's (not authorized): a tenant's typo adds no series."""
    phase: str
    secrets_behind: bool = False
    """Ready at the site, and its kubeconfig/CA Secrets do not carry the site's latest secrets."""


def standing(o: vocabulary.Observed, plan: vocabulary.Plan) -> Standing:
    """How ``o`` counts, after a reconcile that planned ``plan`` and carried it out."""
    if o.not_authorized:
        return Standing("", NOT_AUTHORIZED)
    site = o.rkcp.spec.site
    if o.rkcp.metadata.deletion_timestamp is not None:
        return Standing(site, DELETING)
    report = decide.report_for_owner(o)
    if report is None:
        return Standing(site, UNKNOWN)
    serving = report.phase in rkcp_status.SERVING_PHASES
    return Standing(site, report.phase, secrets_behind=serving and _secrets_behind(plan.status))


def _secrets_behind(status: api.Status | None) -> bool:
    """``SecretsSynced`` is not True in the status just written (None: no status this time)."""
    if status is None:
        return False
    found = c.get(status.conditions, api.SECRETS_SYNCED)
    return found is None or found.status != c.TRUE


def update_generation(o: vocabulary.Observed, plan: vocabulary.Plan) -> int | None:
    """The generation ``plan`` publishes as an update: a provision intent with another TCP spec
    over the owner's provision intent of an older generation. The first provision is none, nor
    a label change (same generation), nor the same spec again (a re-publish after a key rotation
    or of a lost intent)."""
    held, generation = o.published, o.rkcp.metadata.generation
    if not any(isinstance(a, vocabulary.Publish) and a.op == "provision" for a in plan.actions):
        return None  # first: the rest is asked only of the rare reconcile that publishes
    if held is None or held.op != Op.PROVISION or held.owner_uid != o.owner_uid:
        return None
    if generation <= held.generation:
        return None
    same = held.spec_digest == intents.spec_digest(o.desired_spec, o.desired_metadata)
    return None if same else generation


ROLLOUT: Final = (api.ROLLING_OUT, api.SCALING_UP, api.SCALING_DOWN)
"""CAPI's conditions that are True while what runs at the site is not yet what the spec says."""


def ready_generation(o: vocabulary.Observed, plan: vocabulary.Plan) -> int | None:
    """The generation the site runs Ready, or None: ``Ready`` (``Upgrading`` serves the old
    one) with nothing rolling out or scaling in the status just written. The site's generation
    alone is not enough: the agent reports the intent's generation as soon as it applied it,
    while Kamaji may not have begun the rollout (its TCP still says Ready)."""
    report = decide.report_for_owner(o)
    if report is None or report.phase != "Ready" or plan.status is None:
        return None
    moving = (c.get(plan.status.conditions, kind) for kind in ROLLOUT)
    if any(cond is None or cond.status != c.FALSE for cond in moving):
        return None
    return report.observed_generation


class Gauges:
    """The leader's counts; made with each term's reconciler, on gauges the last term emptied."""

    def __init__(self, metrics: hub_metrics.Metrics) -> None:
        self.metrics = metrics
        self._standing: dict[objects.Key, Standing] = {}
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._placed: collections.Counter[str] = collections.Counter()
        self._behind: collections.Counter[str] = collections.Counter()
        self._updates: dict[objects.Key, tuple[int, float]] = {}
        """The generation of each RKCP's pending update and the loop time it was published."""

    def reconciled(
        self, key: objects.Key, o: vocabulary.Observed, plan: vocabulary.Plan, *, at: float
    ) -> None:
        """``key``'s reconcile carried out ``plan`` (every action succeeded) at loop time ``at``."""
        self.note(key, standing(o, plan))
        pending = self._updates.get(key)
        if pending is not None and (ready_generation(o, plan) or 0) >= pending[0]:
            del self._updates[key]
            self.metrics.update_ready_seconds.labels(o.rkcp.spec.site).observe(max(0.0, at - pending[1]))
        generation = update_generation(o, plan)
        if generation is not None:
            # The newest update is the one timed: Ready at it is Ready at every earlier one too.
            self._updates[key] = (generation, at)

    def note(self, key: objects.Key, now: Standing) -> None:
        before = self._standing.get(key)
        if before == now:
            return
        self._move(before, -1)
        self._standing[key] = now
        self._move(now, +1)

    def forget(self, key: objects.Key) -> None:
        self._move(self._standing.pop(key, None), -1)
        self._updates.pop(key, None)

    def _move(self, s: Standing | None, by: int) -> None:
        if s is None:
            return
        labels = (s.site, s.phase)
        self._counts[labels] += by
        if self._counts[labels] > 0:
            self.metrics.control_planes.labels(*labels).set(self._counts[labels])
        else:
            del self._counts[labels]
            with contextlib.suppress(KeyError):
                self.metrics.control_planes.remove(*labels)
        if not s.site:
            return
        # Every site with a control plane shows a value, 0 too: a dashboard shows 0, not "no
        # data", and a site with none left leaves no series behind.
        self._placed[s.site] += by
        self._behind[s.site] += by if s.secrets_behind else 0
        if self._placed[s.site] > 0:
            self.metrics.secrets_not_synced.labels(s.site).set(self._behind[s.site])
            return
        del self._placed[s.site], self._behind[s.site]
        with contextlib.suppress(KeyError):
            self.metrics.secrets_not_synced.remove(s.site)
