"""The conformance contract is strict: unknown fields, unbounded values, duplicate ids
and incoherent fixtures are rejected at load time."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.conformance import (
    VERDICT_ORDER,
    Fixture,
    FixtureSet,
    RecordedEvents,
    SurfaceInput,
    strongest,
)

GUIDE_FIXTURE: dict[str, Any] = {
    "fixtureId": "refund-requires-lookup",
    "ruleId": "billing-triage-refund-flow-01",
    "ruleSource": "Refund rules v3",
    "description": "If the user asks for a refund, refund_lookup must be invoked.",
    "enforceability": "trace-enforceable",
    "appliesTo": {"surfaceId": "classify-intent"},
    "when": [{"kind": "marker-contains", "value": "refund"}],
    "assertion": {"kind": "tool-invoked", "tool": "refund_lookup"},
}


def with_change(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GUIDE_FIXTURE)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def test_guide_fixture_parses_and_round_trips() -> None:
    fixture = Fixture.model_validate(GUIDE_FIXTURE)
    assert fixture.surface_id == "classify-intent"
    assert fixture.to_json() == GUIDE_FIXTURE
    assert Fixture.model_validate(fixture.to_json()) == fixture


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("owner",), "x", "Extra inputs are not permitted"),
        (("assertion", "regex"), ".*", "Extra inputs are not permitted"),
        (("appliesTo", "agentId"), "x", "Extra inputs are not permitted"),
        (("assertion", "kind"), "tool-called", "does not match any of the expected tags"),
        (("assertions",), [{"kind": "cohort-tag-present", "tag": "x"}], "exactly one of"),
        (("assertion",), ..., "exactly one of"),
        (("enforceability",), "not-enforceable", "cannot be a fixture"),
        (("enforceability",), "judge-required", "needs a `judge` assertion"),
        (("assertion",), {"kind": "judge", "criterion": "Be polite."}, "cannot contain a `judge`"),
        (("enforceability",), "mechanical", "enforceability"),
        (("description",), "d" * 2001, "at most 2000 characters"),
        (("when", 0, "value"), "v" * 201, "at most 200 characters"),
        (("when", 0, "value"), "", "at least 1 character"),
        (("fixtureId",), "has spaces", "should match pattern"),
        (("fixtureId",), "x" * 129, "should match pattern"),
        (("when",), [{"kind": "cohort-tag-present", "tag": "x"}] * 11, "at most 10 items"),
        (("when",), [], "at least 1 item"),
        (("assertion",), {"kind": "tool-not-invoked", "tool": "a", "before": "b"},
         "only applies to tool-invoked"),
        (("assertion",), {"kind": "tool-invoked", "tool": "a", "before": "a"}, "same tool"),
        (("assertion",), {"kind": "latency-at-most", "maxMs": -1}, "greater than or equal to 0"),
        (("assertion",), {"kind": "score-at-least", "dimension": "d", "min": float("nan")},
         "finite number"),
    ],
)  # fmt: skip
def test_fixture_rejections(path: tuple[Any, ...], value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Fixture.model_validate(with_change(path, value))


def test_assertions_list_bound() -> None:
    doc = with_change(("assertion",), ...)
    doc["assertions"] = [{"kind": "cohort-tag-present", "tag": "x"}] * 21
    with pytest.raises(ValidationError, match="at most 20 items"):
        Fixture.model_validate(doc)


def test_unique_ids() -> None:
    with pytest.raises(ValidationError, match="duplicate fixtureId: refund-requires-lookup"):
        FixtureSet.model_validate({"fixtures": [GUIDE_FIXTURE, GUIDE_FIXTURE]})
    with pytest.raises(ValidationError, match="duplicate tool name: t"):
        SurfaceInput.model_validate({"surfaceId": "s", "tools": [{"name": "t"}, {"name": "t"}],
                                     "rules": ["Be polite."]})  # fmt: skip
    with pytest.raises(ValidationError, match="duplicate ruleId: r"):
        SurfaceInput.model_validate(
            {
                "surfaceId": "s",
                "rules": [{"ruleId": "r", "text": "a"}, {"ruleId": "r", "text": "b"}],
            }
        )
    event = {"eventId": "e", "surfaceId": "s", "timestamp": "2026-07-01T00:00:00Z"}
    with pytest.raises(ValidationError, match="duplicate eventId: e"):
        RecordedEvents.model_validate(
            {"schema": "holonograph-recorded-events/v1", "events": [event, event]}
        )


def test_recorded_event_markers_accept_a_string() -> None:
    events = RecordedEvents.model_validate(
        {
            "schema": "holonograph-recorded-events/v1",
            "events": [{"eventId": "e", "surfaceId": "s", "timestamp": "2026-07-01T00:00:00Z",
                        "markers": {"user_message": "hi", "tool_invocations": []}}],
        }
    )  # fmt: skip
    assert events.events[0].markers == {"user_message": ["hi"], "tool_invocations": []}


def test_strongest_follows_the_guide_order() -> None:
    assert VERDICT_ORDER == ("fail", "pass", "requires-judge", "unevaluable", "not-applicable")
    assert strongest(["unevaluable", "pass", "requires-judge"]) == "pass"
    assert strongest(["not-applicable", "unevaluable"]) == "unevaluable"
    assert strongest([]) is None
