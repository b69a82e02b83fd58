"""What hub and agent share, below them both: the process kit (service, tasks, health, logs,
settings), the two I/O seams (``bus/``: the only importer of ``nats``; ``kube/``: the only
importer of ``kubernetes_asyncio``), ``doctor/``'s checks, and ``files/``: the operator's files
on disk (keys, NATS configuration and credentials, TLS). Imports ``protocol``, never ``hub`` or
``agent``.

bus/         the NATS seam (see its face)
kube/        the Kubernetes seam (see its face)
doctor/      ``kamaji-broker doctor``'s shared checks
files/       the operator's files on disk (see its face)

service      what hub and agent share: tasks, readiness, health server, NATS connection,
             Kubernetes client; run until a signal
aiotasks     supervised tasks, ``Group`` (tasks run together), keyed locks
settings     the flags hub and agent share, and the ``ExistingFile``, ``NamespaceList``,
             ``SiteList`` field types
health       /healthz, /readyz, /metrics
logs         JSON log lines
backoff      the backoff
durations    ``90s``, ``5m``
objects      reading objects as dicts, their (namespace, name)
jwtlifetime  how long a NATS JWT has left, and when that is too little (/readyz and doctor)
"""
