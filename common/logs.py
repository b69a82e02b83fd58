"""Structured logs: one JSON object per line (time, level, logger, message, extra fields).

Log records carry coordinates, subjects and reasons; callers never pass secret material.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class _DropSslEofNotice(logging.Filter):
    """asyncio warns "returning true from eof_received() has no effect when using ssl" each time
    a TLS peer closes a stream connection (asyncio's own StreamReaderProtocol returns True; the
    SSL transport closes anyway). It is about asyncio's internals, not our connection: with NATS
    over TLS it would be a warning at every shutdown and reconnect."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received() has no effect when using ssl" not in record.getMessage()


def configure(*, level: str = "info", json_format: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # nats-py and aiohttp are chatty at INFO about things we log ourselves.
    logging.getLogger("nats").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropSslEofNotice) for f in asyncio_log.filters):
        asyncio_log.addFilter(_DropSslEofNotice())
    # kubernetes_asyncio logs whole response bodies (Secrets included) at DEBUG: never let it.
    logging.getLogger("kubernetes_asyncio").setLevel(logging.INFO)
