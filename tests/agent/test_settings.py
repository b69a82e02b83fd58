"""agent.settings: the NATS identity in static and operator mode, with errors naming the flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from agent.settings import AgentSettings

HERE = Path(__file__)


def load(**fields: Any) -> AgentSettings:
    return AgentSettings(
        site="site-a",
        nats_url="nats://127.0.0.1:4222",
        hub_public_keys=HERE,
        in_cluster=True,
        all_namespaces=True,
        **fields,
    )


@pytest.mark.parametrize(
    ("fields", "operator"),
    [
        ({"nats_seed": HERE}, False),
        ({"nats_creds": HERE}, False),
        ({"nats_identity_secret": "kamaji-broker-system/agent-identity"}, True),
        (
            {"nats_identity_secret": "ns/identity", "nats_bootstrap_creds": HERE.parent / "gone.creds"},
            True,
        ),
    ],
    ids=["seed", "creds", "operator", "operator-with-bootstrap-file-not-yet-there"],
)
def test_one_nats_identity_is_accepted(fields: dict[str, Any], operator: bool) -> None:
    assert load(**fields).operator_mode is operator


def test_the_identity_secret_is_split_into_namespace_and_name() -> None:
    s = load(nats_identity_secret="kamaji-broker-system/agent-identity", nats_renew_before="2h")
    assert s.identity_secret == ("kamaji-broker-system", "agent-identity")
    assert s.nats_renew_before == 7200


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({}, "give exactly one NATS identity: one of --nats-seed, --nats-creds, --nats-identity-secret"),
        ({"nats_seed": HERE, "nats_creds": HERE}, "got --nats-seed and --nats-creds"),
        ({"nats_seed": HERE, "nats_identity_secret": "ns/n"}, "got --nats-seed and --nats-identity-secret"),
        ({"nats_seed": HERE, "nats_bootstrap_creds": HERE}, "--nats-bootstrap-creds is for operator mode"),
        ({"nats_bootstrap_creds": HERE}, "give it with --nats-identity-secret"),
        ({"nats_identity_secret": "identity"}, "give NAMESPACE/NAME"),
        ({"nats_identity_secret": "Kamaji/identity"}, "namespace 'Kamaji' is not a DNS-1123 label"),
        ({"nats_identity_secret": "ns/"}, "name '' is not a DNS-1123 label"),
    ],
)
def test_a_wrong_identity_names_the_flags(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=error):
        load(**fields)
