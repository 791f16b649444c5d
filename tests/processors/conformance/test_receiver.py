"""Conformance end to end: events sent with the official OpenTelemetry exporters through
the real receiver, then checked in the store; each verdict state, guards, precedence."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from processors.conformance.approve import approve
from processors.conformance.check import check_fixture, check_surface
from schemas.conformance import VERDICT_ORDER, ApprovalRequest, Fixture
from tests.conftest import RunningReceiver
from tests.otel_emit import BASE_NS, Dim, Evaluation, export_grpc, export_http, record_spans
from tests.processors.conformance.support import DIM_STATES, JUDGE_STATES, guide_verdict

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]
SURFACE = "classify-intent"
SINCE = dt.datetime.fromtimestamp(BASE_NS / 1e9, dt.UTC) - dt.timedelta(minutes=1)
UNTIL = SINCE + dt.timedelta(hours=1)


def evaluation(seq: int, markers: dict[str, Any], dims: list[Dim] | None = None,
               **extra: Any) -> Evaluation:  # fmt: skip
    attrs = {f"holonograph.marker.{k}": v for k, v in markers.items()}
    attrs.update(extra)
    return Evaluation(
        stream="conformance-e2e", seq=seq, surface=SURFACE, event_id=f"evt_{seq:02d}",
        dims=dims or [], extra=attrs,
    )  # fmt: skip


EVENTS = [
    # (markers, dims, extra) -> expected verdict of the refund fixture / the polite fixture
    evaluation(0, {"user_message": "I want a refund", "tool_invocations": ["refund_lookup"],
                   "response_text": "You are owed $40."},
               [Dim("judge:polite-01", passed=True, judge="tone-judge")],
               **{"holonograph.latency_ms": 900.0}),
    evaluation(1, {"user_message": "Refund now!", "tool_invocations": ["search"],
                   "response_text": "Sure, $25 back."}),
    evaluation(2, {"user_message": "where is my parcel", "tool_invocations": ["track"],
                   "response_text": "It ships today."},
               [Dim("judge:polite-01", passed=False, judge="tone-judge")]),
    evaluation(3, {"user_message": "refund?", "response_text": "Let me check."}),
    evaluation(4, {"response_text": "Hello"}, [Dim("judge:polite-01", score=0.4)]),
    # an empty array on the wire: the client recorded that no tool ran
    evaluation(5, {"user_message": "refund please", "tool_invocations": []}),
]  # fmt: skip


def refund_fixture() -> Fixture:
    return Fixture.model_validate(
        {
            "fixtureId": "refund-requires-lookup",
            "ruleId": "billing-triage-refund-flow-01",
            "description": "If the user asks for a refund, refund_lookup must be invoked.",
            "enforceability": "trace-enforceable",
            "appliesTo": {"surfaceId": SURFACE},
            "when": [{"kind": "marker-contains", "column": "user_message", "value": "refund"}],
            "assertion": {"kind": "tool-invoked", "tool": "refund_lookup"},
        }
    )


def polite_fixture() -> Fixture:
    return Fixture.model_validate(
        {
            "fixtureId": "be-polite",
            "ruleId": "polite-01",
            "description": "Be polite.",
            "enforceability": "judge-required",
            "appliesTo": {"surfaceId": SURFACE},
            "assertions": [
                {"kind": "judge", "criterion": "Be polite."},
                {"kind": "latency-at-most", "maxMs": 1000},
            ],
        }
    )


@pytest.fixture
def ingested(receiver: RunningReceiver) -> RunningReceiver:
    spans = record_spans(EVENTS)
    assert export_grpc(receiver.grpc_endpoint, spans[:3]) is SpanExportResult.SUCCESS
    assert export_http(receiver.http_endpoint, spans[3:]) is SpanExportResult.SUCCESS
    count = receiver.store.query(
        "SELECT count() FROM holonograph.evaluation_events FINAL WHERE surface_id = {s:String}",
        {"s": SURFACE},
    ).scalar()
    assert count == len(EVENTS)
    return receiver


def verdicts(receiver: RunningReceiver, fixture: Fixture) -> dict[str, str]:
    result = check_fixture(receiver.store, fixture, since=SINCE, until=UNTIL, persist=False)
    return {e.event_id: e.verdict for e in result.events}


def test_refund_fixture_over_ingested_events(ingested: RunningReceiver) -> None:
    assert verdicts(ingested, refund_fixture()) == {
        "evt_00": "pass",
        "evt_01": "fail",
        "evt_02": "not-applicable",  # the when guard filtered it out
        "evt_03": "unevaluable",  # asked for a refund, no tool_invocations marker recorded
        "evt_04": "unevaluable",  # no user_message marker: the guard cannot be decided
        "evt_05": "fail",  # tool_invocations recorded as empty: known, not missing
    }


def test_judge_and_precedence_over_ingested_events(ingested: RunningReceiver) -> None:
    # [judge, latency]: evt_00 judge pass + latency pass; evt_01 judge pending + latency
    # missing -> requires-judge beats unevaluable; evt_02 judge failed -> fail; evt_04
    # has a score but no minScore -> still requires-judge.
    assert verdicts(ingested, polite_fixture()) == {
        "evt_00": "pass",
        "evt_01": "requires-judge",
        "evt_02": "fail",
        "evt_03": "requires-judge",
        "evt_04": "requires-judge",
        "evt_05": "requires-judge",
    }


def test_nightly_check_persists_verdicts(ingested: RunningReceiver) -> None:
    store = ingested.store
    for fx in (refund_fixture(), polite_fixture()):
        approve(store, ApprovalRequest(approver_id="brian", source_surface_id=SURFACE, fixture=fx))
    results = check_surface(store, SURFACE, since=SINCE, until=UNTIL)
    by_fixture = {r.fixture.fixture_id: r for r in results}
    refund = by_fixture["refund-requires-lookup"]
    assert refund.verdict == "fail"
    assert refund.counts == {"fail": 2, "pass": 1, "requires-judge": 0, "unevaluable": 2,
                             "not-applicable": 1}  # fmt: skip
    assert refund.evaluable_share == 3 / 5
    rows = store.query(
        "SELECT fixture_id, verdict, count_pass, count_fail, count_requires_judge"
        " FROM holonograph.conformance_results FINAL ORDER BY fixture_id"
    ).rows
    assert rows == [("be-polite", "fail", 1, 1, 4), ("refund-requires-lookup", "fail", 1, 2, 0)]


def test_precedence_table_exhaustive_through_the_receiver(receiver: RunningReceiver) -> None:
    """All 3^5 combinations of guard and assertion slot states, sent as real spans whose
    `holonograph.dimension` events drive each slot's verdict."""
    slots = [("g1", DIM_STATES), ("gj", JUDGE_STATES), ("a1", DIM_STATES),
             ("a2", DIM_STATES), ("aj", JUDGE_STATES)]  # fmt: skip
    evaluations, expected = [], {}
    for n, combo in enumerate(itertools.product(*(states for _, states in slots))):
        dims = [
            Dim(dim, passed=states[state][0])
            for (dim, states), state in zip(slots, combo, strict=True)
            if states[state] is not None
        ]
        event_id = f"evt_p{n:03d}"
        evaluations.append(Evaluation(stream="precedence", seq=n, surface="precedence-surface",
                                      event_id=event_id, dims=dims))  # fmt: skip
        expected[event_id] = guide_verdict(combo[:2], combo[2:])
    spans = record_spans(evaluations)
    assert export_grpc(receiver.grpc_endpoint, spans[:120]) is SpanExportResult.SUCCESS
    assert export_http(receiver.http_endpoint, spans[120:]) is SpanExportResult.SUCCESS
    fixture = Fixture.model_validate(
        {
            "fixtureId": "precedence",
            "ruleId": "precedence-01",
            "description": "every slot of the precedence table",
            "enforceability": "judge-required",
            "appliesTo": {"surfaceId": "precedence-surface"},
            "when": [{"kind": "dimension-passed", "dimension": "g1"},
                     {"kind": "judge", "criterion": "guard", "dimension": "gj"}],
            "assertions": [{"kind": "dimension-passed", "dimension": "a1"},
                           {"kind": "dimension-passed", "dimension": "a2"},
                           {"kind": "judge", "criterion": "graded", "dimension": "aj"}],
        }
    )  # fmt: skip
    result = check_fixture(
        receiver.store, fixture, since=SINCE, until=UNTIL, page_size=1000, persist=False
    )
    assert {e.event_id: e.verdict for e in result.events} == expected
    assert {v: result.counts[v] for v in VERDICT_ORDER} == {
        v: list(expected.values()).count(v) for v in VERDICT_ORDER
    }
