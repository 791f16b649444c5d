"""Snapshots, waits and topic reads shared by the Kafka tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer

from schemas import records
from schemas.store import Store

# Every column except the ones that say *when* a path handled a row.
SNAPSHOTS = {
    "evaluation_events": "SELECT * EXCEPT (ingested_at, ingest_version)"
    " FROM holonograph.evaluation_events FINAL ORDER BY event_id",
    "evaluation_dimensions": "SELECT * EXCEPT (ingested_at, ingest_version)"
    " FROM holonograph.evaluation_dimensions FINAL ORDER BY event_id, dimension_id",
    "emission_receipts": "SELECT * EXCEPT (receipt_id, received_at)"
    " FROM holonograph.emission_receipts FINAL ORDER BY emission_stream, emission_seq",
    "quarantine": "SELECT * EXCEPT (received_at) FROM holonograph.quarantine FINAL"
    " ORDER BY quarantine_id",
}


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {table: store.query(sql).rows for table, sql in SNAPSHOTS.items()}


def truncate(store: Store) -> None:
    for table in SNAPSHOTS:
        store.command(f"TRUNCATE TABLE holonograph.{table}")


def count(store: Store, table: str = "evaluation_events") -> int:
    return int(store.query(f"SELECT count() FROM holonograph.{table} FINAL").scalar())


def raw_count(store: Store, table: str = "evaluation_events") -> int:
    """Rows before deduplication (what a non-deduplicating pipeline would report)."""
    return int(store.query(f"SELECT count() FROM holonograph.{table}").scalar())


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll a condition on real state (never a fixed sleep standing in for one)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(0.02)


def accepted_ordinals(store: Store) -> set[tuple[str, int]]:
    rows = store.query(
        "SELECT emission_stream, emission_seq FROM holonograph.emission_records"
    ).rows
    return {(str(s), int(q)) for s, q in rows}


async def read_keyed(
    bootstrap: str, topic: str, expected: int, seconds: float = 30.0, then_ms: int = 0
) -> list[tuple[bytes | None, records.Record]]:
    """The topic's messages (key, decoded record) from its beginning, until `expected`
    came or `seconds` passed, then whatever else arrives within `then_ms` (to see that
    nothing more does). Reads under a deadline, not to the end offsets: the test
    broker's end offsets count batches, not messages."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    await consumer.start()
    found: list[tuple[bytes | None, records.Record]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while len(found) < expected and loop.time() < deadline:
            for messages in (await consumer.getmany(timeout_ms=200)).values():
                found += [(m.key, records.decode(m.value or b"")) for m in messages]
        if then_ms:
            for messages in (await consumer.getmany(timeout_ms=then_ms)).values():
                found += [(m.key, records.decode(m.value or b"")) for m in messages]
    finally:
        await consumer.stop()
    return found


async def read_records(
    bootstrap: str, topic: str, expected: int, seconds: float = 30.0, then_ms: int = 0
) -> list[records.Record]:
    """`read_keyed` without the keys."""
    return [r for _, r in await read_keyed(bootstrap, topic, expected, seconds, then_ms)]
