"""deploy/charts/kamaji-broker-agent, rendered by Helm's own engine (helm-python-sdk, offline).

Defaults (plus the four required values) and a non-default set render, every document validates
against the pinned Kubernetes schemas, RBAC equals ``agent.rbac.RULES`` in every target
namespace (or cluster-wide), and the pod's environment loads into ``AgentSettings`` with the
files its volumes provide. ``values.schema.json`` rejects bad values before anything renders.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate  # type: ignore[import-untyped]  # no stubs, no py.typed
import pytest

from agent import rbac
from agent.settings import AgentSettings
from kamaji_broker import flags
from protocol import natsjwt
from tests.deploy import manifests as m

REQUIRED = {
    "site": "site-a",
    "nats": {"url": "tls://nats.example:4222", "tls": {"existingConfigMap": "kamaji-broker-nats-ca"}},
    "credentials": {"existingSecret": "kamaji-broker-agent-nats"},
    "hubPublicKeys": {"existingConfigMap": "kamaji-broker-hub-keys"},
    "namespaces": ["tenants", "tenants-eu"],
}
"""What the chart cannot default: the site, where NATS is and the CA that vouches for it, the
site's seed, the hub's keys, targets."""

NON_DEFAULT = {
    "site": "site-b",
    "nats": {
        "url": "tls://nats-0.example:4222,tls://nats-1.example:4222",
        "prefix": "kbx",
        # cert-manager's Certificate Secret, which carries ca.crt next to the server's pair.
        "tls": {"existingSecret": "nats-server-tls"},
    },
    "credentials": {"value": "SUAPLACEHOLDERSEED\n", "key": "agent.nk"},
    "hubPublicKeys": {"json": '{"signing": [], "sealing": []}'},
    "allNamespaces": True,
    "orphan": {"policy": "delete", "grace": "2h30m"},
    "resyncInterval": 120,
    "podDisruptionBudget": {"enabled": True, "maxUnavailable": 0},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "port": 9090,
}


OPERATOR_MODE_ENV = {
    "KB_AGENT_NATS_IDENTITY_SECRET",
    "KB_AGENT_NATS_BOOTSTRAP_CREDS",
    "KB_AGENT_NATS_RENEW_BEFORE",
}
OPERATOR = {
    **REQUIRED,
    "credentials": {
        "existingSecret": "kamaji-broker-agent-bootstrap",
        "key": "bootstrap.creds",
        "type": "operator",
        "renewBefore": "8h",
    },
}
"""Operator mode: the bootstrap .creds handed over, the agent's own key kept in an
identity Secret of the release namespace."""


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return m.documents(m.render_chart(REQUIRED))


@pytest.fixture(scope="module")
def custom_docs() -> list[dict[str, Any]]:
    return m.documents(m.render_chart(NON_DEFAULT))


def _validate_all(docs: list[dict[str, Any]]) -> set[str]:
    kinds = set()
    for doc in docs:
        kinds.add(doc["kind"])
        if doc["kind"] == "ServiceMonitor":
            # A Prometheus Operator CRD: no schema in kubernetes-validate; checked by hand below.
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                m.validate(doc)
            continue
        m.validate(doc)
    return kinds


def test_defaults_render_and_validate(default_docs: list[dict[str, Any]]) -> None:
    kinds = _validate_all(default_docs)
    assert kinds == {"Deployment", "ServiceAccount", "Role", "RoleBinding", "Service"}
    assert {r["metadata"]["namespace"] for r in m.of_kind(default_docs, "Role")} == {"tenants", "tenants-eu"}


def test_non_defaults_render_and_validate(custom_docs: list[dict[str, Any]]) -> None:
    kinds = _validate_all(custom_docs)
    assert kinds == {
        "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "Secret",
        "ConfigMap", "PodDisruptionBudget", "ServiceMonitor",
    }  # fmt: skip
    pdb = m.one(custom_docs, "PodDisruptionBudget")
    deployment = m.one(custom_docs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["maxUnavailable"] == 0
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    monitor = m.one(custom_docs, "ServiceMonitor")
    service = m.one(custom_docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    assert service["spec"]["ports"][0]["port"] == 9090


@pytest.mark.parametrize("which", ["default", "custom"])
def test_rbac_is_exactly_what_the_agent_uses(
    which: str, default_docs: list[dict[str, Any]], custom_docs: list[dict[str, Any]]
) -> None:
    docs = default_docs if which == "default" else custom_docs
    account = m.one(docs, "ServiceAccount")["metadata"]["name"]
    if which == "default":
        roles, binding_kind, role_kind = m.of_kind(docs, "Role"), "RoleBinding", "Role"
        assert m.of_kind(docs, "ClusterRole") == []
    else:
        roles, binding_kind, role_kind = m.of_kind(docs, "ClusterRole"), "ClusterRoleBinding", "ClusterRole"
        assert m.of_kind(docs, "Role") == []
    for role in roles:  # each Role on its own: every target namespace gets every permission
        assert m.granted([role]) == m.declared(rbac.RULES), role["metadata"]
    bindings = m.of_kind(docs, binding_kind)
    assert len(bindings) == len(roles)
    for binding in bindings:
        role = next(r for r in roles if r["metadata"]["name"] == binding["roleRef"]["name"]
                    and r["metadata"].get("namespace") == binding["metadata"].get("namespace"))  # fmt: skip
        assert binding["roleRef"]["kind"] == role_kind and role
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "kamaji-broker-system"}
        ]


def _site_files(tmp_path: Path, site: str) -> tuple[str, str, str]:
    """The seed, the hub's public keys and the NATS CA, made by the operator commands."""
    kb = [sys.executable, "-m", "kamaji_broker.cli"]
    subprocess.run(
        [*kb, "keys", "generate", "--out", str(tmp_path / "keys")], capture_output=True, check=True
    )
    nats = tmp_path / "nats"
    subprocess.run(
        [*kb, "nats-config", "--dir", str(nats), "--auth", "static", "--tls-generate", str(nats / "tls")],
        capture_output=True,
        check=True,
    )
    subprocess.run(
        [*kb, "site", "add", site, "--nats-config-dir", str(tmp_path / "nats")],
        capture_output=True,
        check=True,
    )
    return (
        (tmp_path / "nats" / "sites" / f"{site}.nk").read_text(),
        (tmp_path / "keys" / "hub-public-keys.json").read_text(),
        (nats / "tls" / "ca.crt").read_text(),
    )


