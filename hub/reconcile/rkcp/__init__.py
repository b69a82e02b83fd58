"""Deciding for one RemoteKamajiControlPlane. Pure.

vocabulary  what it decides from (``Observed``), what it decides (``Plan``) and the actions
published   the intent subject's record (``Published``)
decide      ``reconcile``: the plan for one RKCP, composing the steps below
owner       the owner identity that survives ``clusterctl move``
intents     whether this owner's intent must go (again), and the intent itself
survey      what one survey of the intent stream says is to be read again
secrets     whether the sealed secrets reach CAPI's Secrets
infra       whether and what to write in the InfraCluster's ``spec.controlPlaneEndpoint``
status      its conditions
facts       what its status is computed from
progress    CAPI's RollingOut, ScalingUp, ScalingDown, Available
released    released deletions

The steps import ``vocabulary`` and ``published``, never ``decide``: no cycle.
"""
