"""The site agent: reconciles TenantControlPlanes from the hub's intents and reports back.

apply/       intents → TCPs (pure decisions + the consuming shell)
status/      TCPs and their Secrets → Status and SealedSecrets
cleanup/     anti-entropy: drift, orphans
tcp/         TCPs as the agent manages them: labels, the desired object, drift, field paths
credential/  operator mode: its own key in a Secret, bootstrap and renewal of its JWT

main         process wiring
deps         what the loops share (connections, keys, publisher, metrics, readiness)
heartbeat    liveness on kb.site.<site>
publishing   Status, SealedSecrets, Heartbeat onto its subjects
settings     its flags
metrics      its Prometheus metrics
doctor       ``doctor agent``'s checks
rbac         every permission it uses
"""

from importlib import metadata

try:
    __version__ = metadata.version("kamaji-broker")
except metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"
