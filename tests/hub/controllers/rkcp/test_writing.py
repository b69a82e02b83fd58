"""hub.controllers.rkcp.writing: the CAPI Secrets exactly as CAPI expects them (pure builder), and
written from the box the hub's consumer delivered, without reading it from the stream again."""

from __future__ import annotations

import pytest

from common import bus
from common.kube import resources
from hub.api import rkcp as api
from hub.controllers.rkcp import writing
from hub.reconcile.rkcp import vocabulary
from protocol import messages, streams, subjects
from protocol.coordinates import Coordinates
from sandbox import natsd
from tests import helpers
from tests.hub import reads as stream_reads
from tests.hub.conftest import SITE, World, create_pair


def test_capi_secrets() -> None:
    r = api.RemoteKamajiControlPlane.parse(
        {
            "metadata": {"name": "cp1", "namespace": "team-a", "uid": "u-1"},
            "spec": {"site": "s", "version": "v1.31.0"},
        }
    )
    payload = messages.SecretsPayload(kubeconfig="KC", ca_crt="CRT", ca_key="KEY")
    kc, ca = writing.new_secrets(
        vocabulary.WriteSecrets(checksum="c1", owner_uid="u-1"),
        payload,
        r,
        cluster_name="cluster-1",
        owner_uid="u-1",
    )
    assert (kc["metadata"]["name"], ca["metadata"]["name"]) == ("cluster-1-kubeconfig", "cluster-1-ca")
    assert kc["stringData"] == {"value": "KC"} and ca["stringData"] == {"tls.crt": "CRT", "tls.key": "KEY"}
    for s in (kc, ca):
        assert s["type"] == "cluster.x-k8s.io/secret" and s["metadata"]["namespace"] == "team-a"
        assert s["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "cluster-1"}
        assert s["metadata"]["annotations"] == {writing.CHECKSUM_ANNOTATION: "c1"}
        [owner] = s["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            api.KIND,
            "cp1",
            "u-1",
            True,
        )


@pytest.mark.parametrize("owner_uid", ["u-victim", ""])
def test_secrets_naming_another_owner_are_never_built(owner_uid: str) -> None:
    r = api.RemoteKamajiControlPlane.parse(
        {
            "metadata": {"name": "grab", "namespace": "evil", "uid": "u-evil"},
            "spec": {"site": "s", "version": "v1.31.0"},
        }
    )
    payload = messages.SecretsPayload(kubeconfig="KC", ca_crt="CRT", ca_key="KEY")
    with pytest.raises(writing.OwnerMismatch, match="evil/grab") as info:
        writing.new_secrets(
            vocabulary.WriteSecrets(checksum="c1", owner_uid=owner_uid),
            payload,
            r,
            cluster_name="grab",
            owner_uid="u-evil",
        )
    assert "KEY" not in str(info.value) and "KC" not in str(info.value)


def test_a_moved_object_gets_the_secrets_of_its_identity_owned_by_its_own_uid() -> None:
    """After clusterctl move the sealed secrets name the stamped identity (the first uid), the
    object has a new uid: the Secrets are built, and owned by the object as it is now."""
    r = api.RemoteKamajiControlPlane.parse(
        {
            "metadata": {
                "name": "cp1",
                "namespace": "team-a",
                "uid": "u-new",
                "annotations": {api.OWNER_UID_ANNOTATION: "u-first"},
            },
            "spec": {"site": "s", "version": "v1.31.0"},
        }
    )
    payload = messages.SecretsPayload(kubeconfig="KC", ca_crt="CRT", ca_key="KEY")
    action = vocabulary.WriteSecrets(checksum="c1", owner_uid="u-first")
    for s in writing.new_secrets(action, payload, r, cluster_name="c", owner_uid="u-first"):
        assert [o["uid"] for o in s["metadata"]["ownerReferences"]] == ["u-new"]
    with pytest.raises(writing.OwnerMismatch):
        writing.new_secrets(action, payload, r, cluster_name="c", owner_uid="u-new")


async def test_a_box_the_consumer_delivered_is_written_without_a_read_of_the_stream(
    world: World, conn: bus.Connection, nats_server: natsd.NatsServer
) -> None:
    """The whole path (hub and agent, a worker-less hub whose reconciles the test makes): after
    the first look at the control plane (``Intake.load``), the site's sealed box reaches the CAPI
    Secrets with no read of the secret subject, as the server counts the reads."""
    coords, key = Coordinates(SITE, "tenants", "cp1"), ("default", "cp1")
    controller = world.start_hub(workers=0)
    world.start_agent()
    stream = streams.site_stream_name(SITE, prefix=world.prefix)
    async with stream_reads.watching(nats_server.url, stream) as reads:
        await create_pair(world)
        await helpers.eventually(lambda: controller.maps(coords), what="the RKCP indexed")
        await controller.reconciler.sync(key)  # the first look: load reads the streams
        assert controller.observations.loaded(coords)
        await reads.mark(conn)

        async def written() -> bool:
            await controller.reconciler.sync(key)  # what a worker does
            kc = await world.mgmt.get_or_none(resources.SECRET, "cp1-cluster-kubeconfig", namespace="default")
            return kc is not None

        await helpers.eventually(written, within=15, every=0.1, what="the CAPI Secrets written")
        secret = subjects.secret(*coords, prefix=world.prefix)
        assert secret not in await reads.mark(conn)
    held = controller.observations.get(coords)
    assert held is not None and held.sealed_seq > 0  # delivered by the consumer, after the load
    assert world.hub_metrics.registry.get_sample_value("kb_hub_secrets_written_total") == 1.0
    assert len(controller.observations.boxes) == 0  # written: nothing kept
