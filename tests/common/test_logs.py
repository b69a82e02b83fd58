"""common.logs: the fields of a line (``about``), its two formats, the levels of -v, and asyncio's TLS
close notice dropped (it is not about us) while other warnings stay."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common import logs
from protocol.coordinates import Coordinates
from tests import helpers


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def asyncio_records() -> Iterator[list[logging.LogRecord]]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.configure(level="info")
    collect = _Collect()
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(collect)
    yield collect.records
    asyncio_log.removeHandler(collect)
    root.handlers[:] = handlers
    root.setLevel(level)


def test_asyncio_ssl_eof_notice_is_dropped_and_other_warnings_stay(
    asyncio_records: list[logging.LogRecord],
) -> None:
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.warning("returning true from eof_received() has no effect when using ssl")
    asyncio_log.warning("Executing <Task> took 0.2 seconds")
    assert [r.getMessage() for r in asyncio_records] == ["Executing <Task> took 0.2 seconds"]


def _record(message: str = "published provision intent", *args: object, **extra: Any) -> logging.LogRecord:
    """A record as ``logging.Logger.info(message, *args, extra=extra)`` makes it: through the real
    ``makeRecord``, which refuses an ``extra`` that overwrites a LogRecord attribute."""
    logger = logging.getLogger("hub.controllers.rkcp")
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, args, None, extra=extra)
    record.created, record.msecs = 1796196600.123, 123.0  # 2026-12-02T07:30:00.123Z
    return record


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {}),
        ({"namespace": "default", "name": "cp-1"}, {"namespace": "default", "name": "cp-1"}),
        ({"namespace": "", "name": "cp-1", "site": None, "seq": None}, {"name": "cp-1"}),
        ({"seq": 0}, {"seq": 0}),
        (
            {"kind": "Secret", "namespace": "ns", "name": "s", "site": "site-a", "seq": 42},
            {"kind": "Secret", "namespace": "ns", "name": "s", "site": "site-a", "seq": 42},
        ),
    ],
    ids=["nothing", "namespace-and-name", "empties-dropped", "seq-zero-kept", "all"],
)
def test_about_keeps_what_is_given(kwargs: dict[str, Any], expected: dict[str, Any]) -> None:
    assert logs.about(**kwargs) == {logs.FIELDS: expected}


@pytest.mark.parametrize(
    ("subject", "prefix", "expected"),
    [
        (
            "kb.status.site-a.tenants.cp-1",
            "kb",
            {
                "kind": "TenantControlPlane",
                "namespace": "tenants",
                "name": "cp-1",
                "site": "site-a",
                "seq": 7,
            },
        ),
        (
            "x.y.intent.site-b.ns.cp-2",
            None,
            {"kind": "TenantControlPlane", "namespace": "ns", "name": "cp-2", "site": "site-b", "seq": 7},
        ),
        ("kb.site.site-a", "kb", {"site": "site-a", "seq": 7}),
        ("kb.nonsense", "kb", {"seq": 7}),
        ("nonsense", None, {"seq": 7}),
    ],
    ids=["status", "dotted-prefix-found", "heartbeat", "unknown-kind", "no-prefix-fits"],
)
def test_about_subject(subject: str, prefix: str | None, expected: dict[str, Any]) -> None:
    assert logs.about_subject(subject, prefix=prefix, seq=7) == {logs.FIELDS: expected}


def test_about_tcp_and_site() -> None:
    coords = Coordinates("site-a", "tenants", "cp-1")
    tcp = {"kind": "TenantControlPlane", "namespace": "tenants", "name": "cp-1", "site": "site-a", "seq": 3}
    assert logs.about_tcp(coords, seq=3) == {logs.FIELDS: tcp}
    assert logs.about_site("site-a") == {logs.FIELDS: {"kind": "Site", "name": "site-a", "site": "site-a"}}


def test_name_is_a_field_and_the_logger_name_stays_logger() -> None:
    """``name`` collides with LogRecord.name: given as a plain ``extra`` logging refuses it, given
    through ``about`` it reaches the line as ``name`` while ``logger`` keeps the logger's name."""
    with pytest.raises(KeyError, match="Attempt to overwrite 'name' in LogRecord"):
        _record(name="cp-1")
    record = _record(**logs.about(namespace="default", name="cp-1"))
    assert record.name == "hub.controllers.rkcp"
    doc = json.loads(logs.JsonFormatter().format(record))
    assert doc["name"] == "cp-1" and doc["logger"] == "hub.controllers.rkcp"
    text = logs.TextFormatter().format(record)
    assert " hub.controllers.rkcp  " in text and text.endswith("  namespace=default name=cp-1")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            lambda: _record(
                "published %s intent",
                "provision",
                **logs.about(namespace="default", name="cp-1", site="site-a", seq=42),
            ),
            "2026-12-02T07:30:00.123Z info  hub.controllers.rkcp  published provision intent"
            "  namespace=default name=cp-1 site=site-a seq=42",
        ),
        (
            lambda: _record("no fields"),
            "2026-12-02T07:30:00.123Z info  hub.controllers.rkcp  no fields",
        ),
        (
            lambda: _record("kind first", **logs.about(kind="Secret", namespace="ns", name="s")),
            "2026-12-02T07:30:00.123Z info  hub.controllers.rkcp  kind first"
            "  kind=Secret namespace=ns name=s",
        ),
        (
            lambda: _record("other extras follow", **logs.about(name="n"), reason="Not Ready"),
            "2026-12-02T07:30:00.123Z info  hub.controllers.rkcp  other extras follow"
            '  name=n reason="Not Ready"',
        ),
        (
            lambda: _record("refused %s", "0.1.0\x1b[2J\nfake line\u202e"),
            "2026-12-02T07:30:00.123Z info  hub.controllers.rkcp  refused 0.1.0\\x1b[2J\\nfake line\\u202e",
        ),
    ],
    ids=["the-example", "no-fields", "kind-first", "quoted-extra", "escapes-in-the-message"],
)
def test_text_lines(record: Callable[[], logging.LogRecord], expected: str) -> None:
    assert logs.TextFormatter().format(record()) == expected


