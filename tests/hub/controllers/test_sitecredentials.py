"""hub.controllers.sitecredentials on the management cluster's emulator: the Site's finalizer,
what a deletion revokes, and clusterctl move (the source's copy deleted: nothing revoked).

``revoke`` is the seam to NATS (``hub.revocation`` on a real server is proven in
tests/security/test_operator_mode.py and tests/hub/test_operator_process.py); here it records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub import crdgen, credentialrules, site_api
from hub.controllers import sitecredentials
from hub.reconcile import owner
from sandbox import kubeapi

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.apply_crd_files([CRDS / crdgen.SITE_FILENAME])
    k = await ckube.connect(in_cluster=False, kubeconfig=server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield k
    await k.close()
    await server.stop()


class Revoked:
    def __init__(self) -> None:
        self.keys: list[str] = []

    async def __call__(self, keys: Mapping[str, int]) -> None:
        self.keys += list(keys)


async def _site(
    kube: ckube.Kube, *, key: str = "", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    body = site_api.manifest("site-a")
    if annotations:
        body["metadata"]["annotations"] = annotations
    await kube.create(resources.SITE, body)
    if key:
        await kube.patch(
            resources.SITE, "site-a", {"status": {"credential": {"publicKey": key}}}, subresource="status"
        )
    return await kube.get(resources.SITE, "site-a")


async def _converge(kube: ckube.Kube, sc: sitecredentials.SiteCredentials) -> dict[str, Any] | None:
    """Sync the Site as its watch would, until nothing changes (or it is gone)."""
    for _ in range(4):
        obj = await kube.get_or_none(resources.SITE, "site-a")
        if obj is None:
            return None
        await sc.sync(obj)
    return await kube.get_or_none(resources.SITE, "site-a")


async def test_a_live_site_gets_the_finalizer_and_its_deletion_revokes_the_key(kube: ckube.Kube) -> None:
    revoked = Revoked()
    sc = sitecredentials.SiteCredentials(kube, revoked)
    await _site(kube, key="UAGENT")
    live = await _converge(kube, sc)
    assert live is not None and sitecredentials.FINALIZER in live["metadata"]["finalizers"]
    await kube.delete(resources.SITE, "site-a")
    assert await _converge(kube, sc) is None
    assert revoked.keys == ["UAGENT"]


async def test_a_site_without_a_credential_goes_without_a_revocation(kube: ckube.Kube) -> None:
    revoked = Revoked()
    sc = sitecredentials.SiteCredentials(kube, revoked)
    await _site(kube)
    await _converge(kube, sc)
    await kube.delete(resources.SITE, "site-a")
    assert await _converge(kube, sc) is None
    assert revoked.keys == []


async def test_clusterctl_move_deleting_the_source_copy_revokes_nothing(kube: ckube.Kube) -> None:
    revoked = Revoked()
    sc = sitecredentials.SiteCredentials(kube, revoked)
    await _site(kube, key="UAGENT")
    await _converge(kube, sc)
    await kube.patch(resources.SITE, "site-a", {"metadata": {"annotations": {owner.DELETE_FOR_MOVE: ""}}})
    await kube.delete(resources.SITE, "site-a")
    assert await _converge(kube, sc) is None
    assert revoked.keys == []


async def test_a_site_marked_for_move_gets_no_finalizer(kube: ckube.Kube) -> None:
    sc = sitecredentials.SiteCredentials(kube, Revoked())
    await _site(kube, annotations={owner.DELETE_FOR_MOVE: ""})
    live = await _converge(kube, sc)
    assert live is not None and sitecredentials.FINALIZER not in (live["metadata"].get("finalizers") or [])


def test_record_says_what_the_credential_service_needs() -> None:
    assert sitecredentials.record(None).exists is False
    obj = {"metadata": {"name": "a"}, "status": {"credential": {"publicKey": "UK"}}}
    assert sitecredentials.record(obj) == credentialrules.SiteRecord(exists=True, key="UK")
    deleting = {"metadata": {"name": "a", "deletionTimestamp": "2026-12-02T00:00:00Z"}}
    assert sitecredentials.record(deleting).exists is False
