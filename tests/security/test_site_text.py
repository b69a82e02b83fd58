"""Text a hostile site sends never reaches an operator's terminal as it came.

site-a, with its own real identity on its own subjects, sends a status whose message clears the
screen and draws a fake verdict, whose reason is no condition reason, whose endpoint host hides
escapes; and a heartbeat whose agent version and key ids do the same. Against a real hub
process, a real nats-server and the emulated management cluster, every case asserts what the
operator then reads: the RKCP's conditions and the Site's status (``kubectl describe``) and
``kamaji-broker status`` in text and JSON hold no control character, no bidirectional override,
nothing longer than its bound; an invalid reason is counted and the status still moves with what
the site validly reported (phase Failed: TenantControlPlaneReady False, reason Failed); the hub
never fails a reconcile over it.

Before this was fixed, ``status`` printed the escapes as they came and the invalid reason made
every reconcile of the RKCP fail with a ValidationError, leaving it Ready while its site said
Failed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from common.kube import resources
from protocol import messages, subjects
from tests import helpers
from tests.security import intake_support
from tests.security.intake_support import NS, Stand

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLEAR_AND_LIE = "\x1b[2J\x1b[H\x1b[32mkamaji-broker status: healthy\x1b[0m"
EVIL_REASON = "Evil\x1b[2J\x1b]0;PWNED\x07"
HYPERLINK = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"
RTL = "v1.31.0\u202e0.13.1v"
BLINK = "v1.31.0\x1b[5m"


def unprintable(text: str) -> list[str]:
    """Every character of ``text`` a terminal would act on rather than show (newlines apart)."""
    return [ch for line in text.splitlines() for ch in line if not ch.isprintable()]


def everything_said(obj: dict[str, Any]) -> str:
    """All the strings an object's status holds, joined: what ``kubectl describe`` shows."""
    return "\n".join(str(v) for v in _strings(obj.get("status") or {}))


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stand(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stand]:
    async with intake_support.stand(tmp_path_factory.mktemp("site-text")) as s:
        yield s


async def send_status(stand: Stand, **fields: Any) -> None:
    status = stand.status(intent_seq=await stand.intent_seq("site-a"), **fields)
    await stand.publish("site-a", subjects.status("site-a", NS, "a-1"), messages.encode(status))


async def until_condition(stand: Stand, type_: str, *, reason: str, message_part: str) -> dict[str, Any]:
    async def shown() -> dict[str, Any]:
        return conditions(await stand.rkcp("site-a")).get(type_) or {}

    def done(cond: dict[str, Any]) -> bool:
        return cond.get("reason") == reason and message_part in cond.get("message", "")

    return await helpers.eventually(shown, done, within=30, every=0.2, what=f"{type_}={reason}")


