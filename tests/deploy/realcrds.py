"""Helpers of the tests of our CRDs on a real kube-apiserver (``test_crds_real*.py``).

What the CRD files declare (``rules``: every CEL rule and the field it sits on), putting a CRD on
the session's real cluster and waiting until it is Established and discovered (``install``), and
the real kubectl against that cluster (``Kubectl``). The session cluster is shared: our CRDs go in
under their own names, idempotently, as every test installing them does; objects go in a
namespace of the module's own; a third-party CRD goes in under a group of the test's own
(``renamed``), because its real name may be taken by another version of it (the sandbox's compact
TenantControlPlane and Kamaji's real one are both ``tenantcontrolplanes.kamaji.clastix.io``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from common import kube as ckube
from common.kube import resources
from sandbox import crds as sandbox_crds
from tests import helpers
from tests.deploy import manifests as m

CRD = resources.CUSTOM_RESOURCE_DEFINITION
OURS: tuple[Path, ...] = tuple(
    sorted(p for p in (m.DEPLOY / "crds").glob("*.yaml") if p.name != "kustomization.yaml")
)
"""Every CRD of deploy/crds (the kustomization aside): ``hub.api.crds``'s output."""
SANDBOX: tuple[Path, ...] = tuple(sorted(Path(sandbox_crds.__file__).parent.glob("*.yaml")))
"""The third-party CRDs the sandbox installs (Cluster API's, CAPD's, a compact TenantControlPlane)."""
# libyaml's loader when PyYAML has it: Kamaji's real CRD is 800 kB of YAML.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_file(suffix: str) -> Path:
    """The one CRD of ``OURS`` whose file name ends with ``suffix`` (``_sites.yaml``)."""
    [path] = [p for p in OURS if p.name.endswith(suffix)]
    return path


def load(path: Path) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.load(path.read_text(), Loader=_LOADER)
    return crd


@dataclass(frozen=True)
class Rule:
    """One ``x-kubernetes-validations`` entry and the field it is on, as the API server names
    that field in an error (``spec.network``; ``spec`` for a rule on the spec itself)."""

    field: str
    rule: str
    message: str


def rules(crd: Mapping[str, Any]) -> list[Rule]:
    """Every CEL rule of the CRD's one version, in schema order."""
    (version,) = crd["spec"]["versions"]
    return list(_walk(version["schema"]["openAPIV3Schema"], ""))


def _walk(node: Mapping[str, Any], path: str) -> Iterator[Rule]:
    for entry in node.get("x-kubernetes-validations") or ():
        yield Rule(path, entry["rule"], entry["message"])
    for key, sub in (node.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{key}" if path else key)
    # The API server names a list entry by its index; "[*]" stands for any, so that a rule in a
    # list or map is listed too (and fails a test that has no case for it).
    if isinstance(node.get("items"), Mapping):
        yield from _walk(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from _walk(node["additionalProperties"], f"{path}[*]")


def renamed(crd: Mapping[str, Any], group: str) -> dict[str, Any]:
    """``crd`` with its schema and versions as they are, in API group ``group``, with no short
    names or categories: beside the original, it shares no name a ``kubectl get`` resolves."""
    copied = copy.deepcopy(dict(crd))
    spec = copied["spec"]
    spec["group"] = group
    spec["names"].pop("shortNames", None)
    spec["names"].pop("categories", None)
    copied["metadata"] = {"name": f"{spec['names']['plural']}.{group}"}
    return copied


def conditions(crd: Mapping[str, Any]) -> dict[str, str]:
    """The CRD's condition types and their status."""
    return {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}


def served(crd: Mapping[str, Any]) -> resources.Resource:
    spec = crd["spec"]
    (version,) = spec["versions"]
    names = spec["names"]
    namespaced = spec["scope"] == "Namespaced"
    return resources.Resource(
        spec["group"], version["name"], names["plural"], names["kind"], namespaced=namespaced
    )


async def install(kube: ckube.Kube, crd: Mapping[str, Any]) -> dict[str, Any]:
    """Create or replace ``crd``; return it as stored once Established and in discovery (kubectl
    resolves names from discovery, which follows Established by a moment)."""
    await kube.create_or_replace(CRD, crd, attempts=5)
    name = crd["metadata"]["name"]
    stored: dict[str, Any] = await helpers.eventually(
        lambda: kube.get(CRD, name),
        lambda got: conditions(got).get("Established") == "True",
        within=30,
        what=f"{name} Established",
    )
    r = served(crd)

    async def discovered() -> bool:
        return any(e.get("name") == r.plural for e in await kube.api_resources(r.group, r.version))

    await helpers.eventually(discovered, within=30, what=f"{r.plural}.{r.group} in discovery")
    return stored


async def prepare(kubeconfig: Path, *, namespace: str) -> None:
    """Our CRDs installed and ``namespace`` created, on the cluster of ``kubeconfig`` (admin)."""
    kube = await ckube.connect(in_cluster=False, kubeconfig=kubeconfig)
    try:
        for path in OURS:
            await install(kube, load(path))
        await kube.create(resources.NAMESPACE, {"metadata": {"name": namespace}})
    finally:
        await kube.close()


async def forget(kubeconfig: Path, *, namespace: str) -> None:
    """Delete ``namespace`` (the namespace controller empties it later; nothing waits for it)."""
    kube = await ckube.connect(in_cluster=False, kubeconfig=kubeconfig)
    try:
        await kube.delete(resources.NAMESPACE, namespace)
    finally:
        await kube.close()


@dataclass(frozen=True)
class Done:
    returncode: int
    out: str
    err: str


@dataclass(frozen=True)
class Kubectl:
    """The real kubectl as the cluster's admin, with a discovery cache of its own (the default,
    ~/.kube/cache, is shared with whoever else runs kubectl here)."""

    binary: Path
    kubeconfig: Path
    cache: Path

    async def run(self, *args: str, stdin: str | None = None) -> Done:
        argv = [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), timeout=60)
        assert proc.returncode is not None
        return Done(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a kubectl command that must succeed."""
        done = await self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.err}"
        return done.out
