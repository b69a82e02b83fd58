"""`kamaji-broker site add` writes the Site manifest next to the site's credentials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from common.files import natsserver
from common.kube import resources
from hub.api import site as site_api
from kamaji_broker import cli
from sandbox import kubeapi
from tests.hub.conftest import open_kube


def manifest(tmp_path: Path, site: str = "site-a") -> dict[str, object]:
    path = tmp_path / natsserver.SITES_DIR / f"{site}.site.yaml"
    text = path.read_text()
    assert text.startswith(f"# The Site {site} for the management cluster: kubectl apply -f {site}.site.yaml")
    loaded: dict[str, object] = yaml.safe_load(text)
    return loaded


def test_site_add_writes_a_site_with_the_default_rule(tmp_path: Path) -> None:
    assert cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    m = manifest(tmp_path)
    assert m == {
        "apiVersion": "kamaji-broker.io/v1alpha1",
        "kind": "Site",
        "metadata": {"name": "site-a"},
        "spec": {"placements": [], "sameNamespace": True},
    }


def test_site_add_with_a_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--namespaces", "team-a,team-b", "--target-namespaces", "tenants"]
    assert cli.main(["site", "add", "site-b", "--nats-config-dir", str(tmp_path), *args]) == 0
    site = site_api.Site.parse(manifest(tmp_path, "site-b"))
    assert [(p.namespaces, p.target_namespaces) for p in site.spec.placements] == [
        (["team-a", "team-b"], ["tenants"])
    ]
    assert "kubectl apply -f" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--namespaces", "team-a"], "--target-namespaces is needed too"),
        (["--target-namespaces", "tenants"], "--namespaces is needed too"),
        (["--namespaces", "Team A", "--target-namespaces", "tenants"], "--namespaces: String should match"),
        (
            ["--namespaces", "team-a", "--target-namespaces", "t.x"],
            "--target-namespaces: String should match",
        ),
    ],
    ids=["no targets", "no namespaces", "bad namespace", "bad target"],
)
def test_a_bad_placement_names_the_flag_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / natsserver.SITES_DIR).exists()


async def test_the_manifest_applies_to_the_management_cluster(tmp_path: Path) -> None:
    args = ["--namespaces", "default", "--target-namespaces", "tenants"]
    assert cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path), *args]) == 0
    async with open_kube(tmp_path) as kube:
        created = await kube.create(resources.SITE, manifest(tmp_path))
    assert created["spec"]["placements"] == [{"namespaces": ["default"], "targetNamespaces": ["tenants"]}]


def test_site_remove_deletes_the_manifest_and_says_to_delete_the_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    assert cli.main(["site", "remove", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    assert not (tmp_path / natsserver.SITES_DIR / "site-a.site.yaml").exists()
    assert "kubectl delete site site-a" in capsys.readouterr().err


async def test_apply_creates_then_updates_the_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with open_kube(tmp_path) as kube:
        kubeconfig = tmp_path / "mgmt.kubeconfig"
        add = ["site", "add", "site-a", "--nats-config-dir", str(tmp_path), "--apply", str(kubeconfig)]
        assert await asyncio.to_thread(cli.main, add) == 0
        assert "Site site-a created" in capsys.readouterr().err
        grant = ["--namespaces", "team-a", "--target-namespaces", "tenants"]
        assert await asyncio.to_thread(cli.main, [*add, *grant]) == 0
        assert "Site site-a updated" in capsys.readouterr().err
        site = await kube.get(resources.SITE, "site-a")
    assert site["spec"]["placements"] == [{"namespaces": ["team-a"], "targetNamespaces": ["tenants"]}]


async def test_apply_without_the_site_crd_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with kubeapi.Server(name="bare") as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "bare.kubeconfig")
        add = ["site", "add", "site-a", "--nats-config-dir", str(tmp_path), "--apply", str(kubeconfig)]
        assert await asyncio.to_thread(cli.main, add) == 1
    assert "error: the management cluster:" in capsys.readouterr().err
