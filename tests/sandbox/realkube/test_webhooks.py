"""Webhooks registered by URL: each keeps its rules and calls the controller's address; a CRD
converts through it."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sandbox.realkube import webhooks

MUTATING = ("MutatingWebhookConfiguration", "kamaji-mutating-webhook-configuration")
VALIDATING = ("ValidatingWebhookConfiguration", "kamaji-validating-webhook-configuration")

RULES = {
    "apiGroups": ["kamaji.clastix.io"],
    "apiVersions": ["v1alpha1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["tenantcontrolplanes"],
}


def hook(name: str, path: str | None, policy: str = "Fail") -> dict[str, Any]:
    service: dict[str, Any] = {"name": "{{ svc }}", "namespace": "{{ ns }}"}
    if path is not None:
        service["path"] = path
    return {
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": service},
        "failurePolicy": policy,
        "name": name,
        "rules": [RULES],
        "sideEffects": "None",
    }


@pytest.mark.parametrize(
    ("kind_name", "hooks", "urls"),
    [
        (
            VALIDATING,
            [hook("a.kb.io", "/validate-a"), hook("telemetry", "/telemetry", "Ignore")],
            ["https://127.0.0.1:9443/validate-a", "https://127.0.0.1:9443/telemetry"],
        ),
        (MUTATING, [hook("m.kb.io", "/mutate-m")], ["https://127.0.0.1:9443/mutate-m"]),
    ],
)
def test_each_webhook_calls_its_path_at_the_operator_and_keeps_its_rules(
    kind_name: tuple[str, str], hooks: list[dict[str, Any]], urls: list[str]
) -> None:
    config = webhooks.configuration(kind_name, hooks, host="127.0.0.1", port=9443, ca_pem=b"PEM")
    assert (config["kind"], config["metadata"]["name"]) == kind_name
    assert [w["clientConfig"]["url"] for w in config["webhooks"]] == urls
    for made, source in zip(config["webhooks"], hooks, strict=True):
        assert base64.b64decode(made["clientConfig"]["caBundle"]) == b"PEM"
        assert "service" not in made["clientConfig"]
        rest = {k: v for k, v in made.items() if k != "clientConfig"}
        assert rest == {k: v for k, v in source.items() if k != "clientConfig"}
    assert hooks[0]["clientConfig"]["service"]["name"] == "{{ svc }}", "the source is left as it was"


def test_a_webhook_without_a_path_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'bare'"):
        webhooks.configuration(VALIDATING, [hook("bare", None)], host="h", port=1, ca_pem=b"")


def crd(*versions: str) -> dict[str, Any]:
    return {"spec": {"group": "cluster.x-k8s.io", "versions": [{"name": v} for v in versions]}}


@pytest.mark.parametrize(
    ("versions", "converts"),
    [
        pytest.param(("v1beta1", "v1beta2"), True, id="two-versions-convert-by-url"),
        pytest.param(("v1beta2",), False, id="one-version-unchanged"),
    ],
)
def test_conversion(versions: tuple[str, ...], converts: bool) -> None:
    source = crd(*versions)
    made = webhooks.conversion(source, host="100.64.0.2", port=9443, ca_pem=b"CA")
    assert "conversion" not in source["spec"]
    if not converts:
        assert made == source
        return
    webhook = made["spec"]["conversion"]["webhook"]
    assert made["spec"]["conversion"]["strategy"] == "Webhook"
    assert webhook["clientConfig"] == {"url": "https://100.64.0.2:9443/convert", "caBundle": "Q0E="}
    assert "v1" in webhook["conversionReviewVersions"]
