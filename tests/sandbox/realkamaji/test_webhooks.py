"""Kamaji's webhooks registered by URL: each keeps its rules and calls the operator's address."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sandbox.realkamaji import webhooks

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
            webhooks.VALIDATING,
            [hook("a.kb.io", "/validate-a"), hook("telemetry", "/telemetry", "Ignore")],
            ["https://127.0.0.1:9443/validate-a", "https://127.0.0.1:9443/telemetry"],
        ),
        (webhooks.MUTATING, [hook("m.kb.io", "/mutate-m")], ["https://127.0.0.1:9443/mutate-m"]),
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
        webhooks.configuration(webhooks.VALIDATING, [hook("bare", None)], host="h", port=1, ca_pem=b"")
