"""Admission on arrival: requests count against the budget at what they cost in memory
(bytes times the expansion of decoding), and are refused when the requests ahead of
them would keep them waiting past `max_queue_seconds` at the measured drain rate."""

from __future__ import annotations

import asyncio

import pytest

from ingest.edge.admission import JSON_EXPANSION, PROTOBUF_EXPANSION, Admission, ReadGate
from ingest.errors import Backpressure


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_requests_count_at_their_memory_cost() -> None:
    admission = Admission(max_bytes=int(100 * PROTOBUF_EXPANSION), retry_after_seconds=2.0)
    with admission.admit(60), admission.admit(40):
        assert admission.inflight_bytes == int(100 * PROTOBUF_EXPANSION)
        assert admission.inflight_wire_bytes == 100
        with pytest.raises(Backpressure, match="estimated") as refused, admission.admit(1):
            pass
        assert refused.value.retry_after == 2.0
    assert admission.inflight_bytes == 0
    assert admission.refused == 1


def test_json_costs_its_own_expansion() -> None:
    admission = Admission(max_bytes=10_000)
    with admission.admit(100, JSON_EXPANSION):
        assert admission.inflight_bytes == int(100 * JSON_EXPANSION)


def test_a_request_costing_more_than_the_budget_passes_alone() -> None:
    admission = Admission(max_bytes=10)
    with admission.admit(50):
        assert admission.inflight_bytes == int(50 * PROTOBUF_EXPANSION)
        with pytest.raises(Backpressure), admission.admit(1):
            pass


def test_budget_is_released_when_the_request_fails() -> None:
    idle: list[int] = []
    admission = Admission(max_bytes=1000, on_idle=lambda: idle.append(1))
    with pytest.raises(ValueError), admission.admit(8):
        raise ValueError("decode failed")
    assert admission.inflight_bytes == 0
    assert idle == [1]


def test_refuses_on_expected_queue_time_at_the_measured_drain_rate() -> None:
    clock = FakeClock()
    admission = Admission(max_bytes=1 << 40, max_queue_seconds=2.0, monotonic=clock)
    # Nothing measured yet: only memory counts.
    assert admission.drain_rate() is None
    # Drain 1,000 bytes per second for four seconds, one request at a time.
    for _ in range(4):
        with admission.admit(1000):
            clock.now += 1.0
    rate = admission.drain_rate()
    assert rate is not None and rate == pytest.approx(1000, rel=0.01)
    with admission.admit(1500):
        # 1,500 bytes ahead + 400 of its own = 1.9 s at 1,000 bytes/s: admitted.
        assert admission.expected_wait(400) == pytest.approx(1.9, rel=0.02)
        with admission.admit(400):
            # 1,900 ahead + 600 of its own = 2.5 s: refused, retry once the excess drained.
            with (
                pytest.raises(Backpressure, match=r"waiting about 2\.5s") as refused,
                admission.admit(600),
            ):
                pass
            assert refused.value.retry_after == pytest.approx(1.0)
            # Big excess: the retry delay says how long (capped).
            with pytest.raises(Backpressure) as later, admission.admit(9000):
                pass
            assert later.value.retry_after == pytest.approx(10.9 - 2.0, rel=0.02)
    assert admission.refused_for_queue == 2


def test_drain_rate_follows_recent_load_and_idle_time_does_not_count() -> None:
    clock = FakeClock()
    admission = Admission(max_bytes=1 << 40, monotonic=clock)
    for _ in range(10):
        with admission.admit(10_000):
            clock.now += 1.0
    fast = admission.drain_rate()
    clock.now += 3600  # an idle hour: neither busy time nor bytes accumulate
    assert admission.drain_rate() is None  # all decayed away: nothing to trust
    for _ in range(10):
        with admission.admit(1_000):
            clock.now += 1.0
    slow = admission.drain_rate()
    assert fast is not None and slow is not None
    assert fast == pytest.approx(10_000, rel=0.01)
    assert slow == pytest.approx(1_000, rel=0.01)


async def test_read_gate_bounds_concurrent_reads_and_refuses_after_waiting() -> None:
    gate = ReadGate(max_reads=2, max_wait_seconds=0.05, retry_after=3.0)
    release = asyncio.Event()
    entered = 0

    async def read() -> None:
        nonlocal entered
        async with gate.reading_turn():
            entered += 1
            await release.wait()

    readers = [asyncio.create_task(read()) for _ in range(2)]
    while entered < 2:
        await asyncio.sleep(0)
    with pytest.raises(Backpressure, match="2 requests are being received") as refused:
        async with gate.reading_turn():
            pass
    assert refused.value.retry_after == 3.0
    release.set()
    await asyncio.gather(*readers)
    async with gate.reading_turn():
        assert gate.reading == 1


