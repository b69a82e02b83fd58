"""The hub: Cluster API control-plane provider for RemoteKamajiControlPlane, working through NATS.

Runs in the management cluster. Imports ``common`` and ``protocol``; never ``agent``, ``fleet``
or ``sandbox`` (import-linter). Its controllers talk to the management cluster through
``common.kube`` and to NATS through ``common.bus``; the pure cores (``reconcile/``, ``mapping/``,
``api/``, ``credentials.rules``, ``controllers.site.placements``, ``grants``) to neither.

api/          the CRD models (RKCP, its template, Site, CAPI's Cluster as read) and the CRDs
mapping/      RKCP (+ Cluster) → TCP spec and coordinates (pure)
ingest/       everything read off the site streams: the consumers, recording, the sealed boxes
              kept, the view of each control plane, the sites' liveness
controllers/  the shells: the RKCP controller, the Site controller, the site streams they share
reconcile/    the pure cores the controllers call
credentials/  operator mode: the agents' bootstrap and renewal, revocation, the hub's own user

main          wiring per leader term or share (ingest → controllers → consumers → site poller)
settings      its flags
metrics       its Prometheus metrics
leader        Lease leader election
shards        sharing the sites among replicas: a Lease each, the share from ``reconcile.shares``
conditions    metav1.Condition helpers
doctor        ``doctor hub``'s checks
rbac          every permission it uses, by scope
grants        where each scope must hold for the settings, and what grants it (pure)
"""
