"""The site agent: reconciles TenantControlPlanes from the hub's intents and reports back.

apply/     intents → TCPs (pure decisions + the consuming shell)
status/    TCPs and their Secrets → Status and SealedSecrets
cleanup/   anti-entropy: drift, orphans
heartbeat  liveness on kb.site.<site>
deps       what the loops share (connections, keys, publisher, metrics, readiness)
main       process wiring
"""

from importlib import metadata

try:
    __version__ = metadata.version("kamaji-broker")
except metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"
