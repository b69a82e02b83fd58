"""``sandbox.kubeapi.DEVIATIONS`` stays true: each deviation it lists is shown by a probe.

A probe asks both servers the same thing (a fresh emulator, the session's real kube-apiserver)
and each must still answer what it is known to answer; the answers differ, or it would be no
deviation. When the emulator is fixed, its probe fails: the deviation then leaves the list
(with its probe). Every bullet of the list has a probe, quoted from its text, and every
``emulator_only`` test that names a deviation quotes it as the list words it.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sandbox import kubeapi, realkube
from tests.helpers import eventually
from tests.sandbox.kubeapi import backends

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
MERGE = "application/merge-patch+json"


def _flat(text: str) -> str:
    return " ".join(text.split())


def bullets() -> list[str]:
    """The deviations, one string each (whitespace made single spaces)."""
    return [_flat(b) for b in re.split(r"^- ", kubeapi.DEVIATIONS, flags=re.MULTILINE) if b.strip()]


async def call(
    b: backends.Backend,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    **options: Any,
) -> tuple[int, Any]:
    """(status, decoded JSON or None) of one request to ``b`` (as its admin unless
    ``admin=False``; ``headers`` and ``params`` as aiohttp takes them)."""
    admin = options.pop("admin", True)
    headers = {"Content-Type": content_type, **options.pop("headers", {})}
    data = None if body is None else json.dumps(body)
    async with (
        b.http(admin=admin) as http,
        http.request(method, f"{b.url}{path}", data=data, headers=headers, **options) as resp,
    ):
        text = await resp.text()
        # Some answers are JSON under another name (/openapi/v3 is text/plain on a real server).
        return resp.status, json.loads(text) if text.startswith(("{", "[")) else None


async def _configmap(b: backends.Backend, namespace: str, **meta: Any) -> None:
    status, answer = await call(b, "POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": meta})
    assert status == 201, answer


# The probes, in the order of the list --------------------------------------------------------


async def served_builtins(b: backends.Backend) -> int:
    return (await call(b, "GET", "/apis/apps/v1"))[0]


async def aggregated_discovery(b: backends.Backend) -> str:
    _, answer = await call(b, "GET", "/apis", headers={"Accept": AGGREGATED})
    return str(answer["kind"])


async def namespace_furnished(b: backends.Backend) -> list[str]:
    namespace = await b.new_namespace()  # on the real server: once its controllers have been
    _, listing = await call(b, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
    return [i["metadata"]["name"] for i in listing["items"]]


async def strategic_merge_of_a_list(b: backends.Backend) -> list[str]:
    namespace = await b.new_namespace()
    await _configmap(b, namespace, name="c", finalizers=["a.io/x"])
    path = f"/api/v1/namespaces/{namespace}/configmaps/c"
    patch = {"metadata": {"finalizers": ["b.io/y"]}}
    _, patched = await call(b, "PATCH", path, patch, content_type="application/strategic-merge-patch+json")
    await call(b, "PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE)
    return list(patched["metadata"]["finalizers"])


async def owner_references_owned_whole(b: backends.Backend) -> list[str]:
    namespace = await b.new_namespace()
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "o",
        "uid": "7d3c0d55-6c1e-4a8e-9d45-1f0e2a3b4c5d",
    }
    meta = {"name": "c", "ownerReferences": [owner]}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}
    path = f"/api/v1/namespaces/{namespace}/configmaps/c?fieldManager=probe&force=true"
    _, applied = await call(b, "PATCH", path, body, content_type="application/apply-patch+yaml")
    [entry] = applied["metadata"]["managedFields"]
    return sorted(entry["fieldsV1"]["f:metadata"]["f:ownerReferences"])


async def openapi_v3(b: backends.Backend) -> bool:
    _, index = await call(b, "GET", "/openapi/v3")
    return bool(index["paths"])


async def unknown_field_of_a_builtin(b: backends.Backend) -> int:
    body = {"metadata": {"name": "c"}, "bogus": 1}
    path = "/api/v1/namespaces/default/configmaps?dryRun=All&fieldValidation=Strict"
    return (await call(b, "POST", path, body))[0]


RULES_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "ruleprobes.tests.example.com"},
    "spec": {
        "group": "tests.example.com",
        "names": {"plural": "ruleprobes", "singular": "ruleprobe", "kind": "RuleProbe"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer"}},
                                "x-kubernetes-validations": [{"rule": "self.replicas <= 5"}],
                            }
                        },
                    }
                },
            }
        ],
    },
}


async def cel_rule(b: backends.Backend) -> int:
    await b.apply_crd(RULES_CRD)
    body = {"apiVersion": "tests.example.com/v1", "kind": "RuleProbe", "metadata": {"name": "r"}}
    path = "/apis/tests.example.com/v1/namespaces/default/ruleprobes?dryRun=All"
    return (await call(b, "POST", path, {**body, "spec": {"replicas": 9}}))[0]


async def structural_schema_of_a_crd(b: backends.Backend) -> int:
    crd = b.own_crd(RULES_CRD)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ports"] = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}},  # name not required
    }
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All"
    return (await call(b, "POST", path, crd))[0]


async def conversion_webhook(b: backends.Backend) -> int:
    crd = b.own_crd(RULES_CRD)
    group = crd["spec"]["group"]
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [v1, {**v1, "name": "v2", "storage": False}]
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",  # on a port where nothing listens
        "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:9/convert"},
            "conversionReviewVersions": ["v1"],
        },
    }
    await b.apply_crd(crd)
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "RuleProbe",
        "metadata": {"name": "r"},
        "spec": {"replicas": 1},
    }
    status, answer = await call(b, "POST", f"/apis/{group}/v1/namespaces/default/ruleprobes", body)
    assert status == 201, answer
    status, _ = await call(b, "GET", f"/apis/{group}/v2/namespaces/default/ruleprobes/r")
    return status


async def events_in_both_groups(b: backends.Backend) -> list[str]:
    namespace = await b.new_namespace()
    event = {
        "metadata": {"name": "e"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "regarding": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
        "reason": "Probed",
        "action": "Probe",
        "reportingController": "tests",
        "reportingInstance": "tests-1",
        "type": "Normal",
    }
    status, answer = await call(b, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
    assert status == 201, answer
    _, listing = await call(b, "GET", f"/api/v1/namespaces/{namespace}/events")
    return [i["metadata"]["name"] for i in listing["items"]]


async def one_history_window(b: backends.Backend) -> tuple[str, int] | None:
    """Writes to Secrets push a ConfigMap watch's resourceVersion out of the emulator's window
    (4 changes here); a real server keeps one window per resource."""
    namespace = await b.new_namespace()
    _, listing = await call(b, "GET", f"/api/v1/namespaces/{namespace}/configmaps")
    for i in range(6):
        await call(b, "POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": f"s{i}"}})
    rv = listing["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"}
    async with (
        b.http() as http,
        http.get(f"{b.url}/api/v1/namespaces/{namespace}/configmaps", params=params) as resp,
    ):
        line = await resp.content.readline()
    if not line:
        return None
    event = json.loads(line)
    return event["type"], event["object"].get("code", 0)


async def synchronous_namespace_cleanup(b: backends.Backend) -> int:
    namespace = await b.new_namespace()
    await call(b, "DELETE", f"/api/v1/namespaces/{namespace}")
    return (await call(b, "GET", f"/api/v1/namespaces/{namespace}"))[0]


async def crd_established_on_create(b: backends.Backend) -> list[str]:
    crd = b.own_crd(RULES_CRD)
    _, created = await call(b, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    return [c["type"] for c in (created.get("status") or {}).get("conditions") or [] if c["status"] == "True"]


async def rbac_of_ordinary_requests(b: backends.Backend) -> int:
    namespace = await b.new_namespace()
    await call(b, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "probe"}})
    config = await b.service_account_kubeconfig(namespace=namespace, name="probe", path=b.directory / "probe")
    token = (await asyncio.to_thread(config.read_text)).split("token: ")[1].split()[0]
    headers = {"Authorization": f"Bearer {token}"}
    return (await call(b, "GET", f"/api/v1/namespaces/{namespace}/secrets", admin=False, headers=headers))[0]


async def authorization_kinds(b: backends.Backend) -> list[str]:
    _, answer = await call(b, "GET", "/apis/authorization.k8s.io/v1")
    return sorted(r["name"] for r in answer["resources"])


async def aggregated_cluster_role(b: backends.Backend) -> list[Any]:
    """The real controller fills the aggregated ClusterRole's rules a moment later."""
    tag = uuid.uuid4().hex[:8]
    label = {f"probe.example.com/{tag}": "true"}
    base = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    await call(b, "POST", base, {"metadata": {"name": f"part-{tag}", "labels": label}, "rules": [rule]})
    aggregated = {
        "metadata": {"name": f"all-{tag}"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": label}]},
    }
    await call(b, "POST", base, aggregated)

    async def rules() -> list[Any]:
        return list((await call(b, "GET", f"{base}/all-{tag}"))[1].get("rules") or [])

    found = await eventually(rules, within=10, what="the aggregated rules") if b.real else await rules()
    for name in (f"part-{tag}", f"all-{tag}"):
        await call(b, "DELETE", f"{base}/{name}")
    return found


async def admission_webhooks(b: backends.Backend) -> int:
    return (await call(b, "GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"))[0]


async def builtin_validation(b: backends.Backend) -> int:
    body = {"metadata": {"name": "c"}, "data": {"a": 1}}  # a ConfigMap's data are strings
    return (await call(b, "POST", "/api/v1/namespaces/default/configmaps?dryRun=All", body))[0]


async def protobuf_responses(b: backends.Backend) -> str:
    async with (
        b.http() as http,
        http.get(
            f"{b.url}/api/v1/namespaces", headers={"Accept": "application/vnd.kubernetes.protobuf"}
        ) as resp,
    ):
        return resp.content_type


async def bookmarks(b: backends.Backend) -> list[str]:
    """The first 3 s of an idle watch that allows bookmarks (the emulator's interval made 1 s
    here; a real server's first would come 2 s before the watch's 30 s timeout at the soonest)."""
    namespace = await b.new_namespace()
    _, listing = await call(b, "GET", f"/api/v1/namespaces/{namespace}/secrets")
    rv = listing["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "30"}
    async with (
        b.http() as http,
        http.get(f"{b.url}/api/v1/namespaces/{namespace}/secrets", params=params) as resp,
    ):
        try:
            line = await asyncio.wait_for(resp.content.readline(), timeout=3)
        except TimeoutError:
            return []
    return [json.loads(line)["type"]]


@dataclass(frozen=True)
class Probe:
    quote: str
    """Words of the deviation's bullet in ``DEVIATIONS``."""
    run: Callable[[backends.Backend], Awaitable[Any]]
    emulator: Any
    """What the emulator answers."""
    real: Any
    """What kube-apiserver answers."""
    options: dict[str, Any] = field(default_factory=dict)
    """``kubeapi.Server`` options of the probe's emulator."""


PROBES = [
    Probe("Of the built-in resources only", served_builtins, 404, 200),
    Probe(
        "Discovery is the unaggregated kind only",
        aggregated_discovery,
        "APIGroupList",
        "APIGroupDiscoveryList",
    ),
    Probe(
        "a new namespace gets neither its `default` ServiceAccount nor its `kube-root-ca.crt`",
        namespace_furnished,
        [],
        ["kube-root-ca.crt"],
    ),
    Probe(
        "Strategic merge patch is applied as JSON merge patch",
        strategic_merge_of_a_list,
        ["b.io/y"],
        ["b.io/y", "a.io/x"],
    ),
    Probe(
        "lists of type map (`x-kubernetes-list-type: map`, metadata.ownerReferences) are owned whole",
        owner_references_owned_whole,
        [],
        ['k:{"uid":"7d3c0d55-6c1e-4a8e-9d45-1f0e2a3b4c5d"}'],
    ),
    Probe("/openapi/v3 answers an empty index", openapi_v3, False, True),
    Probe("built-in kinds are not checked for unknown fields", unknown_field_of_a_builtin, 201, 400),
    Probe("CEL rules (x-kubernetes-validations) are not evaluated", cel_rule, 201, 422),
    Probe(
        "CRDs are checked for their names, scope and versions, not for a structural schema",
        structural_schema_of_a_crd,
        201,
        422,
    ),
    Probe("a conversion webhook is never called", conversion_webhook, 200, 500),
    Probe("events and events.k8s.io/v1 Events are stored separately", events_in_both_groups, [], ["e"]),
    Probe(
        "One history window for the whole cluster", one_history_window, ("ERROR", 410), None, {"history": 4}
    ),
    Probe(
        "run synchronously at the end of the write that triggers them",
        synchronous_namespace_cleanup,
        404,
        200,
    ),
    Probe(
        "a new CRD is Established in the answer to its create",
        crd_established_on_create,
        ["NamesAccepted", "Established"],
        [],
    ),
    Probe("every request is allowed", rbac_of_ordinary_requests, 200, 403),
    Probe(
        "the only kind of authorization.k8s.io served",
        authorization_kinds,
        ["selfsubjectaccessreviews"],
        [
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews",
        ],
    ),
    Probe(
        "aggregated ClusterRoles are not expanded",
        aggregated_cluster_role,
        [],
        [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    ),
    Probe("No admission webhooks", admission_webhooks, 404, 200),
    Probe("Built-in kinds are not validated beyond metadata", builtin_validation, 201, 400),
    Probe(
        "Responses are always JSON",
        protobuf_responses,
        "application/json",
        "application/vnd.kubernetes.protobuf",
    ),
    Probe(
        "BOOKMARKs (when allowed) come after every 10 s of idleness",
        bookmarks,
        ["BOOKMARK"],
        [],
        {"bookmark_interval": 1.0},
    ),
]


def test_every_deviation_has_a_probe() -> None:
    listed = bullets()
    for probe in PROBES:
        assert [b for b in listed if probe.quote in b], f"no deviation says {probe.quote!r}"
    for bullet in listed:
        assert any(p.quote in bullet for p in PROBES), f"no probe shows: {bullet}"


def test_emulator_only_tests_quote_the_list() -> None:
    text = _flat(kubeapi.DEVIATIONS)
    here = Path(__file__).parent
    quotes = [
        q
        for path in sorted(here.glob("test_*.py"))
        if path.name != Path(__file__).name  # whose quotes are the probes'
        for q in re.findall(r"DEVIATIONS: '([^']+)'", path.read_text())
    ]
    assert quotes
    for quote in quotes:
        assert _flat(quote) in text, f"DEVIATIONS no longer says {quote!r}"


@pytest.mark.parametrize("probe", PROBES, ids=[p.run.__name__ for p in PROBES])
async def test_the_deviation_holds(probe: Probe, real_cluster: realkube.Cluster, tmp_path: Path) -> None:
    assert probe.emulator != probe.real
    (tmp_path / "emulator").mkdir()
    (tmp_path / "real").mkdir()
    async with backends.emulator(tmp_path / "emulator", **probe.options) as emulator:
        emulated = await probe.run(emulator)
    async with backends.real(tmp_path / "real", real_cluster) as real:
        answered = await probe.run(real)
    assert (emulated, answered) == (probe.emulator, probe.real), probe.quote
