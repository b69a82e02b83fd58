"""Which sites the hub serves, and their NATS topology (streams and consumers), made to exist.

Owns the set of sites whose topology was last ensured (at start, when the Site status writer
first looks at a Site, ``ensure_site``, and by the reconcile's ``EnsureTopology`` when an RKCP is
placed at a site not yet ensured). A site is known when ``--sites`` names it or a Site
object does (``hub.controllers.site.controller.SiteSync``'s cache): the hub keeps streams and consumers
for those and no
other, so a tenant cannot make the hub create a consumer for a site name it invents.
Talks to NATS (``common.bus.ensure_topology``).
"""

from __future__ import annotations

from collections.abc import Callable

from common import bus
from hub.controllers import cache
from hub.controllers.deps import Settings
from protocol import labels


class SiteStreams:
    def __init__(
        self,
        settings: Settings,
        conn: bus.Connection,
        site_objects: cache.ObjectCache,
        *,
        holds: Callable[[str], bool] = lambda site: True,
    ) -> None:
        self.settings = settings
        self.conn = conn
        self.site_objects = site_objects
        self.holds = holds
        """Whether this replica leads a site (the others are another replica's to serve)."""
        self.sites: frozenset[str] = frozenset()
        """The sites whose streams and consumers were last ensured."""

    def known_sites(self) -> frozenset[str]:
        """Sites named by ``--sites`` or by a Site object, that this replica leads: the hub keeps
        their streams and consumers and polls their heartbeats. An RKCP naming any other site is
        not authorized, so a tenant cannot make the hub create a consumer for a site name it
        invents."""
        named = self.settings.static_sites | {name for _, name in self.site_objects}
        return frozenset(site for site in named if self.holds(site))

    def ensured(self, site: str) -> bool:
        """Whether ``site``'s stream and consumers were made (or found) by this hub."""
        return site in self.sites

    def ready(self, site: str) -> bool:
        """Whether nothing is to be created for ``site``: its topology was ensured, or it is not
        known (an RKCP placed there is not authorized). Else the reconcile plans ``EnsureTopology``."""
        return site in self.sites or site not in self.known_sites()

    async def ensure_site(self, site: str) -> None:
        """Make ``site``'s stream and consumers exist unless already ensured: a Site onboarded
        before any control plane is placed there gets them too (its agent's heartbeats land,
        its consumer exists). One set lookup once ensured, so it costs nothing per look."""
        if site not in self.sites and labels.problem(site) is None:
            await self.ensure()

    async def ensure(self) -> None:
        # A Site whose name is no DNS label (Kubernetes allows dots) can have no stream: it is
        # left out, so it cannot keep every other site from getting theirs.
        wanted = frozenset(site for site in self.known_sites() if labels.problem(site) is None)
        if wanted and wanted <= self.sites:
            return
        s = self.settings
        # Only the sites not ensured yet: a thousand Sites appearing one by one cost a thousand
        # sites' requests, not half a million.
        missing = wanted - self.sites
        await bus.ensure_topology(
            self.conn, sites=sorted(missing), replicas=s.replicas, prefix=s.prefix, limits=s.limits
        )
        self.sites = (self.sites & wanted) | missing