async def test_a_principal_holds_only_its_share_and_freed_turns_go_to_the_fewest_held() -> None:
    gate = ReadGate(max_reads=4, max_wait_seconds=5, per_principal=2)
    release = {name: asyncio.Event() for name in ("slow", "other", "third")}
    order: list[str] = []

    async def read(who: str) -> None:
        async with gate.reading_turn(who):
            order.append(who)
            await release[who].wait()

    slow = [asyncio.create_task(read("slow")) for _ in range(4)]  # a slowloris of bodies
    while gate.reading < 2:
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert gate.held("slow") == 2 and gate.reading == 2  # two of its four wait
    # Another principal is not kept waiting: the other two turns are there for it.
    others = [asyncio.create_task(read("other")) for _ in range(2)]
    while gate.held("other") < 2:
        await asyncio.sleep(0)
    assert gate.reading == 4
    third = asyncio.create_task(read("third"))
    await asyncio.sleep(0)
    release["other"].set()  # two turns free: "third" takes one; "slow" is at its share
    await asyncio.gather(*others)
    while gate.held("third") < 1:
        await asyncio.sleep(0)
    assert gate.held("slow") == 2 and gate.reading == 3  # its waiting readers stay waiting
    release["third"].set()
    release["slow"].set()
    await asyncio.gather(third, *slow)
    assert gate.reading == 0 and order.count("slow") == 4


async def test_a_principal_at_its_share_is_refused_after_waiting_with_its_own_reason() -> None:
    gate = ReadGate(max_reads=4, max_wait_seconds=0.05, per_principal=1, retry_after=2.0)
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.reading_turn("a"):
            await release.wait()

    holder = asyncio.create_task(hold())
    while gate.reading < 1:
        await asyncio.sleep(0)
    with pytest.raises(Backpressure, match="1 of this client's requests") as refused:
        async with gate.reading_turn("a"):
            pass
    assert refused.value.retry_after == 2.0
    async with gate.reading_turn("b"):  # another principal: at once
        assert gate.reading == 2
    release.set()
    await holder
    assert gate.reading == 0 and gate.held("a") == 0


async def test_a_reader_cancelled_while_waiting_leaves_no_turn_taken() -> None:
    gate = ReadGate(max_reads=1, max_wait_seconds=5)
    release = asyncio.Event()

    async def hold(who: str) -> None:
        async with gate.reading_turn(who):
            await release.wait()

    first = asyncio.create_task(hold("a"))
    while gate.reading < 1:
        await asyncio.sleep(0)
    waiting = asyncio.create_task(hold("b"))
    await asyncio.sleep(0)
    waiting.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gate.reading == 0 and gate.held("b") == 0
    async with gate.reading_turn("c"):
        assert gate.reading == 1


def test_spans_add_their_cost_once_parsed_and_refuse_past_the_budget() -> None:
    admission = Admission(max_bytes=100_000)
    with admission.admit(1000) as first:
        first.spans(5, span_cost=1000)
        assert admission.inflight_bytes == int(1000 * PROTOBUF_EXPANSION) + 5000
        with admission.admit(1000) as second:
            with pytest.raises(Backpressure, match="this one's spans 200000 more"):
                second.spans(200, span_cost=1000)
            assert admission.inflight_bytes == 2 * int(1000 * PROTOBUF_EXPANSION) + 5000
    assert admission.inflight_bytes == 0
    # Alone, a request's spans are admitted whatever they cost (any request up to the
    # size and span limits can pass).
    with admission.admit(1000) as alone:
        alone.spans(500, span_cost=1000)
        assert admission.inflight_bytes == int(1000 * PROTOBUF_EXPANSION) + 500_000
    assert admission.inflight_bytes == 0


def test_the_drain_rate_counts_requests_shorter_than_its_update_step() -> None:
    clock = FakeClock()
    admission = Admission(max_bytes=1 << 40, monotonic=clock)
    # 4,000 requests of 1,000 bytes, 0.4 ms each, 0.1 ms apart: 2,000,000 bytes per busy
    # second (the updates come at most once a millisecond).
    for _ in range(4000):
        with admission.admit(1000):
            clock.now += 0.0004
        clock.now += 0.0001
    rate = admission.drain_rate()
    assert rate is not None and rate == pytest.approx(2_000_000, rel=0.3)
