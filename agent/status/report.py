"""What the agent reports about one TenantControlPlane: observed objects → wire messages.

Pure: no I/O, no clock reads (``now`` is passed in). The status loop keeps the cache of TCPs
and Secrets (``agent.status.cache``), and its sync (``agent.status.syncing``) calls these to
decide what to publish:

- ``phase_of`` maps Kamaji's ``status.kubernetesResources.version.status`` onto the wire Phase;
- ``new_status`` builds the Status (NotReady, reason ``Drifted``, while a field we own was
  changed at the site and is being reverted); ``significant`` is the part whose change is worth
  a publish;
- ``payload`` reads the two generated Secrets into the plaintext the hub gets, ``checksum``
  fingerprints it, ``new_sealed`` seals it to the hub (the only step here that draws randomness).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
from collections.abc import Mapping
from typing import Any, Final

from agent.tcp import managed
from common import objects
from protocol import keys, messages, names, sealing

CA_CRT: Final = "ca.crt"
CA_KEY: Final = "ca.key"
DRIFTED: Final = "Drifted"
"""The reason of a NotReady Status while fields we own differ from what we applied."""

# Kamaji's version.status values (its CRD enum) onto the wire phases. The transient states that
# are not an upgrade (CA rotation, datastore migration) read as Provisioning to the hub: the
# control plane is being worked on and is not Ready; WriteLimited (datastore quota reached)
# and Unknown are degraded states, so NotReady. The reason keeps Kamaji's own word.
_PHASES: Final[Mapping[str, messages.Phase]] = {
    "Provisioning": "Provisioning",
    "CertificateAuthorityRotating": "Provisioning",
    "Migrating": "Provisioning",
    "Upgrading": "Upgrading",
    "Ready": "Ready",
    "NotReady": "NotReady",
    "WriteLimited": "NotReady",
    "Unknown": "NotReady",
    "Sleeping": "Sleeping",
}

Significant = tuple[Any, ...]


def _count(value: Any) -> int:
    """A replica count as the wire wants it: a non-negative int, 0 for anything unreadable."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return 0
    try:
        return max(0, int(value))
    except ValueError:
        return 0


def phase_of(tcp: Mapping[str, Any]) -> tuple[messages.Phase, str]:
    """(phase, reason) of a TCP. A deletion wins over any status; no status yet is Pending."""
    if managed.deleting(tcp):
        return "Deleting", "DeletionRequested"
    kamaji = objects.dig(tcp, "status", "kubernetesResources", "version", "status")
    if not kamaji:
        return "Pending", "AwaitingKamaji"
    phase = _PHASES.get(str(kamaji))
    if phase is None:
        # A value from a newer Kamaji: not Ready as far as we can tell, and the reason says why.
        return "NotReady", f"Unrecognized{kamaji}"
    return phase, str(kamaji)


