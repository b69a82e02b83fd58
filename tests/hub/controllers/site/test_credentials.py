"""hub.controllers.site.credentials on the management cluster's emulator: the Site's finalizer,
what a deletion revokes, and clusterctl move (the source's copy deleted: nothing revoked).

``revoke`` is the seam to NATS (``hub.credentials.revocation`` on a real server is proven in
tests/security/test_operator_mode.py and tests/hub/test_operator_process.py); here it records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import crds
from hub.api import site as site_api
from hub.controllers.site import credentials as sitecredentials
from hub.credentials import rules
from hub.reconcile.rkcp import owner
from protocol import credentials, natsjwt
from sandbox import kubeapi

CRDS = Path(__file__).resolve().parents[4] / "deploy" / "crds"


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.apply_crd_files([CRDS / crds.SITE_FILENAME])
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
    assert sitecredentials.record(obj) == rules.SiteRecord(exists=True, key="UK")
    deleting = {"metadata": {"name": "a", "deletionTimestamp": "2026-12-02T00:00:00Z"}}
    assert sitecredentials.record(deleting).exists is False
    born = {"metadata": {"name": "a", "creationTimestamp": "2026-12-02T00:00:00Z"}}
    assert sitecredentials.record(born).created_at == 1796169600


ACCOUNT, SIGNING, STRANGER = (natsjwt.new_seed("account") for _ in range(3))
ISSUER = rules.Issuer(
    account=natsjwt.public_of(ACCOUNT), signing_keys=(natsjwt.public_of(SIGNING),), keep_for_seconds=86400
)


def _bootstrap_jwt(site: str, key: str, *, signer: bytes = SIGNING) -> str:
    claims = credentials.bootstrap_user(site, key, account=ISSUER.account, now=dt.datetime.now(dt.UTC))
    return natsjwt.encode(claims, natsjwt.key_pair(signer))


@pytest.mark.parametrize(
    ("name", "token", "revoked"),
    [
        ("the hub's, for this site", _bootstrap_jwt("site-a", "UBOOT"), ["UBOOT", "UAGENT"]),
        (
            "forged: another site's agent key, signed by a stranger",
            _bootstrap_jwt("site-a", "UOTHER", signer=STRANGER),
            ["UAGENT"],
        ),
        ("another site's bootstrap", _bootstrap_jwt("site-b", "UOTHER"), ["UAGENT"]),
        ("not a JWT", "garbage", ["UAGENT"]),
    ],
)
async def test_a_deletion_revokes_the_bootstrap_the_site_was_made_with_if_the_hub_minted_it(
    kube: ckube.Kube, name: str, token: str, revoked: list[str]
) -> None:
    """An annotation is anyone's to write: it must not let a Site's deletion revoke another key."""
    got = Revoked()
    sc = sitecredentials.SiteCredentials(kube, got, issuer=ISSUER)
    await _site(kube, key="UAGENT", annotations={site_api.BOOTSTRAP_ANNOTATION: token})
    await _converge(kube, sc)
    await kube.delete(resources.SITE, "site-a")
    assert await _converge(kube, sc) is None
    assert got.keys == revoked, name
