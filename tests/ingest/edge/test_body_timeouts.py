"""The edge's body timeout (`Edge.read`): one timer for every read in progress, which
ends a read past its deadline with `ReadTimeout` and leaves every other read, and any
other cancellation, as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ingest.edge.admission import Admission, ReadGate
from ingest.edge.steps import Edge
from ingest.errors import ReadTimeout


def _edge(timeout: float) -> Edge:
    unused: Any = None  # `read` needs the admission and the read gate only
    return Edge(
        exporter=unused,
        authenticator=unused,
        reads=ReadGate(max_reads=64, max_wait_seconds=5.0),
        admission=Admission(max_bytes=1 << 20),
        limiter=unused,
        max_request_bytes=1 << 20,
        body_timeout_seconds=timeout,
    )


def _arriving(after: float, body: bytes) -> Any:
    async def receive() -> bytes:
        await asyncio.sleep(after)
        return body

    return receive


async def test_a_body_past_its_timeout_is_a_read_timeout_and_the_others_arrive() -> None:
    edge = _edge(0.2)
    slow = asyncio.create_task(edge.read(_arriving(30, b"never"), "a"))
    quick = [asyncio.create_task(edge.read(_arriving(0.05 * n, b"%d" % n), "b")) for n in range(3)]
    assert await asyncio.gather(*quick) == [b"0", b"1", b"2"]
    with pytest.raises(ReadTimeout, match=r"did not arrive within 0\.2s"):
        await slow
    assert edge.reads.reading == 0  # every turn given back
    # The timer serves the reads after the timeout too.
    assert await edge.read(_arriving(0, b"after"), "a") == b"after"
    with pytest.raises(ReadTimeout):
        await edge.read(_arriving(30, b"never"), "a")


async def test_reads_started_later_time_out_in_their_own_turn() -> None:
    edge = _edge(0.3)
    first = asyncio.create_task(edge.read(_arriving(30, b"never"), "a"))
    await asyncio.sleep(0.2)
    second = asyncio.create_task(edge.read(_arriving(30, b"never"), "a"))
    with pytest.raises(ReadTimeout):
        await first
    assert not second.done()  # its deadline is 0.2 s after the first's
    with pytest.raises(ReadTimeout):
        await second


async def test_a_read_cancelled_otherwise_stays_cancelled() -> None:
    edge = _edge(30)
    read = asyncio.create_task(edge.read(_arriving(30, b"never"), "a"))
    await asyncio.sleep(0.01)
    read.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await read
    assert edge.reads.reading == 0
    assert await edge.read(_arriving(0, b"next"), "a") == b"next"