CASES = [
    # id, status fields, TenantControlPlaneReady's (status, reason), a part of its message
    ("failed-with-an-invalid-reason-and-a-screen-clearing-message",
     {"phase": "Failed", "reason": EVIL_REASON, "message": CLEAR_AND_LIE},
     ("False", "Failed"), "\\x1b[2J\\x1b[H\\x1b[32mkamaji-broker status: healthy"),
    ("rejected-with-an-invalid-reason",
     {"phase": "Rejected", "reason": EVIL_REASON, "message": HYPERLINK},
     ("False", "Rejected"), "\\x1b]8;;https://evil.example\\x07click"),
    ("drifted-with-a-right-to-left-override",
     {"phase": "NotReady", "reason": "Drifted", "message": f"reverting {RTL}"},
     ("False", "Drifted"), "reverting v1.31.0\\u202e0.13.1v"),
    ("ready-with-a-blinking-version-and-a-huge-message",
     {"phase": "Ready", "version": BLINK, "message": "\x1b[5m" * 5_000},
     ("True", "Ready"), "\\x1b[5m"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "expected", "part"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_a_sites_status_text_is_stored_harmless_and_still_moves_the_rkcp(
    stand: Stand, fields: dict[str, Any], expected: tuple[str, str], part: str
) -> None:
    errors_before = await stand.counter("kb_hub_reconcile_errors_total")
    invalid_before = (await stand.metrics()).get(intake_support.rejected_key("InvalidReason"), 0.0)
    await send_status(stand, **fields)
    cond = await until_condition(stand, "TenantControlPlaneReady", reason=expected[1], message_part=part)
    assert cond["status"] == expected[0]
    assert len(cond["message"]) <= messages.MESSAGE_MAX
    obj = await stand.rkcp("site-a")
    said = everything_said(obj)
    assert unprintable(said) == [], said
    if fields.get("phase") in ("Failed", "Rejected"):
        assert conditions(obj)["Ready"]["status"] == "False"  # no longer Ready while its site fails
    invalid_after = (await stand.metrics()).get(intake_support.rejected_key("InvalidReason"), 0.0)
    assert invalid_after == invalid_before + (0 if text_reason_valid(fields) else 1)
    assert await stand.counter("kb_hub_reconcile_errors_total") == errors_before
    assert await stand.alive()
    await stand.site_b_processed(f"after {fields['phase']}")


def text_reason_valid(fields: dict[str, Any]) -> bool:
    return "\x1b" not in fields.get("reason", "")


# An IPv6 zone id takes any characters in Python's ipaddress, escapes included.
BAD_HOSTS = ["evil\x1b[2J.example", "fe80::1%\x1b[2J\x1b[31mevil"]


@pytest.mark.parametrize("host", BAD_HOSTS, ids=["escape-in-name", "escape-in-zone-id"])
async def test_an_endpoint_host_that_is_no_host_is_dropped_and_counted(stand: Stand, host: str) -> None:
    before = (await stand.metrics()).get(intake_support.rejected_key("InvalidHost"), 0.0)
    said = f"with bad host {BAD_HOSTS.index(host)}"
    await send_status(stand, endpoint=messages.Endpoint(host=host, port=6443), message=said)
    await until_condition(stand, "TenantControlPlaneReady", reason="Ready", message_part=said)

    async def counted() -> bool:
        metrics = await stand.metrics()
        return metrics.get(intake_support.rejected_key("InvalidHost"), 0.0) == before + 1

    await helpers.eventually(counted, within=30, every=0.2)
    obj = await stand.rkcp("site-a")
    endpoint = (obj.get("spec") or {}).get("controlPlaneEndpoint") or {}
    assert "evil" not in str(endpoint.get("host", ""))


async def test_a_heartbeats_text_is_shown_harmless_in_the_site_and_by_status(stand: Stand) -> None:
    before = (await stand.metrics()).get(intake_support.rejected_key("TooManyKeyIds"), 0.0)
    ids = ("\x1b[31mdeadbeef\u202e", *(f"{i:016x}" for i in range(40)))
    now = dt.datetime.now(dt.UTC)
    beat = messages.Heartbeat(
        site="site-a",
        agent_version="0.1.0\x1b[2J\x1b[31mHACKED",
        trusted_key_ids=ids,
        started_at=now,
        sent_at=now,
    )
    await stand.publish("site-a", subjects.heartbeat("site-a"), messages.encode(beat))

    async def shown() -> dict[str, Any] | None:
        site = await stand.kube.get(resources.SITE, "site-a")
        version = (site.get("status") or {}).get("agentVersion") or ""
        return site if "HACKED" in version else None

    site = await helpers.eventually(shown, within=30, every=0.2, what="the heartbeat in the Site")
    said = everything_said(site)
    assert unprintable(said) == [], said
    assert "0.1.0\\x1b[2J\\x1b[31mHACKED" in said
    assert len(site["status"]["trustedKeyIds"]) == messages.KEY_IDS_MAX
    metrics = await stand.metrics()
    assert metrics.get(intake_support.rejected_key("TooManyKeyIds"), 0.0) == before + 1

    # What the operator's terminal gets from `kamaji-broker status`, as text and as JSON, after a
    # status with a screen-clearing message and an invalid reason.
    await send_status(stand, phase="Failed", reason=EVIL_REASON, message=CLEAR_AND_LIE)
    await until_condition(stand, "TenantControlPlaneReady", reason="Failed", message_part="kamaji-broker")
    for output in ("text", "json"):
        out = await status_command(stand, output)
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out, out
        assert unprintable(out) == [], out
        if output == "json":
            doc = json.loads(out)
            assert "HACKED" in json.dumps(doc)  # shown, escaped: not dropped
        else:
            assert "HACKED" in out


async def status_command(stand: Stand, output: str) -> str:
    ca = helpers.ca_for(stand.nats.url)
    args = [
        "--kubeconfig", str(stand.conf.parent / "mgmt.kubeconfig"), "--nats-url", stand.nats.url,
        *helpers.identity_flag(helpers.identity_file(stand.conf, "observer")),
        *(["--nats-ca-file", str(ca)] if ca is not None else []), "-o", output,
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kamaji_broker.cli", "status", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode in (0, 1), err.decode()  # healthy or not: it ran
    return out.decode()
