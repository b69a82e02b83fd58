"""The hub: Cluster API control-plane provider for RemoteKamajiControlPlane, working through NATS.

Runs in the management cluster. Imports ``common`` and ``protocol``; never ``agent`` or
``sandbox`` (import-linter). Its controllers talk to the management cluster through
``common.kube`` and to NATS through ``common.bus``; the pure cores (``reconcile/``, ``mapping``)
to neither.

controllers/  the shells: informers, reconcile loops, the site streams' consumers
reconcile/    the pure cores the controllers call

api                 the RKCP model
api_components      its addons, kubelet, components and Deployment
api_network         its ``network`` (Service, Ingress, Gateway, load balancer)
apimachinery        what the models share
boxes               opening a sealed box, and the boxes kept (sealed, within a byte budget) until
                    written
cluster_api         CAPI's Cluster as read
continuity          whether the hub saw every delivery
crdgen              the CRDs
credentialrules     whether a request gets a credential, and what it revokes (pure)
credentialservice   operator mode: answers the agents' bootstrap and renew requests, records the key
                    in the Site
doctor              ``doctor hub``'s checks
fleet               every site's verdict and the fleet's problems
fleet_rkcp          a control plane's phase and why it is not Ready (pure)
fleetcolumns        tables and lines fitted to a terminal's width, cut at a word (pure)
fleetreading        reading the fleet from the management cluster and the bus (the observer's user)
fleetview           the status table, its JSON, the live view's events
fleetwording        why not Ready in words, timestamps as ages (pure)
grants              where each scope must hold for the settings, and what grants it (pure)
holdings            the subjects a stream is known to hold
ingest              the consumer of each site's stream (no acks; a gap in its deliveries reads the
                    site again), emitting changed coordinates
intake              check, decode, record what a site sent; ``load``, ``open_latest`` (the kept box,
                    or the stream's), what each site's stream holds
main                wiring per leader term (intake → controller → ingest → site poller)
mapping             RKCP (+ Cluster) → TCP spec and coordinates
mapping_deployment  → ``controlPlane.deployment``
mapping_network     → ``networkProfile``, service, ingress, gateway
metrics             its Prometheus metrics
observations        the pure view of each control plane
operatormode        the hub's ``--nats-operator-dir`` checked, and the NATS user it mints itself
placements          may this namespace place there
rbac                every permission it uses, by scope
revocation          revoking NATS users: the account JWT with the revocation, pushed to the resolver
settings            its flags
site_api            the Site model
sites               heartbeats and backlog
structural          pydantic schema → structural OpenAPI
template_api        the RKCP template (ClusterClass)
"""
