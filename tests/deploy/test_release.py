"""The release as clusterctl treats it (kamaji_broker.release, ``make release-manifests``).

clusterctl's provider contract, rule by rule: a local repository ``<label>/<version>/`` holding
metadata.yaml (the release series → contract) and control-plane-components.yaml (the templates
beside them when deploy/templates exists); the components' variables listed as clusterctl lists
them and substituted as it substitutes them (a required one missing refuses, naming it); exactly
one Namespace, every namespaced object in it; every object labelled
``cluster.x-k8s.io/provider``; the controller's container named ``manager`` and the flags it is
given loading into the hub's settings; every object valid for Kubernetes (kubernetes-validate,
strict; the CRDs as apiextensions/v1). Also: the build equals ``kubectl kustomize deploy/hub``,
and the CAPI Operator's ConfigMap carries exactly those two files.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import kube as ckube
from common.kube import resources
from hub.settings import HubSettings
from kamaji_broker import __version__, cli, flags, kustomizing, release
from sandbox import kubeapi, templating
from tests import helpers
from tests.deploy import manifests as m

KUBECTL = Path("/usr/bin/kubectl")
CONFIG_MAP = resources.Resource("", "v1", "configmaps", "ConfigMap")

TAG = f"v{__version__}"
NATS = "tls://nats-0.nats:4222,tls://nats-1.nats:4222"
SET = {  # what an operator sets in clusterctl.yaml or the environment
    "KAMAJI_BROKER_NATS_URL": NATS,
    "KAMAJI_BROKER_IMAGE": "registry.example.com/kamaji-broker:v9.9.9",
    "KAMAJI_BROKER_STREAM_REPLICAS": "1",
    "KAMAJI_BROKER_LOG_LEVEL": "debug",
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("release")
    paths = release.write(out, deploy=m.DEPLOY, version=__version__)
    return {p.relative_to(out).as_posix(): p for p in paths}


@pytest.fixture(scope="module")
def text(written: dict[str, Path]) -> str:
    return written[f"{release.MANIFEST_LABEL}/{TAG}/{release.COMPONENTS}"].read_text()


def test_a_clusterctl_local_repository_with_metadata_for_this_version(written: dict[str, Path]) -> None:
    repo = f"{release.MANIFEST_LABEL}/{TAG}"  # {basepath}/{provider-label}/{version}/
    assert {f"{repo}/metadata.yaml", f"{repo}/control-plane-components.yaml"} <= set(written)
    meta = yaml.safe_load(written[f"{repo}/metadata.yaml"].read_text())
    assert (meta["apiVersion"], meta["kind"]) == ("clusterctl.cluster.x-k8s.io/v1alpha3", "Metadata")
    project = tomllib.loads((m.ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__, "kamaji_broker.__version__ follows pyproject.toml"
    major, minor = (int(p) for p in __version__.split(".")[:2])
    # clusterctl refuses a version whose major.minor no release series names.
    assert {"major": major, "minor": minor, "contract": "v1beta2"} in meta["releaseSeries"]
    images = yaml.safe_load((m.DEPLOY / "hub" / "kustomization.yaml").read_text())["images"]
    assert [i["newTag"] for i in images] == [__version__], "the image deploy/hub pins is this version's"


def test_the_templates_come_along_when_deploy_has_them(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(m.DEPLOY, deploy, ignore=shutil.ignore_patterns("templates"))
    repo = tmp_path / "out" / release.MANIFEST_LABEL / TAG
    release.write(tmp_path / "out", deploy=deploy, version=__version__)
    assert not list(repo.glob("cluster*"))
    (deploy / "templates").mkdir()
    for name in (
        "cluster-template.yaml",
        "cluster-template-topology.yaml",
        "clusterclass-x.yaml",
        "README.yaml",
    ):
        (deploy / "templates" / name).write_text(f"# {name}\n")
    release.write(tmp_path / "out", deploy=deploy, version=__version__)
    copied = sorted(p.name for p in repo.glob("cluster*"))
    assert copied == ["cluster-template-topology.yaml", "cluster-template.yaml", "clusterclass-x.yaml"]
    assert (repo / "cluster-template.yaml").read_text() == "# cluster-template.yaml\n"


def test_variables_as_clusterctl_lists_them(text: str) -> None:
    found = {v.name: v for v in templating.variables(text)}
    assert set(found) == {v.name for v in release.VARIABLES}
    for name in found:
        # The contract's pattern, and its advice to prefix them with the provider's name.
        assert re.fullmatch(r"[A-Z0-9_]+", name) and name.startswith("KAMAJI_BROKER_"), name
    assert [n for n, v in found.items() if v.required] == ["KAMAJI_BROKER_NATS_URL"]
    # Canonical: clusterctl refuses a short name before it applies anything.
    assert found["KAMAJI_BROKER_IMAGE"].default == f"docker.io/library/kamaji-broker:{__version__}"
    assert found["KAMAJI_BROKER_STREAM_REPLICAS"].default == "3"
    # clusterctl would require a variable written ${X:=} (an empty default is none to its check).
    assert all(v.default for v in found.values() if not v.required)


def test_without_the_nats_url_clusterctl_refuses(text: str) -> None:
    with pytest.raises(templating.MissingVariables) as e:
        templating.substitute(text, {})
    assert e.value.names == ["KAMAJI_BROKER_NATS_URL"]


def _docs(text: str, values: dict[str, str]) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(templating.substitute(text, values)) if d]


@pytest.mark.parametrize("values", [{"KAMAJI_BROKER_NATS_URL": NATS}, SET], ids=["defaults", "all set"])
def test_substituted_it_is_what_clusterctl_installs(text: str, values: dict[str, str]) -> None:
    docs = _docs(text, values)
    [namespace] = m.of_kind(docs, "Namespace")  # clusterctl aborts on two; zero needs --target-namespace
    for doc in docs:
        m.validate(doc)  # strict, Kubernetes' schemas; CRDs as apiextensions.k8s.io/v1
        meta = doc["metadata"]
        assert meta["labels"][release.PROVIDER_LABEL] == "control-plane-kamaji-broker", meta["name"]
        if doc["kind"] not in kustomizing.CLUSTER_SCOPED:
            assert meta["namespace"] == namespace["metadata"]["name"], meta["name"]
    for crd in m.of_kind(docs, "CustomResourceDefinition"):
        if crd["spec"]["group"].endswith("cluster.x-k8s.io"):
            # CAPI reads the contract → version map from this label to resolve references.
            served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
            contract = crd["metadata"]["labels"][f"cluster.x-k8s.io/{release.CONTRACT}"]
            assert set(contract.split("_")) <= served, crd["metadata"]["name"]
    deployment = m.one(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager"
    assert container["image"] == values.get(
        "KAMAJI_BROKER_IMAGE", f"docker.io/library/kamaji-broker:{__version__}"
    )
    assert "${" not in templating.substitute(text, values)


RESTRICTED = ("--all-namespaces", ["--namespace=team-a", "--watch-filter=blue"])
"""The docs' way to restrict the manager: --all-namespaces replaced by --namespace, a --watch-filter."""


