"""Doctor checks of the Kubernetes API: reachable, the RBAC the process needs, the CRDs installed.

``accesses`` turns a process's RBAC rules (``hub.rbac``, ``agent.rbac``: (apiGroup, resource,
verbs)) into the SelfSubjectAccessReviews to ask, one per verb and namespace; ``rbac`` and
``crds`` decide from the answers. Those three are pure. The seams (``reachable``, ``denied``,
``missing_crds``) ask the API server with the process's own credentials and change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from common import kube as ckube
from common.doctor import results
from common.doctor.results import Result
from common.kube import reviews

KUBE = "kubernetes reachable"
RBAC = "rbac"
CRDS = "crds installed"

Rule = tuple[str, str, tuple[str, ...]]


def accesses(
    rules: Iterable[Rule],
    namespaces: Sequence[str],
    *,
    cluster_scoped: frozenset[str] = frozenset(),
    name: str = "",
) -> tuple[reviews.Access, ...]:
    """One Access per verb of each rule, in each of ``namespaces`` (none: every namespace);
    resources in ``cluster_scoped`` are asked once, without a namespace."""
    out = []
    for group, resource, verbs in rules:
        where = [""] if resource.split("/")[0] in cluster_scoped or not namespaces else list(namespaces)
        for namespace in where:
            for verb in verbs:
                named = name if verb not in ("create", "list", "watch") else ""
                out.append(reviews.Access(verb, group, resource, namespace, named))
    return tuple(sorted(set(out)))


def describe(access: reviews.Access) -> str:
    where = f"namespace {access.namespace}" if access.namespace else "cluster-wide"
    named = f" {access.name}" if access.name else ""
    return f"({access.verb}, {access.group or 'core'}, {access.resource}{named}, {where})"


def rbac(asked: int, denied: Sequence[reviews.Access], *, fix: str) -> Result:
    """PASS when every one of ``asked`` reviews was allowed; FAIL listing exactly the denied ones."""
    if not denied:
        return results.passed(RBAC, f"all {asked} permissions granted (SelfSubjectAccessReview)")
    listed = ", ".join(describe(a) for a in denied)
    return results.failed(RBAC, f"{len(denied)} of {asked} denied: {listed}", fix)


def crds(wanted: Sequence[str], missing: Sequence[str], *, fix: str) -> Result:
    if not missing:
        return results.passed(CRDS, ", ".join(wanted))
    return results.failed(CRDS, "not served: " + ", ".join(missing), fix)


async def reachable(kube: ckube.Kube, *, where: str) -> Result:
    try:
        version = await reviews.version(kube)
    except ckube.errors.KubeError as exc:
        return results.failed(KUBE, f"{where}: {exc}", f"check {where}: the server address and credentials")
    return results.passed(KUBE, f"{where}: Kubernetes {version}")


async def denied(kube: ckube.Kube, asked: Iterable[reviews.Access]) -> list[reviews.Access]:
    """The accesses the authorizer refuses to this identity."""
    out = []
    for access in asked:
        ok, _ = await reviews.allowed(kube, access)
        if not ok:
            out.append(access)
    return out


async def missing_crds(kube: ckube.Kube, names: Iterable[str]) -> list[str]:
    """The CRDs (``plural.group``) whose resource the API server does not serve, by discovery
    (which every authenticated identity may read, unlike the CRD objects themselves)."""
    missing = []
    for name in names:
        plural, _, group = name.partition(".")
        served = False
        for version in await kube.group_versions(group):
            entries = await kube.api_resources(group, version)
            served = served or any(e.get("name") == plural for e in entries)
        if not served:
            missing.append(name)
    return missing
