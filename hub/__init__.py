"""The hub: Cluster API control-plane provider for RemoteKamajiControlPlane, working through NATS.

Runs in the management cluster. The pure foundations:

api         the RemoteKamajiControlPlane models (spec, status, conditions) and the Cluster fields read
crdgen      the CRD in deploy/crds/, generated from ``api`` (``python -m hub.crdgen [--check]``)
mapping     RKCP + owner Cluster → TenantControlPlane spec, and its (site, namespace, name)

Imports ``common`` and ``protocol``; never ``agent`` or ``sandbox`` (import-linter).
"""