@pytest.mark.parametrize(
    ("values", "edit", "namespaces", "watch_filter", "replicas"),
    [
        ({"KAMAJI_BROKER_NATS_URL": NATS}, None, (), "", 3),
        (SET, None, (), "", 1),
        ({"KAMAJI_BROKER_NATS_URL": NATS}, RESTRICTED, ("team-a",), "blue", 3),
    ],
    ids=["defaults", "all set", "restricted as the docs say"],
)
def test_the_manager_runs_the_hub_as_the_variables_say(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: dict[str, str],
    edit: tuple[str, list[str]] | None, namespaces: tuple[str, ...], watch_filter: str, replicas: int,
) -> None:  # fmt: skip
    pod = m.one(_docs(text, values), "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    sources = {
        ("Secret", "kamaji-broker-hub-keys"): {"signing.key": "k\n"},
        ("Secret", "kamaji-broker-hub-sealing-keys"): {"a.key": "k\n"},
        ("Secret", "kamaji-broker-hub-nats"): {"account.jwt": "j\n", "system.creds": "c\n"},
        ("ConfigMap", "kamaji-broker-nats-ca"): {"ca.crt": "c\n"},
    }
    mounts = m.materialize(pod, container, sources=sources, root=tmp_path)
    args = [_local(a, mounts) for a in container["args"]]
    if edit is not None:
        args.remove(edit[0])
        args += edit[1]
    for e in container["env"]:
        monkeypatch.setenv(e["name"], e.get("value", "from-the-downward-api"))
    settings = flags.load(HubSettings, cli._parser().parse_args(args))
    assert settings.watch_namespaces == namespaces and settings.watch_filter == watch_filter
    assert settings.servers == tuple(NATS.split(",")) and settings.stream_replicas == replicas


