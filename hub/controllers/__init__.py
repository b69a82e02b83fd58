"""The hub's controllers: thin shells that observe, call a pure reconcile, act, patch status once.

acting            the actions carried out
bootstrapsecrets  operator mode: a new Site's bootstrap Secret, until its agent used it
cache             watched objects as compact bytes
checksums         CAPI Secret checksums from a watch
config            its ``Settings`` and ``Deps``
fleet             the metrics of the fleet: control planes by site and phase, Secrets behind,
                  update-to-ready
index             RKCPs by coordinates and owner
informing         RKCP, Cluster and Site watches
infra             the InfraCluster's endpoint, any kind (discovery, read, merge patch)
published         the latest intent per subject and the fenced publish
queue             the work queue
reconciling       one reconcile: observe (reads only) → decide → act → status
released          purging released deletions
rkcp              the RKCP controller, wiring its parts and forgetting a deleted RKCP in one place
site              the Site status writer
sitecredentials   operator mode: the Site's finalizer, and revoking its agent when it is deleted
status_writes     at most one status patch per RKCP per second
topology          the sites served and their streams
writing           CAPI Secrets (open the kept or read box, write) and Events

Each calls a pure core (``hub.reconcile``, ``hub.mapping``) and does what it decides through
``common.kube`` (the management cluster) and ``common.bus`` (NATS).
"""