@pytest.mark.parametrize("which", ["existing", "created"])
def test_environment_loads_into_the_agent_settings(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed, public, ca = _site_files(tmp_path, "site-a")
    if which == "existing":
        docs = m.documents(m.render_chart(REQUIRED))
        sources = {
            ("Secret", "kamaji-broker-agent-nats"): {"site.nk": seed},  # --from-file=site.nk=...
            ("ConfigMap", "kamaji-broker-hub-keys"): {"hub-public-keys.json": public},
            ("ConfigMap", "kamaji-broker-nats-ca"): {"ca.crt": ca},  # --from-file=ca.crt=...
        }
    else:
        values = {**NON_DEFAULT, "site": "site-a", "credentials": {"value": seed, "key": "agent.nk"},
                  "hubPublicKeys": {"json": public}}  # fmt: skip
        docs = m.documents(m.render_chart(values))
        secret, config_map = m.one(docs, "Secret"), m.one(docs, "ConfigMap")
        sources = {
            ("Secret", secret["metadata"]["name"]): m.secret_data(secret),
            ("ConfigMap", config_map["metadata"]["name"]): dict(config_map["data"]),
            ("Secret", "nats-server-tls"): {"ca.crt": ca, "tls.crt": "...", "tls.key": "..."},
        }
    pod = m.one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["agent"]
    mounts = m.materialize(pod, container, sources=sources, root=tmp_path / "pod")
    env = {e["name"]: e["value"] for e in container["env"]}
    settable = {f"KB_AGENT_{n.upper()}" for n in AgentSettings.model_fields}
    assert set(env) - {"KB_LOG_LEVEL"} <= settable
    # Every setting is given, except a kubeconfig (in-cluster) and the other credential kinds.
    assert settable - set(env) == {"KB_AGENT_KUBECONFIG", "KB_AGENT_NATS_CREDS", *OPERATOR_MODE_ENV}
    for name, value in env.items():
        monkeypatch.setenv(name, m.local_path(value, mounts))
    settings = flags.load(AgentSettings, argparse.Namespace())  # all from the environment
    assert settings.site == "site-a" and settings.in_cluster
    assert settings.nats_seed is not None and settings.nats_seed.read_text() == seed
    assert settings.hub_public_keys.read_text() == public
    assert settings.nats_ca_file is not None and settings.nats_ca_file.read_text() == ca
    if which == "existing":
        assert settings.target_namespaces == ("tenants", "tenants-eu") and not settings.all_namespaces
        assert (settings.orphan_policy, settings.orphan_grace, settings.resync_interval) == (
            "report",
            3600,
            300,
        )
        assert settings.listen == ":8080"
    else:
        assert settings.all_namespaces and settings.target_namespaces == ()
        assert (settings.orphan_policy, settings.orphan_grace, settings.resync_interval) == (
            "delete",
            9000,
            120,
        )
        assert settings.prefix == "kbx" and len(settings.servers) == 2 and settings.listen == ":9090"
    port = container["ports"][0]
    assert settings.listen == f":{port['containerPort']}"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}