def test_only_what_clusterctl_rewrites_names_the_namespace(text: str) -> None:
    """``clusterctl init --target-namespace`` moves the objects: it renames the Namespace and sets
    every metadata.namespace and the bindings' ServiceAccount subjects, nothing else. So nothing
    else may name the namespace (the Lease's namespace comes from the downward API)."""
    docs = _docs(text, {"KAMAJI_BROKER_NATS_URL": NATS})
    [namespace] = [d["metadata"]["name"] for d in m.of_kind(docs, "Namespace")]
    for doc in docs:
        doc = copy.deepcopy(doc)
        doc["metadata"].pop("namespace", None)
        if doc["kind"] == "Namespace":
            doc["metadata"].pop("name")
        for subject in doc.get("subjects") or ():
            subject.pop("namespace")
        assert namespace not in yaml.safe_dump(doc), f"{doc['kind']} {doc['metadata'].get('name')}"


def _local(arg: str, mounts: dict[str, Path]) -> str:
    flag, eq, value = arg.partition("=")
    return f"{flag}{eq}{m.local_path(value, mounts)}" if eq else arg


def test_built_as_kubectl_kustomize_builds_it() -> None:
    assert kustomizing.build(m.DEPLOY / "hub") == m.kustomize(m.DEPLOY / "hub")


def test_binding_subjects_move_as_kubectl_kustomize_moves_them(tmp_path: Path) -> None:
    # Only a ServiceAccount the kustomization holds (and "default") follows the namespace; one of
    # another namespace (CAPI's kubeadm bootstrap manager) or without a namespace stays as it is.
    (tmp_path / "kustomization.yaml").write_text("namespace: target\nresources: [b.yaml]\n")
    (tmp_path / "b.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: x}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}\n"
        "subjects:\n- {kind: ServiceAccount, name: a}\n- {kind: ServiceAccount, name: b, namespace: other}\n"
        "- {kind: ServiceAccount, name: default, namespace: other}\n"
        "- {kind: ServiceAccount, name: c, namespace: default}\n"
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: other}\n"
    )
    built = kustomizing.build(tmp_path)
    assert [s.get("namespace") for s in built[-1]["subjects"]] == [None, "target", "target", "default"]
    assert built == m.kustomize(tmp_path)


