"""The approval gate: immutable versioned records, idempotent re-approval, rejection."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from processors.conformance.approve import (
    approve,
    history,
    list_fixtures,
    live_fixture,
    live_fixtures,
    reject,
)
from processors.conformance.check import check_stored, check_surface
from schemas.conformance import ApprovalRequest, Fixture, RejectionRequest
from schemas.store import Store
from tests.processors.conformance.support import T0, event, insert_events

pytestmark = pytest.mark.clickhouse
SURFACE = "classify-intent"


def refund_fixture(**changes: Any) -> Fixture:
    body: dict[str, Any] = {
        "fixtureId": "refund-requires-lookup",
        "ruleId": "billing-triage-refund-flow-01",
        "ruleSource": "Refund rules v3",
        "description": "If the user asks for a refund, refund_lookup must be invoked.",
        "enforceability": "trace-enforceable",
        "appliesTo": {"surfaceId": SURFACE},
        "when": [{"kind": "marker-contains", "column": "user_message", "value": "refund"}],
        "assertion": {"kind": "tool-invoked", "tool": "refund_lookup"},
    }
    body.update(changes)
    return Fixture.model_validate(body)


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 7, 1, 6, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(minutes=1)
        return self.now


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"apv_{next(counter):04d}"


def test_approve_versions_and_idempotence(store: Store) -> None:
    clock, new_id = Clock(), ids()
    request = ApprovalRequest(
        approver_id="brian", source_surface_id=SURFACE, fixture=refund_fixture()
    )
    first = approve(store, request, clock=clock, new_id=new_id)
    assert first.created and first.record.version == 1 and first.record.record_id == "apv_0001"
    again = approve(store, request, clock=clock, new_id=new_id)
    assert not again.created and again.record == first.record
    edited = refund_fixture(assertion={"kind": "tool-invoked", "tool": "refund_lookup_v2"})
    second = approve(
        store,
        ApprovalRequest(approver_id="ana", source_surface_id=SURFACE, fixture=edited),
        clock=clock,
        new_id=new_id,
    )
    assert second.created and second.record.version == 2
    records = history(store, "refund-requires-lookup")
    assert [(r.version, r.approver_id, r.action) for r in records] == [
        (1, "brian", "approved"),
        (2, "ana", "approved"),
    ]
    # version 1 is kept unchanged: immutable records
    assert records[0].fixture == refund_fixture()
    assert records[0].recorded_at == dt.datetime(2026, 7, 1, 6, 1, tzinfo=dt.UTC)
    live = live_fixture(store, "refund-requires-lookup")
    assert live is not None and live.version == 2 and live.fixture == edited
    assert [r.version for r in list_fixtures(store, all_versions=True)] == [1, 2]


def test_reject_needs_comment_and_retires(store: Store) -> None:
    with pytest.raises(ValidationError):
        RejectionRequest.model_validate(
            {
                "approverId": "brian",
                "sourceSurfaceId": SURFACE,
                "fixture": refund_fixture().to_json(),
            }
        )
    approve(
        store,
        ApprovalRequest(approver_id="brian", source_surface_id=SURFACE, fixture=refund_fixture()),
    )
    assert [r.fixture_id for r in live_fixtures(store, SURFACE)] == ["refund-requires-lookup"]
    outcome = reject(
        store,
        RejectionRequest(
            approver_id="ana", source_surface_id=SURFACE, fixture=refund_fixture(),
            comment="Lookup is optional for gift cards.",
        ),
    )  # fmt: skip
    assert outcome.created and outcome.record.version == 2
    assert outcome.record.comment == "Lookup is optional for gift cards."
    assert live_fixture(store, "refund-requires-lookup") is None
    assert live_fixtures(store, SURFACE) == []
    latest = list_fixtures(store, SURFACE)
    assert [(r.version, r.action) for r in latest] == [(2, "rejected")]


def test_only_approved_fixtures_run(store: Store) -> None:
    insert_events(
        store,
        [
            event("e1", {"user_message": ["refund"], "tool_invocations": ["refund_lookup"]}),
            event("e2", {"user_message": ["refund"], "tool_invocations": []}),
        ],
        surface_id=SURFACE,
    )
    window = {"since": T0, "until": T0 + dt.timedelta(days=1)}
    assert check_surface(store, SURFACE, **window) == []
    polite = Fixture.model_validate(
        {
            "fixtureId": "be-polite",
            "ruleId": "polite-01",
            "description": "Be polite.",
            "enforceability": "judge-required",
            "appliesTo": {"surfaceId": SURFACE},
            "assertion": {"kind": "judge", "criterion": "Be polite."},
        }
    )
    for fx in (refund_fixture(), polite):
        approve(store, ApprovalRequest(approver_id="brian", source_surface_id=SURFACE, fixture=fx))
    results = check_surface(store, SURFACE, **window)
    assert {r.fixture.fixture_id: r.verdict for r in results} == {
        "refund-requires-lookup": "fail",
        "be-polite": "requires-judge",
    }
    assert len({r.check_id for r in results}) == 1
    assert all(r.fixture_version == 1 for r in results)
    stored = check_stored(store, "be-polite", **window)
    assert stored.fixture_version == 1
    rows = store.query(
        "SELECT fixture_id, fixture_version, verdict FROM holonograph.conformance_results FINAL"
        " ORDER BY fixture_id, checked_at"
    ).rows
    assert [r[0] for r in rows] == ["be-polite", "be-polite", "refund-requires-lookup"]
