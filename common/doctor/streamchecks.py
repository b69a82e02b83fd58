"""Doctor checks of the JetStream topology the hub makes: streams and the agents' consumers.

``consumer`` and ``streams`` decide (pure) from what the seams read: ``consumer_state`` (a
CONSUMER.INFO, which an agent is granted for its own consumer) and ``missing_streams``
(STREAM.INFO, the hub's).
"""

from __future__ import annotations

from collections.abc import Sequence

from common import bus
from common.bus import errors
from common.doctor import results
from common.doctor.results import Result
from protocol import streams

CONSUMER = "consumer bound"
STREAMS = "streams exist"


def consumer(expected: streams.ConsumerDef, found: bus.ConsumerState | None, *, site: str) -> Result:
    name = f"{expected.stream}/{expected.durable_name}"
    if found is None:
        return results.failed(
            CONSUMER,
            f"{name} does not exist",
            f"the hub creates it as soon as Site {site} exists (or its --sites names {site}): create the "
            f"Site (`kamaji-broker site add {site}`) if it does not exist; if it does, is the hub running? "
            "see its log; check that hub and agent use the same --prefix",
        )
    if found.filter_subject != expected.filter_subject:
        return results.failed(
            CONSUMER,
            f"{name} filters {found.filter_subject or 'several subjects'!r}, not {expected.filter_subject!r}",
            f"delete the consumer (`nats consumer rm {expected.stream} {expected.durable_name}`); the hub "
            "creates it again at start",
        )
    return results.passed(CONSUMER, f"{name} filter {found.filter_subject}, {found.num_pending} pending")


def streams_result(wanted: Sequence[str], missing: Sequence[str]) -> Result:
    if not missing:
        return results.passed(STREAMS, ", ".join(wanted))
    return results.failed(
        STREAMS,
        "missing: " + ", ".join(missing),
        "the hub creates the intents stream at start and a site's stream as soon as it sees its Site "
        "(or --sites names it): is the hub running, with the same --prefix? see its log; check that "
        "JetStream is enabled in nats-server",
    )


async def consumer_state(conn: bus.Connection, expected: streams.ConsumerDef) -> bus.ConsumerState | None:
    try:
        return await bus.consumer_info(conn, expected.stream, expected.durable_name)
    except errors.NotFound:
        return None


async def missing_streams(conn: bus.Connection, names: Sequence[str]) -> list[str]:
    missing = []
    for name in names:
        try:
            await bus.stream_info(conn, name)
        except errors.NotFound:
            missing.append(name)
    return missing
