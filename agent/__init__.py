"""The site agent: reconciles TenantControlPlanes from the hub's intents and reports back.

apply/            intents → TCPs (pure decisions + the consuming shell)
status/           TCPs and their Secrets → Status and SealedSecrets
cleanup/          anti-entropy: drift, orphans
heartbeat         liveness on kb.site.<site>
deps              what the loops share (connections, keys, publisher, metrics, readiness)
main              process wiring
credential        operator mode: its own key in a Secret, bootstrap and renewal of its JWT
credential_state  pure: the Secret's content, JWT usable, when to renew, readiness
desires           the spec last applied to each TCP, what drift is measured from
doctor            ``doctor agent``'s checks
fieldpaths        the spec fields it sets and compares (list items by index)
legacy            TCPs an older agent wrote, handed over to its server-side apply
metrics           its Prometheus metrics
propagation       the RKCP's labels and annotations on the TCP, merged with others'
publishing        Status, SealedSecrets, Heartbeat onto its subjects
rbac              every permission it uses
settings          its flags
tcps              TCPs as the agent manages them (labels, desired object, drift)
"""

from importlib import metadata

try:
    __version__ = metadata.version("kamaji-broker")
except metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"
