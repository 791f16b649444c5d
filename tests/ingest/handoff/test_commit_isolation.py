"""A group commit that the store refuses for good is split down to the request, and
the span, that caused it: every other client's request in that commit is stored and
answered success, the refused span is quarantined with the store's message, and
nothing is retried in a loop. Through the real receiver and store; the refusal is a
real ClickHouse-style permanent error injected past validation (FaultyStore.refuse),
or one the store really raises."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from ingest.handoff.embedded import EmbeddedHandoff
from tests.conftest import RunningReceiver
from tests.e2e.kafka.helpers import wait_until
from tests.ingest.helpers import grpc_export, http_export, http_status
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans
from tests.values import arrived_quarantined, quarantine_by_reason, send, stored_once

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

REFUSED = "store refused: Code: 53. DB::Exception: Cannot convert 'evt_poison'"


def _payload(stream: str, spans: int = 3, seed: int = 1, **first: Any) -> bytes:
    items: list[Evaluation | Sentinel] = [Evaluation(stream, 0, **first)]
    items += [Evaluation(stream, seq) for seq in range(1, spans - 1)] + [
        Sentinel(stream, spans - 1)
    ]
    return export_request(record_spans(items, seed=seed)).SerializeToString()


def _in_one_commit(
    receiver: RunningReceiver, sends: list[Callable[[], Any]], sizes: int
) -> list[Any]:
    """Run `sends` so that they all wait for, and share, one group commit: a first
    commit is held in the store until every request is queued behind it."""
    handoff = receiver.service.handoff
    assert isinstance(handoff, EmbeddedHandoff)
    plug = _payload("plug", seed=99)
    receiver.faulty.hold()
    with concurrent.futures.ThreadPoolExecutor(len(sends) + 1) as pool:
        first = pool.submit(grpc_export, receiver.grpc_endpoint, plug)
        assert receiver.faulty.held.wait(20)
        pending = [pool.submit(send) for send in sends]
        wait_until(lambda: handoff.inflight_bytes == len(plug) + sizes, what="all queued")
        receiver.faulty.release()
        assert first.result(60).code is grpc.StatusCode.OK
        return [f.result(60) for f in pending]


def test_one_refused_span_fails_nobody_else_in_its_commit(receiver: RunningReceiver) -> None:
    payloads = [_payload(f"client-{n}", seed=n) for n in range(59)]
    poisoned = _payload("poisoned", spans=5, seed=77, event_id="evt_poison")
    payloads.insert(30, poisoned)
    receiver.faulty.refuse("evt_poison")
    sends = [lambda p=p: grpc_export(receiver.grpc_endpoint, p) for p in payloads]
    replies = _in_one_commit(receiver, sends, sum(len(p) for p in payloads))

    assert [(r.code, r.details) for r in replies if r.code is not grpc.StatusCode.OK] == []
    answers = [r.response() for r in replies]
    poisoned_answer = answers.pop(30)
    assert all(not a.HasField("partial_success") for a in answers)
    assert poisoned_answer.partial_success.rejected_spans == 1
    assert REFUSED in poisoned_answer.partial_success.error_message

    streams = [f"client-{n}" for n in range(59)]
    assert stored_once(receiver.store, streams) == dict.fromkeys(streams, (2, 3))
    # The same request's other spans are stored; the refused one is quarantined with
    # the store's message, its ordinal marked as arrived.
    assert stored_once(receiver.store, ["poisoned"]) == {"poisoned": (3, 4)}
    (row,) = quarantine_by_reason(receiver.store, REFUSED)
    assert (row["emission_stream"], row["emission_seq"]) == ("poisoned", 0)
    assert '"event_id":"evt_poison"' in row["attributes"]
    assert arrived_quarantined(receiver.store, "poisoned") == {0}

    # Bisection, not a retry loop: a few refused inserts, then never again.
    attempts = receiver.faulty.refusals
    assert 2 <= attempts <= 20
    assert grpc_export(receiver.grpc_endpoint, _payload("later", seed=5)).code is grpc.StatusCode.OK
    assert receiver.faulty.refusals == attempts


def test_a_request_the_store_refuses_entirely_is_a_bad_request(receiver: RunningReceiver) -> None:
    doomed = [_payload("doomed", seed=3, dims=[Dim("doomed-dimension", passed=True)])]
    fine = _payload("fine", seed=4)
    receiver.faulty.refuse("doomed")  # the stream: every row of every span holds it
    sends = [
        lambda: http_export(receiver.http_endpoint, doomed[0]),
        lambda: grpc_export(receiver.grpc_endpoint, fine),
    ]
    refused, accepted = _in_one_commit(receiver, sends, len(doomed[0]) + len(fine))

    assert refused.status_code == 400
    assert "Retry-After" not in refused.headers
    message = http_status(refused).message
    assert message.startswith("the store refused the request: Code: 53.")
    assert accepted.code is grpc.StatusCode.OK
    assert stored_once(receiver.store, ["fine", "doomed"]) == {
        "fine": (2, 3),
        "doomed": (0, 0),
    }


def test_a_request_none_of_whose_spans_the_store_takes_is_refused_with_quarantine_rows(
    receiver: RunningReceiver,
) -> None:
    receiver.faulty.refuse("evt_every_0", "evt_every_1")
    status, message = send("grpc", receiver.grpc_endpoint, _request_of("every"))
    assert status == "INVALID_ARGUMENT"
    assert message.startswith("the store refused every span of the request: Code: 53.")
    rows = quarantine_by_reason(receiver.store, "store refused: Code: 53.")
    assert sorted(r["emission_seq"] for r in rows) == [0, 1]


def _request_of(stream: str) -> Any:
    return export_request(record_spans([Evaluation(stream, 0), Evaluation(stream, 1)], seed=6))


def test_a_commit_the_store_cannot_take_as_one_block_is_split_and_stored(
    receiver: RunningReceiver,
) -> None:
    """The store's own permanent error: more partitions (months) in one insert block
    than it allows. Each request alone fits, so the split stores both."""

    def months(stream: str, first_year: int) -> bytes:
        items = [
            Evaluation(stream, m, extra={"holonograph.timestamp": _month(first_year, m)})
            for m in range(60)
        ]
        return export_request(record_spans(items, seed=first_year)).SerializeToString()

    payloads = [months("early", 2000), months("late", 2010)]
    sends = [lambda p=p: grpc_export(receiver.grpc_endpoint, p) for p in payloads]
    replies = _in_one_commit(receiver, sends, sum(len(p) for p in payloads))
    assert [r.code for r in replies] == [grpc.StatusCode.OK] * 2
    assert all(not r.response().HasField("partial_success") for r in replies)
    assert stored_once(receiver.store, ["early", "late"]) == {
        "early": (60, 60),
        "late": (60, 60),
    }


def _month(first_year: int, index: int) -> str:
    return f"{first_year + index // 12}-{index % 12 + 1:02d}-15T12:00:00Z"