def test_json_lines_carry_the_fields_at_the_top_level() -> None:
    record = _record("published", **logs.about(namespace="default", name="cp-1", site="site-a", seq=42))
    assert json.loads(logs.JsonFormatter().format(record)) == {
        "time": "2026-12-02T07:30:00.123Z",
        "level": "info",
        "logger": "hub.controllers.rkcp",
        "message": "published",
        "namespace": "default",
        "name": "cp-1",
        "site": "site-a",
        "seq": 42,
    }


def test_a_field_never_replaces_the_line_s_own_keys() -> None:
    record = _record("the message", logger="not this", level="nor this", time="nor this")
    doc = json.loads(logs.JsonFormatter().format(record))
    assert doc["logger"] == "hub.controllers.rkcp" and doc["level"] == "info"
    assert doc["time"] == "2026-12-02T07:30:00.123Z"


def test_an_exception_follows_the_line() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    logger = logging.getLogger("agent")
    record = logger.makeRecord(
        "agent", logging.ERROR, __file__, 1, "failed", (), exc_info, extra=logs.about(name="x")
    )
    text = logs.TextFormatter().format(record)
    assert text.splitlines()[0].endswith("error agent  failed  name=x")
    assert text.splitlines()[-1] == "RuntimeError: boom"
    assert json.loads(logs.JsonFormatter().format(record))["exception"].endswith("RuntimeError: boom")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("site-a", "site-a"),
        (42, "42"),
        (True, "true"),
        ("", '""'),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a=b", '"a=b"'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak", '"line\\nbreak"'),
        ("héllo", "héllo"),
    ],
    ids=["bare", "int", "bool", "empty", "space", "quotes", "equals", "backslash", "newline", "unicode"],
)
def test_logfmt_values(value: object, expected: str) -> None:
    assert logs.logfmt_value(value) == expected


