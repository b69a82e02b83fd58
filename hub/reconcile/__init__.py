"""Pure reconcile functions of the hub: observations in, actions and status out (no I/O, no clock).

owner           the owner identity that survives ``clusterctl move``
released        released deletions
rkcp            decide for one RKCP
rkcp_actions    what it asks the shell to do
rkcp_facts      what its status is computed from
rkcp_infra      whether and what to write in the InfraCluster's ``spec.controlPlaneEndpoint``
rkcp_intents    whether this owner's intent must go (again)
rkcp_observed   what it decides from and what it decides
rkcp_progress   CAPI's RollingOut, ScalingUp, ScalingDown, Available
rkcp_published  the intent subject's record
rkcp_secrets    whether the sealed secrets reach CAPI's Secrets
rkcp_status     its conditions
site_status     the Site's conditions

Pure: imports nothing of ``common.bus`` or ``common.kube``; ``hub.controllers`` runs them.
"""