def endpoint_of(value: Any) -> messages.Endpoint | None:
    """``status.controlPlaneEndpoint`` (``host:port``, ``[v6]:port``; a scheme is tolerated)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0]
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            return None
        if ":" in host:
            # An unbracketed IPv6 address with a port appended: accept it only if what remains
            # is an address, otherwise we would be guessing where the address ends.
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                return None
    if not host or not port_text.isdigit():
        return None
    port = int(port_text)
    if not 0 < port <= 65535:
        return None
    return messages.Endpoint(host=host, port=port)


def new_status(
    tcp: Mapping[str, Any],
    *,
    site: str,
    now: dt.datetime,
    secrets_checksum: str = "",
    desired: Mapping[str, Any] | None = None,
) -> messages.Status:
    """The Status of an observed TCP (its owner, generation and intent from our annotations);
    ``desired``: the spec of the intent it runs, when known (``agent.tcp.desires``), to tell drift."""
    meta = managed.meta(tcp)
    applied = managed.applied(tcp, site=site)
    phase, reason = phase_of(tcp)
    message = ""
    if phase != "Deleting" and applied is not None and managed.drifted(tcp, desired):
        # Whatever Kamaji says, this is not the control plane the hub asked for:
        # never Ready with the wanted version while a site admin's edit is being reverted.
        phase, reason = "NotReady", DRIFTED
        message = "fields kamaji-broker applied were changed at the site: reverting them to the latest intent"
    deployment = objects.dig(tcp, "status", "kubernetesResources", "deployment") or {}
    if not isinstance(deployment, Mapping):
        deployment = {}
    version = objects.dig(tcp, "status", "kubernetesResources", "version", "version") or objects.dig(
        tcp, "spec", "kubernetes", "version"
    )
    return messages.Status(
        site=site,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        owner_uid=applied.owner_uid if applied else "",
        observed_generation=applied.generation if applied else 0,
        intent_seq=applied.intent_seq if applied else 0,
        phase=phase,
        reason=reason,
        version=str(version or ""),
        endpoint=endpoint_of(objects.dig(tcp, "status", "controlPlaneEndpoint")),
        replicas=_count(deployment.get("replicas")),
        ready_replicas=_count(deployment.get("readyReplicas")),
        available_replicas=_count(deployment.get("availableReplicas")),
        updated_replicas=_count(deployment.get("updatedReplicas")),
        unavailable_replicas=_count(deployment.get("unavailableReplicas")),
        secrets_checksum=secrets_checksum,
        message=message,
        observed_at=now,
    )


def deleted_status(
    *, site: str, namespace: str, name: str, owner_uid: str, intent_seq: int, now: dt.datetime
) -> messages.Status:
    """The TCP is gone from the site (whoever deleted it)."""
    return messages.Status(
        site=site,
        namespace=namespace,
        name=name,
        owner_uid=owner_uid,
        intent_seq=intent_seq,
        phase="Deleted",
        reason="NotFound",
        observed_at=now,
    )


def significant(status: messages.Status) -> Significant:
    """The fields whose change is worth a publish: everything but ``observed_at`` and ``message``."""
    return (
        status.phase,
        status.reason,
        status.version,
        status.endpoint,
        status.replicas,
        status.ready_replicas,
        status.available_replicas,
        status.updated_replicas,
        status.unavailable_replicas,
        status.observed_generation,
        status.intent_seq,
        status.owner_uid,
        status.secrets_checksum,
    )


def tcp_names_of_secret(secret_name: str) -> tuple[str, ...]:
    """The TCP names whose generated Secrets could be called ``secret_name`` (none, or one):
    the inverse of ``names.kamaji_kubeconfig`` and ``names.kamaji_ca``."""
    for suffix in (names.KAMAJI_KUBECONFIG_SUFFIX, names.KAMAJI_CA_SUFFIX):
        if secret_name.endswith(suffix) and len(secret_name) > len(suffix):
            return (secret_name[: -len(suffix)],)
    return ()


def belongs(secret: Mapping[str, Any], tcp: Mapping[str, Any]) -> bool:
    """Whether ``secret`` may be reported for ``tcp``.

    Kamaji sets an ownerReference to the TCP on the Secrets it generates; a Secret owned by
    another uid is a leftover of an earlier TCP of the same name (garbage collection pending),
    and sealing it would hand the new owner a stale CA. A Secret without owners is accepted.
    """
    refs = managed.meta(secret).get("ownerReferences") or ()
    if not refs:
        return True
    uid = managed.meta(tcp).get("uid")
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs)


def _data(secret: Mapping[str, Any], key: str) -> str | None:
    value = (secret.get("data") or {}).get(key)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def payload(
    kubeconfig_secret: Mapping[str, Any] | None,
    ca_secret: Mapping[str, Any] | None,
    *,
    key: str,
) -> messages.SecretsPayload | None:
    """The plaintext for the hub; None until both Secrets hold every key needed."""
    if kubeconfig_secret is None or ca_secret is None:
        return None
    kubeconfig = _data(kubeconfig_secret, key)
    ca_crt = _data(ca_secret, CA_CRT)
    ca_key = _data(ca_secret, CA_KEY)
    if not kubeconfig or not ca_crt or not ca_key:
        return None
    return messages.SecretsPayload(kubeconfig_key=key, kubeconfig=kubeconfig, ca_crt=ca_crt, ca_key=ca_key)


def checksum(plaintext: messages.SecretsPayload | None) -> str:
    """SHA-256 of the encoded payload; "" when there is none yet."""
    if plaintext is None:
        return ""
    return sealing.checksum(messages.encode(plaintext))


def new_sealed(
    tcp: Mapping[str, Any],
    plaintext: messages.SecretsPayload,
    *,
    site: str,
    recipient: keys.PublicKey,
    now: dt.datetime,
) -> messages.SealedSecrets:
    """The payload sealed to ``recipient`` (randomized: each call gives another ciphertext)."""
    meta = managed.meta(tcp)
    applied = managed.applied(tcp, site=site)
    encoded = messages.encode(plaintext)
    return messages.SealedSecrets(
        site=site,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        owner_uid=applied.owner_uid if applied else "",
        recipient_key_id=recipient.key_id,
        ciphertext=sealing.seal(encoded, recipient),
        checksum=sealing.checksum(encoded),
        observed_at=now,
    )
