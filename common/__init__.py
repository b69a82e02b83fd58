"""What hub and agent share, below them both: the process kit (service, tasks, health, logs,
settings), the two I/O seams (``bus/``: the only importer of ``nats``; ``kube/``: the only
importer of ``kubernetes_asyncio``), ``doctor/``'s checks, and the operator's files on disk
(keys, NATS configuration and credentials, TLS). Imports ``protocol``, never ``hub`` or ``agent``.

bus/         the NATS seam (see its face)
kube/        the Kubernetes seam (see its face)
doctor/      ``kamaji-broker doctor``'s shared checks

aiotasks      supervised tasks, ``Group`` (tasks run together), keyed locks
backoff       the backoff
conditions    metav1.Condition helpers
durations     ``90s``, ``5m``
files         private, atomic files
health        /healthz, /readyz, /metrics
jwtlifetime   how long a NATS JWT has left, and when that is too little (/readyz and doctor)
keyfiles      the hub's key files
keyretire     retiring a key id
leader        Lease leader election
logs          JSON log lines
natsconfig    nats-server configuration text
natsfiles     the NATS server's files on disk
natsidentity  a JWT identity held in memory (an agent's, renewed) or minted by the process itself
              (the hub's)
natsoperator  operator mode's keys and JWTs on disk (``nats-config --auth operator``)
natsrotation  rotating the operator's and the account's signing keys in two steps (``nats-config
              --rotate-signing-key``, ``--retire-previous-signing-keys``)
objects       reading objects as dicts, their (namespace, name)
service       what hub and agent share: tasks, readiness, health server, NATS connection, Kubernetes
              client; run until a signal
settings      the flags hub and agent share, and the ``ExistingFile``, ``NamespaceList``,
              ``SiteList`` field types
templating    clusterctl's ``${VAR:=default}`` substitution
tlsfiles      the NATS CA and server certificate
"""
