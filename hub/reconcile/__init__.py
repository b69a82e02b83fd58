"""Pure reconcile functions of the hub: observations in, actions and status out (no I/O, no clock).

rkcp/   deciding for one RemoteKamajiControlPlane (see its face)
site    the Site's conditions
shares  which hub replica leads which site, when the sites are shared among replicas

Pure: imports nothing of ``common.bus`` or ``common.kube`` (import-linter); ``hub.controllers``
runs them.
"""
