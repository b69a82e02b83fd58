"""common.logs: asyncio's TLS close notice is dropped (it is not about us), other warnings stay."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from common import logs


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
