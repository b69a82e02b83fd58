"""common.doctor.results: rendering, exit code, settings errors as FAIL lines."""

from __future__ import annotations

import json

import pytest

from common.doctor import results
from common.doctor.results import Result

SAMPLE = [
    results.passed("settings", "flags and environment load"),
    results.warned("tls verified", "plaintext", "serve TLS"),
    results.failed("nats reachable", "refused: no", "start nats-server"),
    results.skipped("consumer bound", "needs nats reachable (FAIL)"),
]


def test_text() -> None:
    assert results.render_text(SAMPLE) == (
        "PASS  settings        flags and environment load\n"
        "WARN  tls verified    plaintext\n"
        "      fix: serve TLS\n"
        "FAIL  nats reachable  refused: no\n"
        "      fix: start nats-server\n"
        "SKIP  consumer bound  needs nats reachable (FAIL)\n"
        "1 PASS, 1 WARN, 1 FAIL, 1 SKIP\n"
    )


def test_json() -> None:
    doc = json.loads(results.render_json(SAMPLE))
    assert doc["ok"] is False
    assert doc["checks"][1] == {
        "check": "tls verified",
        "outcome": "WARN",
        "detail": "plaintext",
        "fix": "serve TLS",
    }


@pytest.mark.parametrize(
    ("id_", "found", "code"),
    [
        ("nothing", [], 0),
        ("passes and warnings", SAMPLE[:2], 0),
        ("a skip", [SAMPLE[3]], 0),
        ("a failure", SAMPLE, 1),
    ],
)
def test_exit_code(id_: str, found: list[Result], code: int) -> None:
    assert results.exit_code(found) == code, id_


def test_a_warning_or_failure_needs_a_fix() -> None:
    with pytest.raises(ValueError, match="rbac: a FAIL needs a fix hint"):
        Result("rbac", "FAIL", "denied")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "--site: required (give the flag or set its environment variable)",
            [
                (
                    "--site: required (give the flag or set its environment variable)",
                    "give --site (or KB_AGENT_SITE) a valid value",
                )
            ],
        ),
        (
            "--orphan-grace: invalid duration 'x'\n"
            "settings: give exactly one of --kubeconfig or --in-cluster",
            [
                (
                    "--orphan-grace: invalid duration 'x'",
                    "give --orphan-grace (or KB_AGENT_ORPHAN_GRACE) a valid value",
                ),
                (
                    "settings: give exactly one of --kubeconfig or --in-cluster",
                    "see `kamaji-broker doctor <hub|agent> --help` for the flags",
                ),
            ],
        ),
    ],
)
def test_settings_error(text: str, expected: list[tuple[str, str]]) -> None:
    got = results.from_settings_error(text, env_prefix="KB_AGENT_")
    assert [(r.check, r.outcome, r.detail, r.fix) for r in got] == [
        ("settings", "FAIL", d, f) for d, f in expected
    ]