def test_a_kustomization_field_it_cannot_build_fails_naming_it(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\npatches: [{path: p.yaml}]\n")
    with pytest.raises(kustomizing.KustomizeError, match=r"fields \['patches'\]"):
        kustomizing.build(tmp_path)


def test_the_capi_operator_configmap_carries_the_two_files(written: dict[str, Path], text: str) -> None:
    [cm] = [yaml.safe_load(p.read_text()) for name, p in written.items() if name.startswith("capi-operator/")]
    m.validate(cm)
    assert cm["metadata"]["labels"]["provider.cluster.x-k8s.io/version"] == TAG
    assert cm["data"]["components"] == text
    meta = written[f"{release.MANIFEST_LABEL}/{TAG}/{release.METADATA}"].read_text()
    assert cm["data"]["metadata"] == meta


async def test_applied_to_an_api_server_the_crds_are_served(
    text: str, written: dict[str, Path], tmp_path: Path
) -> None:
    """kubectl applies the rendered Namespace and CRDs, and the operator's ConfigMap, to the
    emulator; the emulator serves no apps/rbac/policy/networking kinds, which kubernetes-validate
    checks above instead."""
    served = ("Namespace", "CustomResourceDefinition")
    docs = [d for d in _docs(text, {"KAMAJI_BROKER_NATS_URL": NATS}) if d["kind"] in served]
    manifest = tmp_path / "served.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    operator = next(p for name, p in written.items() if name.startswith("capi-operator/"))
    async with kubeapi.Server(name="release", history=50) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        kubectl = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache")]
        await _run(*kubectl, "apply", "--server-side", "-f", str(manifest))
        await _run(*kubectl, "apply", "--server-side", "-n", "kamaji-broker-system", "-f", str(operator))
        api_client = await ckube.api_client_from_kubeconfig(kubeconfig)
        try:
            kube = ckube.Kube(api_client)
            for r in (resources.REMOTE_KAMAJI_CONTROL_PLANE, resources.SITE):
                await helpers.eventually(functools.partial(kube.serves, r), what=f"{r.kind} served")
            for crd in m.of_kind(docs, "CustomResourceDefinition"):
                stored = await kube.get(resources.CUSTOM_RESOURCE_DEFINITION, crd["metadata"]["name"])
                assert stored["metadata"]["labels"][release.PROVIDER_LABEL] == release.MANIFEST_LABEL
            cm = await kube.get(CONFIG_MAP, f"kamaji-broker-{TAG}", namespace="kamaji-broker-system")
            assert cm["data"]["components"] == text
        finally:
            await api_client.close()


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, f"{' '.join(argv[4:])}: {err.decode()}"
    return out.decode()


def test_the_docs_show_the_clusterctl_way(text: str) -> None:
    readme = (m.ROOT / "docs" / "getting-started" / "clusterctl.md").read_text()
    section = readme[readme.index("## Install with clusterctl") :]
    section = section.split("\n## ", 1)[0]  # to the next section, or the page's end
    for needle in (
        "name: kamaji-broker", "type: ControlPlaneProvider", f"/{release.COMPONENTS}",
        "clusterctl init --control-plane kamaji-broker", "make release-manifests",
    ):  # fmt: skip
        assert needle in section, needle
    rows = dict(re.findall(r"^\| `(KAMAJI_BROKER_\w+)` \| ([^|]+) \|", section, flags=re.M))
    found = {v.name: v for v in templating.variables(text)}
    assert set(rows) == set(found), "the docs' table lists exactly the components' variables"
    for name, v in found.items():
        expected = "(required)" if v.required else f"`{v.default}`" if v.default else "empty: all"
        assert rows[name].strip() == expected, name


def test_make_release_manifests_runs_the_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    makefile = (m.ROOT / "Makefile").read_text()
    assert re.search(
        r"^release-manifests:.*\n(\t.*\n)*\t\$\(BIN\)/python -m kamaji_broker\.release ", makefile, re.M
    )
    assert release.main(["--deploy", str(m.DEPLOY), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert str(tmp_path / release.MANIFEST_LABEL / TAG / release.COMPONENTS) in printed
    assert release.main(["--deploy", str(tmp_path / "nowhere"), "--out", str(tmp_path)]) == 1
    assert "release: error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("reference", "canonical"),
    [
        ("kamaji-broker:0.1.0", "docker.io/library/kamaji-broker:0.1.0"),
        ("org/kamaji-broker:0.1.0", "docker.io/org/kamaji-broker:0.1.0"),
        ("registry.example.com/kamaji-broker:0.1.0", "registry.example.com/kamaji-broker:0.1.0"),
        ("localhost/kamaji-broker:dev", "localhost/kamaji-broker:dev"),
        (
            "registry:5000/team/kamaji-broker@sha256:" + "0" * 64,
            "registry:5000/team/kamaji-broker@sha256:" + "0" * 64,
        ),
    ],
)
def test_the_default_image_is_written_canonical(reference: str, canonical: str) -> None:
    assert release.canonical_image(reference) == canonical
