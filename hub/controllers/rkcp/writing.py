"""What the hub writes into the management cluster besides RKCP status: the CAPI Secrets and Events.

``<cluster>-kubeconfig`` (key ``value``) and ``<cluster>-ca`` (``tls.crt``, ``tls.key``), type
``cluster.x-k8s.io/secret``, labelled with the cluster name, owned by the RKCP (controller), and
annotated with the plaintext checksum so an unchanged payload is never written twice.

``write_latest`` is the one path from a sealed box to the CAPI Secrets: open the box the hub
kept since it recorded it, or else the one read from the stream (``hub.ingest.record.Intake.open_latest``),
check it is the box decided on, write. Nothing but the sealed box is held between reconciles
(and that only until it is written, ``hub.ingest.sealed``), and a box that a hub process recorded and
died before writing is read from the stream and written by the next.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Final

from common import kube as ckube
from common import logs
from common.kube import errors as kerrors
from common.kube import events, resources
from hub import metrics as hub_metrics
from hub.api import rkcp as api
from hub.ingest import record
from hub.mapping import tcp
from hub.reconcile.rkcp import vocabulary
from protocol import messages, names

log = logging.getLogger(__name__)

CHECKSUM_ANNOTATION: Final = "kamaji-broker.io/secrets-checksum"
CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"
SECRET_TYPE: Final = "cluster.x-k8s.io/secret"
COMPONENT: Final = "kamaji-broker-hub"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE


class OwnerMismatch(ValueError):
    """Sealed secrets were about to be written for an RKCP other than the one they name."""


def new_secrets(
    action: vocabulary.WriteSecrets,
    payload: messages.SecretsPayload,
    r: api.RemoteKamajiControlPlane,
    *,
    cluster_name: str,
    owner_uid: str,
) -> list[dict[str, Any]]:
    """The two CAPI Secrets; raises OwnerMismatch unless the sealed message names ``owner_uid``,
    ``r``'s owner identity (``vocabulary.Observed.owner_uid``). Owned by ``r`` by its own uid.

    The plan decides this already (``hub.reconcile.rkcp.secrets.decide_secrets``); checking again at the
    one place
    that writes secret material keeps a future planning bug from handing a tenant another's
    admin kubeconfig and CA key.
    """
    if not action.owner_uid or action.owner_uid != owner_uid:
        raise OwnerMismatch(
            f"secrets for {r.metadata.namespace}/{r.metadata.name} name another owner; not written"
        )
    owner = {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": r.metadata.name,
        "uid": r.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    p = payload
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SECRET_TYPE,
            "metadata": {
                "name": secret_name,
                "namespace": r.metadata.namespace,
                "labels": {CLUSTER_NAME_LABEL: cluster_name},
                "annotations": {CHECKSUM_ANNOTATION: action.checksum},
                "ownerReferences": [owner],
            },
            "stringData": data,
        }
        for secret_name, data in (
            (names.capi_kubeconfig(cluster_name), {names.CAPI_KUBECONFIG_KEY: p.kubeconfig}),
            (names.capi_ca(cluster_name), {"tls.crt": p.ca_crt, "tls.key": p.ca_key}),
        )
    ]


async def write_latest(
    kube: ckube.Kube,
    reader: record.Intake,
    action: vocabulary.WriteSecrets,
    r: api.RemoteKamajiControlPlane,
    *,
    cluster_name: str,
    owner_uid: str,
    metrics: hub_metrics.Metrics,
) -> bool:
    """Open (the kept box, or the stream's), write. False when the box is no longer the one
    decided on or does not open (what was found is recorded: the next reconcile decides from it)."""
    opened = await reader.open_latest(tcp.coordinates(r))
    if opened is None:
        return False
    sealed, payload = opened
    if (sealed.checksum, sealed.owner_uid) != (action.checksum, action.owner_uid):
        return False
    for body in new_secrets(action, payload, r, cluster_name=cluster_name, owner_uid=owner_uid):
        await kube.create_or_replace(resources.SECRET, body, namespace=r.metadata.namespace, attempts=3)
    metrics.secrets_written.inc()
    return True


async def record_event(kube: ckube.Kube, e: vocabulary.Event, r: api.RemoteKamajiControlPlane) -> None:
    """Create the Event; a failure is logged, never raised (an event is not worth a retry loop)."""
    body = events.new_event(
        RKCP,
        namespace=r.metadata.namespace,
        name=r.metadata.name,
        uid=r.metadata.uid,
        type=e.type,
        reason=e.reason,
        message=e.message,
        component=COMPONENT,
        now=dt.datetime.now(dt.UTC),
    )
    try:
        await kube.create(resources.EVENT, body, namespace=r.metadata.namespace)
    except kerrors.KubeError as exc:
        about = logs.about(
            kind=RKCP.kind, namespace=r.metadata.namespace, name=r.metadata.name, site=r.spec.site
        )
        log.warning(
            "event %s for %s/%s not recorded: %s",
            e.reason,
            r.metadata.namespace,
            r.metadata.name,
            exc,
            extra=about,
        )
