"""sandbox.realkube.audit: who did what, from kube-apiserver's audit lines. Tables, no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.realkube import audit

HUB = "system:serviceaccount:kb:hub"


def line(
    user: str,
    verb: str,
    *,
    group: str = "",
    resource: str = "secrets",
    sub: str = "",
    code: int = 200,
    namespace: str = "",
) -> str:
    ref: dict[str, Any] = {"resource": resource, "apiGroup": group} if resource else {}
    if namespace:
        ref["namespace"] = namespace
    if sub:
        ref["subresource"] = sub
    event: dict[str, Any] = {"user": {"username": user}, "verb": verb, "responseStatus": {"code": code}}
    if ref:
        event["objectRef"] = ref
    return json.dumps(event)


@pytest.mark.parametrize(
    ("lines", "used", "refused"),
    [
        ([line(HUB, "list")], {audit.Use("", "secrets", "list")}, set()),
        ([line("other", "list")], set(), set()),
        ([line(HUB, "get", resource="")], set(), set()),  # /version: no object
        (
            [line(HUB, "patch", group="kamaji-broker.io", resource="sites", sub="status")],
            {audit.Use("kamaji-broker.io", "sites/status", "patch")},
            set(),
        ),
        (
            [line(HUB, "delete", code=403), ""],
            {audit.Use("", "secrets", "delete")},
            {audit.Use("", "secrets", "delete")},
        ),
    ],
    ids=["one", "another user", "non-resource URL", "subresource", "refused"],
)
def test_used_and_refused(lines: list[str], used: set[audit.Use], refused: set[audit.Use]) -> None:
    assert audit.used(lines, HUB) == used
    assert audit.refused(lines, HUB) == refused


def test_expand_makes_one_use_per_verb() -> None:
    rules = (("", "secrets", ("get", "list")), ("x.io", "*", ("patch",)))
    assert audit.expand(rules) == {
        audit.Use("", "secrets", "get"), audit.Use("", "secrets", "list"), audit.Use("x.io", "*", "patch")
    }  # fmt: skip
    assert str(audit.Use("x.io", "sites/status", "patch")) == "patch sites/status.x.io"


def test_where_says_the_namespace_of_each_request() -> None:
    lines = [line(HUB, "watch", namespace="team-a"), line(HUB, "list"), line("other", "get", namespace="x")]
    secrets = audit.Use("", "secrets", "watch"), audit.Use("", "secrets", "list")
    assert audit.where(lines, HUB) == {(secrets[0], "team-a"), (secrets[1], "")}