def test_creds_type_sets_the_creds_variable() -> None:
    values = {**REQUIRED, "credentials": {"existingSecret": "x", "type": "creds", "key": "site.creds"}}
    container = m.one(m.documents(m.render_chart(values)), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KB_AGENT_NATS_CREDS"] == "/etc/kamaji-broker/nats/site.creds"
    assert "KB_AGENT_NATS_SEED" not in env


def test_operator_mode_keeps_its_own_key_in_one_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = m.documents(m.render_chart(OPERATOR))
    _validate_all(docs)
    identity = next(r for r in m.of_kind(docs, "Role") if r["metadata"]["name"].endswith("-identity"))
    assert identity["metadata"]["namespace"] == "kamaji-broker-system"
    stripped = [{**rule, "resourceNames": []} for rule in identity["rules"]]
    assert m.granted([{"rules": stripped}]) == m.declared(rbac.IDENTITY_RULES)
    for rule in identity["rules"]:  # get and update only that Secret; create cannot be named
        named = ["kamaji-broker-agent-identity"] if rule["verbs"] != ["create"] else None
        assert rule.get("resourceNames") == named, rule
    targets = [r for r in m.of_kind(docs, "Role") if r is not identity]
    assert {r["metadata"]["namespace"] for r in targets} == {"tenants", "tenants-eu"}
    assert all(m.granted([r]) == m.declared(rbac.RULES) for r in targets)
    binding = next(
        b for b in m.of_kind(docs, "RoleBinding") if b["roleRef"]["name"] == identity["metadata"]["name"]
    )
    assert binding["metadata"]["namespace"] == "kamaji-broker-system"

    pod = m.one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "nats-credentials"]
    assert volume["secret"]["optional"] is True  # single use: may be deleted once joined
    bootstrap = natsjwt.creds("a.b.c", natsjwt.new_seed("user"))
    sources = {
        ("Secret", "kamaji-broker-agent-bootstrap"): {"bootstrap.creds": bootstrap},
        ("ConfigMap", "kamaji-broker-hub-keys"): {"hub-public-keys.json": "{}"},
        ("ConfigMap", "kamaji-broker-nats-ca"): {"ca.crt": "-"},
    }
    mounts = m.materialize(pod, container, sources=sources, root=tmp_path / "pod")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert set(env) >= OPERATOR_MODE_ENV and not {"KB_AGENT_NATS_SEED", "KB_AGENT_NATS_CREDS"} & set(env)
    for name, value in env.items():
        monkeypatch.setenv(name, m.local_path(value, mounts))
    settings = flags.load(AgentSettings, argparse.Namespace())
    assert settings.operator_mode and settings.nats_seed is None and settings.nats_creds is None
    assert settings.identity_secret == ("kamaji-broker-system", "kamaji-broker-agent-identity")
    assert (
        settings.nats_bootstrap_creds is not None and settings.nats_bootstrap_creds.read_text() == bootstrap
    )
    assert settings.nats_renew_before == 8 * 3600


