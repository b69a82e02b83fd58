"""Structured logs: one line per record, JSON (the default) or text (logfmt fields), and the levels.

A line about an object carries it as fields (``namespace``, ``name``, ``kind``, ``site``, ``seq``),
given with ``extra=logs.about(...)``, beside a message that stays readable on its own. The fields
travel under one attribute of the record (``FIELDS``) that the formatters expand: ``name`` is
also an attribute of every ``logging.LogRecord`` (the logger's name, printed as ``logger``), and
``logging`` refuses an ``extra`` that would overwrite it.

Log records carry coordinates, subjects and reasons; callers never pass secret material.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

from protocol import errors, subjects, text
from protocol.coordinates import Coordinates

Format = Literal["json", "text"]

FIELDS = "kb_fields"
"""The record attribute that holds ``about``'s fields."""

OURS = ("agent", "common", "fleet", "hub", "kamaji_broker", "protocol", "sandbox")
"""Our packages' loggers: ``-v`` makes them log at debug."""
CHATTY = ("aiohttp", "asyncio", "nats")
"""Libraries whose debug lines only ``-vv`` shows."""
NEVER_BELOW_INFO = "kubernetes_asyncio"
"""Logs whole response bodies (Secrets included) at debug: never below info, whatever is asked."""

TCP_KIND = "TenantControlPlane"
SITE_KIND = "Site"

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", FIELDS}
_LEVELS = ("debug", "info", "warning", "error", "critical")


def about(
    *,
    namespace: str | None = None,
    name: str | None = None,
    kind: str | None = None,
    site: str | None = None,
    seq: int | None = None,
) -> dict[str, Any]:
    """The ``extra`` of a log call about an object: the fields given, empty ones dropped.

    ``kind`` where more than one kind could be meant (a Secret beside its RKCP); ``seq`` is the
    intent stream's sequence (or the stream sequence of the message the line is about)."""
    given = {"kind": kind, "namespace": namespace, "name": name, "site": site, "seq": seq}
    return {FIELDS: {k: v for k, v in given.items() if v is not None and v != ""}}


def about_tcp(coords: Coordinates, *, seq: int | None = None) -> dict[str, Any]:
    """``about`` a TenantControlPlane at its site, by its coordinates (in the hub, where the RKCP
    that maps to them is not at hand: its namespace and name may differ from the TCP's)."""
    return about(kind=TCP_KIND, namespace=coords.namespace, name=coords.name, site=coords.site, seq=seq)


def about_subject(subject: str, *, prefix: str | None = None, seq: int | None = None) -> dict[str, Any]:
    """``about_tcp`` the control plane a message's subject names; only ``seq`` when it names none
    (a subject that does not parse: the line names the subject in its message). Without
    ``prefix`` (where it is not at hand), the first that leaves a subject that parses."""
    tokens = subject.split(".")
    for candidate in (
        [prefix] if prefix is not None else [".".join(tokens[:i]) for i in range(1, len(tokens))]
    ):
        try:
            parsed = subjects.parse(subject, prefix=candidate)
            break
        except errors.SubjectError:
            continue
    else:
        return about(seq=seq)
    if not parsed.name:  # a site's own subject (its heartbeat)
        return about(site=parsed.site, seq=seq)
    return about_tcp(Coordinates(parsed.site, parsed.namespace, parsed.name), seq=seq)


def about_site(site: str) -> dict[str, Any]:
    """``about`` a Site object (cluster-scoped, named as its site)."""
    return about(kind=SITE_KIND, name=site, site=site)


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """``about``'s fields of a record, then any other ``extra`` it was given."""
    found = dict(getattr(record, FIELDS, None) or {})
    found.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and k not in found})
    return found


def _time(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", <fields>..., "exception"}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({k: v for k, v in fields(record).items() if k not in doc})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def logfmt_value(value: Any) -> str:
    """A field's value as logfmt writes it: bare, or quoted (JSON escapes) when it is empty or
    holds a space, a quote, an ``=``, a backslash or a control character."""
    text = "true" if value is True else "false" if value is False else str(value)
    if text and not any(c in ' "=\\' or not c.isprintable() for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``<time> <level> <logger>  <message>  key=value ...``; a traceback follows on its lines.

    The message's non-printable characters are escaped (``protocol.text.escaped``): it may quote
    what a peer sent, and a newline or an escape sequence in it would forge a line or run on the
    terminal that shows the log."""

    def format(self, record: logging.LogRecord) -> str:
        message = text.escaped(record.getMessage())
        line = f"{_time(record)} {record.levelname.lower():<5} {record.name}  {message}"
        pairs = " ".join(f"{k}={logfmt_value(v)}" for k, v in fields(record).items())
        if pairs:
            line += "  " + pairs
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def levels(*, verbosity: int, level: str = "info") -> dict[str, int]:
    """Logger name (``""``: the root) → level. ``level`` (``KB_LOG_LEVEL``) sets the root; ``-v``
    (``verbosity`` 1) puts our loggers at debug whatever it says, ``-vv`` (2) every logger but
    kubernetes_asyncio's, which stays at info or above."""
    if level.lower() not in _LEVELS:
        raise ValueError(f"KB_LOG_LEVEL: unknown level {level!r}; one of {', '.join(_LEVELS)}")
    root = logging.DEBUG if verbosity >= 2 else logging.getLevelNamesMapping()[level.upper()]
    chosen = {"": root}
    chosen.update(dict.fromkeys(OURS, logging.DEBUG if verbosity >= 1 else logging.NOTSET))
    chosen.update(dict.fromkeys(CHATTY, logging.DEBUG if verbosity >= 2 else logging.NOTSET))
    # nats-py and aiohttp are chatty at info about things we log ourselves.
    quiet = logging.DEBUG if verbosity >= 2 else logging.WARNING
    chosen.update({"nats": quiet, "aiohttp.access": quiet})
    chosen[NEVER_BELOW_INFO] = max(logging.INFO, root)
    return chosen


class _DropSslEofNotice(logging.Filter):
    """asyncio warns "returning true from eof_received() has no effect when using ssl" each time
    a TLS peer closes a stream connection (asyncio's own StreamReaderProtocol returns True; the
    SSL transport closes anyway). It is about asyncio's internals, not our connection: with NATS
    over TLS it would be a warning at every shutdown and reconnect."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received() has no effect when using ssl" not in record.getMessage()


def configure(*, level: str = "info", log_format: Format = "json", verbosity: int = 0) -> None:
    """Send every record to stderr in ``log_format``, at the ``levels`` chosen."""
    chosen = levels(verbosity=verbosity, level=level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    for name, value in chosen.items():
        logging.getLogger(name or None).setLevel(value)
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropSslEofNotice) for f in asyncio_log.filters):
        asyncio_log.addFilter(_DropSslEofNotice())
