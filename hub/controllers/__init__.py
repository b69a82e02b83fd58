"""The hub's controllers: thin shells that observe, call a pure reconcile, act, patch status once.

rkcp/    the RemoteKamajiControlPlane controller (see its face)
site/    the Site controller: status, credentials, bootstrap Secrets, placements (a pure decision)

deps     its ``Settings`` and ``Deps`` (what the controllers share)
cache    watched objects as compact bytes
queue    the work queue
multimap a key to its few values, for the indexes
streams  the sites served and their streams and consumers

Each calls a pure core (``hub.reconcile``, ``hub.mapping``) and does what it decides through
``common.kube`` (the management cluster) and ``common.bus`` (NATS). ``rkcp/`` uses ``site/``
(placements, the Site watch), never the other way.
"""