def test_pod_is_hardened(default_docs: list[dict[str, Any]]) -> None:
    deployment = m.one(default_docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    security = pod["containers"][0]["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"site": "Site_A"}, "site"),
        ({"orphan": {"policy": "destroy"}}, "policy"),
        ({"resyncInterval": "5 minutes"}, "resyncInterval"),
        ({"fetchBatch": 0}, "fetchBatch"),
        ({"namespaces": ["Tenants"]}, "namespaces"),
        ({"nats": {"url": "http://nats:4222"}}, "url"),
        ({"nats": {"url": "tls://n:4222", "tls": {"ca": "not a certificate"}}}, "ca"),
        ({"podDisruptionBudget": {"enabled": "yes"}}, "enabled"),
        ({"replicaCount": 2}, "replicaCount"),
        ({"credentials": {"type": "csr"}}, "type"),
        ({"credentials": {"identitySecret": "Identity"}}, "identitySecret"),
        ({"credentials": {"renewBefore": "soon"}}, "renewBefore"),
    ],
)
def test_schema_rejects_bad_values(change: dict[str, Any], error: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=error):
        m.render_chart({**REQUIRED, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"site": ""}, "site is required"),
        ({"nats": {"url": ""}}, "nats.url is required"),
        ({"credentials": {}}, "credentials: set credentials.existingSecret"),
        ({"hubPublicKeys": {}}, "hubPublicKeys: set"),
        ({"namespaces": []}, "set namespaces"),
        ({"allNamespaces": True}, "not both"),
        ({"nats": {"url": "nats://nats.example:4222"}}, "nats.tls: nats://nats.example:4222 is not verified"),
        (
            {"nats": {"url": "tls://a:4222,nats://b:4222", "tls": {"existingConfigMap": ""}}},
            "nats.tls: nats://b:4222 is not verified by any CA",
        ),
        (
            {"nats": {"url": "tls://a:4222", "tls": {"existingConfigMap": "x", "existingSecret": "y"}}},
            "not several",
        ),
    ],
)
def test_missing_or_conflicting_values_fail_with_the_fix(change: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=message):
        m.render_chart({**REQUIRED, **change})


def test_notes_tell_how_to_check_the_connection() -> None:
    notes = m.render_chart(REQUIRED)["kamaji-broker-agent/templates/NOTES.txt"]
    assert "port-forward deployment/kamaji-broker-agent 8080:8080" in notes
    assert "/readyz" in notes and "SiteConnected" in notes and '@.spec.site=="site-a"' in notes


def test_values_file_is_valid_against_its_schema() -> None:
    chart = helm_python.Chart.load(m.CHART)
    schema = json.loads((m.CHART / "values.schema.json").read_text())
    assert set(chart.values) == set(schema["properties"]), "every value is described by the schema"


def test_ca_given_inline_becomes_a_configmap_the_agent_trusts() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    values = {**REQUIRED, "nats": {"url": "tls://nats.example:4222", "tls": {"ca": pem}}}
    docs = m.documents(m.render_chart(values))
    (config_map,) = [c for c in m.of_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-nats-ca")]
    assert config_map["data"] == {"ca.crt": pem}
    pod = m.one(docs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "nats-ca"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KB_AGENT_NATS_CA_FILE"] == "/etc/kamaji-broker/nats-ca/ca.crt"


def test_publicly_trusted_tls_needs_no_ca() -> None:
    values = {**REQUIRED, "nats": {"url": "tls://connect.example.com:4222", "tls": {"existingConfigMap": ""}}}
    pod = m.one(m.documents(m.render_chart(values)), "Deployment")["spec"]["template"]["spec"]
    assert "nats-ca" not in {v["name"] for v in pod["volumes"]}
    assert "KB_AGENT_NATS_CA_FILE" not in {e["name"] for e in pod["containers"][0]["env"]}