D, INFO, W, N = logging.DEBUG, logging.INFO, logging.WARNING, logging.NOTSET


@pytest.mark.parametrize(
    ("verbosity", "level", "expected"),
    [
        (
            0,
            "info",
            {"": INFO, "hub": N, "agent": N, "nats": W, "aiohttp": N, "aiohttp.access": W, "asyncio": N},
        ),
        (0, "WARNING", {"": W, "hub": N, "nats": W, "kubernetes_asyncio": W}),
        (0, "debug", {"": D, "hub": N, "nats": W, "aiohttp.access": W}),
        (
            1,
            "info",
            {"": INFO, "hub": D, "agent": D, "common": D, "nats": W, "asyncio": N, "aiohttp.access": W},
        ),
        (1, "error", {"": logging.ERROR, "hub": D, "common": D}),
        (2, "info", {"": D, "hub": D, "nats": D, "aiohttp": D, "aiohttp.access": D, "asyncio": D}),
        (3, "warning", {"": D, "hub": D, "nats": D}),
    ],
    ids=["default", "KB_LOG_LEVEL-warning", "KB_LOG_LEVEL-debug", "-v", "-v-wins-over-error", "-vv", "-vvv"],
)
def test_levels(verbosity: int, level: str, expected: dict[str, int]) -> None:
    chosen = logs.levels(verbosity=verbosity, level=level)
    assert {k: chosen[k] for k in expected} == expected
    # Whatever is asked: kubernetes_asyncio logs response bodies (Secrets) at debug.
    assert chosen["kubernetes_asyncio"] >= logging.INFO


def test_an_unknown_level_names_the_variable() -> None:
    with pytest.raises(ValueError, match="KB_LOG_LEVEL: unknown level 'loud'"):
        logs.levels(verbosity=0, level="loud")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    names = ["", *logs.OURS, *logs.CHATTY, "aiohttp.access", logs.NEVER_BELOW_INFO]
    before = {n: logging.getLogger(n or None).level for n in names}
    handlers = logging.getLogger().handlers[:]
    yield
    for n, level in before.items():
        logging.getLogger(n or None).setLevel(level)
    logging.getLogger().handlers[:] = handlers


@pytest.mark.usefixtures("restore_logging")
def test_at_vv_kubernetes_asyncio_debug_never_reaches_the_handler(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(level="debug", log_format="text", verbosity=2)
    logging.getLogger("kubernetes_asyncio.client.rest").debug(
        "response body: {'data': {'token': 'c2VjcmV0'}}"
    )
    logging.getLogger("nats.aio.client").debug("nats debug line")
    logging.getLogger("hub.controllers.rkcp").debug("ours", extra=logs.about(name="cp-1"))
    err = capsys.readouterr().err
    assert "c2VjcmV0" not in err and "response body" not in err
    assert "nats debug line" in err and "ours  name=cp-1" in err


@pytest.mark.usefixtures("restore_logging")
def test_configure_writes_the_chosen_format(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(log_format="json")
    logging.getLogger("agent.apply").info("applied", extra=logs.about(namespace="t", name="cp-1", seq=5))
    logs.configure(log_format="text", verbosity=1)
    logging.getLogger("agent.apply").debug("applied", extra=logs.about(namespace="t", name="cp-1", seq=5))
    first, second = capsys.readouterr().err.splitlines()
    assert json.loads(first)["seq"] == 5 and json.loads(first)["name"] == "cp-1"
    assert second.endswith(" debug agent.apply  applied  namespace=t name=cp-1 seq=5")


def test_every_package_of_ours_is_ours() -> None:
    """``-v`` reaches every product package's loggers, a new package's too."""
    assert sorted(logs.OURS) == sorted(helpers.PACKAGES)
