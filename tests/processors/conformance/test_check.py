"""Check over stored events: every assertion kind, the precedence table, `when` guards,
windows, paging and persisted results; the SQL and Python evaluators agree."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from processors.conformance.check import FixtureNotFound, check_fixture, check_stored
from processors.conformance.eval import EventView, evaluate_event
from schemas.conformance import VERDICT_ORDER, Fixture
from schemas.store import Store
from testkit.backends import migrated_store
from tests.processors.conformance.support import (
    DIM_STATES,
    JUDGE_STATES,
    T0,
    event,
    guide_verdict,
    insert_events,
)

pytestmark = pytest.mark.clickhouse
DAY = dt.timedelta(days=1)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with migrated_store(tmp_path_factory.mktemp("conformance-check")) as store:
        yield store


_surfaces = itertools.count()


def fresh_surface() -> str:
    return f"surface-{next(_surfaces)}"


def fixture(
    surface: str,
    assertions: list[dict[str, Any]],
    when: list[dict[str, Any]] | None = None,
    rule_id: str = "rule-1",
) -> Fixture:
    has_judge = any(a["kind"] == "judge" for a in assertions + (when or []))
    body: dict[str, Any] = {
        "fixtureId": "fx-1",
        "ruleId": rule_id,
        "description": "test fixture",
        "enforceability": "judge-required" if has_judge else "trace-enforceable",
        "appliesTo": {"surfaceId": surface},
        "assertions": assertions,
    }
    if when:
        body["when"] = when
    return Fixture.model_validate(body)


def run(store: Store, fx: Fixture, events: list[EventView], **options: Any) -> dict[str, str]:
    """Store events, check, and return {event_id: verdict}; also asserts Python agrees."""
    insert_events(store, events, surface_id=fx.surface_id)
    result = check_fixture(store, fx, since=T0, until=T0 + DAY, page_size=1000, **options)
    stored = {e.event_id: e.verdict for e in result.events}
    python = {
        e.event_id: evaluate_event(e, fx.when or [], fx.checks(), fx.rule_id).verdict
        for e in events
    }
    assert stored == python
    return stored


TOOLS = "tool_invocations"
KIND_CASES: list[tuple[str, dict[str, Any], EventView, str]] = [
    # marker-contains / marker-not-contains: case-insensitive unless asked otherwise
    ("mc-hit", {"kind": "marker-contains", "column": "user_message", "value": "refund"},
     event("e", {"user_message": ["I want a REFUND please"]}), "pass"),
    ("mc-miss", {"kind": "marker-contains", "column": "user_message", "value": "refund"},
     event("e", {"user_message": ["hello"]}), "fail"),
    ("mc-missing", {"kind": "marker-contains", "column": "user_message", "value": "refund"},
     event("e", {"response_text": ["refund"]}), "unevaluable"),
    ("mc-case", {"kind": "marker-contains", "column": "user_message", "value": "Refund",
                 "caseSensitive": True},
     event("e", {"user_message": ["refund"]}), "fail"),
    ("mc-any-column", {"kind": "marker-contains", "value": "refund_lookup"},
     event("e", {TOOLS: ["refund_lookup"], "user_message": ["hi"]}), "pass"),
    ("mc-any-no-markers", {"kind": "marker-contains", "value": "x"}, event("e", {}), "unevaluable"),
    ("mnc-pass", {"kind": "marker-not-contains", "column": "response_text", "value": "$"},
     event("e", {"response_text": ["no amounts here"]}), "pass"),
    ("mnc-fail", {"kind": "marker-not-contains", "column": "response_text", "value": "$"},
     event("e", {"response_text": ["you get $40"]}), "fail"),
    ("mnc-missing", {"kind": "marker-not-contains", "column": "response_text", "value": "$"},
     event("e", {"user_message": ["$"]}), "unevaluable"),
    ("mc-unicode", {"kind": "marker-contains", "column": "user_message", "value": "rückerstattung"},
     event("e", {"user_message": ["RÜCKERSTATTUNG bitte"]}), "pass"),
    # tool-invoked / tool-not-invoked, with ordering
    ("ti-pass", {"kind": "tool-invoked", "tool": "refund_lookup"},
     event("e", {TOOLS: ["search", "refund_lookup"]}), "pass"),
    ("ti-fail", {"kind": "tool-invoked", "tool": "refund_lookup"},
     event("e", {TOOLS: []}), "fail"),
    ("ti-exact", {"kind": "tool-invoked", "tool": "refund_lookup"},
     event("e", {TOOLS: ["refund_lookup_v2"]}), "fail"),
    ("ti-missing", {"kind": "tool-invoked", "tool": "refund_lookup"},
     event("e", {"user_message": ["x"]}), "unevaluable"),
    ("tni-pass", {"kind": "tool-not-invoked", "tool": "issue_refund"},
     event("e", {TOOLS: ["refund_lookup"]}), "pass"),
    ("tni-fail", {"kind": "tool-not-invoked", "tool": "issue_refund"},
     event("e", {TOOLS: ["issue_refund"]}), "fail"),
    ("tni-missing", {"kind": "tool-not-invoked", "tool": "issue_refund"},
     event("e"), "unevaluable"),
    ("before-ok", {"kind": "tool-invoked", "tool": "lookup", "before": "refund"},
     event("e", {TOOLS: ["lookup", "refund"]}), "pass"),
    ("before-wrong-order", {"kind": "tool-invoked", "tool": "lookup", "before": "refund"},
     event("e", {TOOLS: ["refund", "lookup"]}), "fail"),
    ("before-other-absent", {"kind": "tool-invoked", "tool": "lookup", "before": "refund"},
     event("e", {TOOLS: ["lookup"]}), "pass"),
    ("before-first-absent", {"kind": "tool-invoked", "tool": "lookup", "before": "refund"},
     event("e", {TOOLS: ["refund"]}), "fail"),
    # dimensions and scores
    ("dp-pass", {"kind": "dimension-passed", "dimension": "correctness"},
     event("e", dims={"correctness": (True, None)}), "pass"),
    ("dp-fail", {"kind": "dimension-passed", "dimension": "correctness"},
     event("e", dims={"correctness": (False, None)}), "fail"),
    ("dp-missing", {"kind": "dimension-passed", "dimension": "correctness"},
     event("e", dims={"tone": (True, None)}), "unevaluable"),
    ("dp-score-only", {"kind": "dimension-passed", "dimension": "correctness"},
     event("e", dims={"correctness": (None, 0.9)}), "unevaluable"),
    ("df-pass", {"kind": "dimension-failed", "dimension": "correctness"},
     event("e", dims={"correctness": (False, None)}), "pass"),
    ("df-fail", {"kind": "dimension-failed", "dimension": "correctness"},
     event("e", dims={"correctness": (True, None)}), "fail"),
    ("score-pass", {"kind": "score-at-least", "dimension": "tone", "min": 0.8},
     event("e", dims={"tone": (None, 0.8)}), "pass"),
    ("score-fail", {"kind": "score-at-least", "dimension": "tone", "min": 0.8},
     event("e", dims={"tone": (True, 0.79)}), "fail"),
    ("score-missing", {"kind": "score-at-least", "dimension": "tone", "min": 0.8},
     event("e", dims={"tone": (True, None)}), "unevaluable"),
    # cohort tags, latency, cost
    ("tag-pass", {"kind": "cohort-tag-present", "tag": "tier=gold"},
     event("e", tags=["tier=gold", "beta"]), "pass"),
    ("tag-fail", {"kind": "cohort-tag-present", "tag": "tier=gold"},
     event("e", tags=["tier=golden"]), "fail"),
    ("lat-pass", {"kind": "latency-at-most", "maxMs": 1200}, event("e", latency=1200.0), "pass"),
    ("lat-fail", {"kind": "latency-at-most", "maxMs": 1200}, event("e", latency=1200.5), "fail"),
    ("lat-missing", {"kind": "latency-at-most", "maxMs": 1200}, event("e"), "unevaluable"),
    ("cost-pass", {"kind": "cost-at-most", "maxUsd": 0.01}, event("e", cost=0.004), "pass"),
    ("cost-fail", {"kind": "cost-at-most", "maxUsd": 0.01}, event("e", cost=0.02), "fail"),
    ("cost-missing", {"kind": "cost-at-most", "maxUsd": 0.01}, event("e"), "unevaluable"),
    # judge: requires-judge until the rule's judge dimension is graded
    ("judge-none", {"kind": "judge", "criterion": "Be polite."}, event("e"), "requires-judge"),
    ("judge-pass", {"kind": "judge", "criterion": "Be polite."},
     event("e", dims={"judge:rule-1": (True, None, "gpt-judge")}), "pass"),
    ("judge-fail", {"kind": "judge", "criterion": "Be polite."},
     event("e", dims={"judge:rule-1": (False, None)}), "fail"),
    ("judge-other-rule", {"kind": "judge", "criterion": "Be polite."},
     event("e", dims={"judge:rule-2": (True, None)}), "requires-judge"),
    ("judge-ungraded", {"kind": "judge", "criterion": "Be polite."},
     event("e", dims={"judge:rule-1": (None, 0.9)}), "requires-judge"),
    ("judge-score", {"kind": "judge", "criterion": "Be polite.", "minScore": 0.7},
     event("e", dims={"judge:rule-1": (None, 0.9)}), "pass"),
    ("judge-score-low", {"kind": "judge", "criterion": "Be polite.", "minScore": 0.7},
     event("e", dims={"judge:rule-1": (None, 0.2)}), "fail"),
    ("judge-named-dim", {"kind": "judge", "criterion": "Be polite.", "dimension": "tone"},
     event("e", dims={"tone": (True, None)}), "pass"),
    ("judge-wrong-judge", {"kind": "judge", "criterion": "Be polite.", "judge": "gpt-judge"},
     event("e", dims={"judge:rule-1": (True, None, "other-judge")}), "requires-judge"),
    ("judge-right-judge", {"kind": "judge", "criterion": "Be polite.", "judge": "gpt-judge"},
     event("e", dims={"judge:rule-1": (False, None, "gpt-judge")}), "fail"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("assertion", "ev", "expected"),
    [case[1:] for case in KIND_CASES],
    ids=[case[0] for case in KIND_CASES],
)
def test_assertion_kind(
    shared_store: Store, assertion: dict[str, Any], ev: EventView, expected: str
) -> None:
    fx = fixture(fresh_surface(), [assertion])
    assert run(shared_store, fx, [ev]) == {"e": expected}


# --- precedence ------------------------------------------------------------------------
def test_precedence_table_exhaustive(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(
        surface,
        [
            {"kind": "dimension-passed", "dimension": "a1"},
            {"kind": "dimension-passed", "dimension": "a2"},
            {"kind": "judge", "criterion": "graded by a judge", "dimension": "aj"},
        ],
        when=[
            {"kind": "dimension-passed", "dimension": "g1"},
            {"kind": "judge", "criterion": "guard graded by a judge", "dimension": "gj"},
        ],
    )
    events, expected = [], {}
    slots = [("g1", DIM_STATES), ("gj", JUDGE_STATES), ("a1", DIM_STATES), ("a2", DIM_STATES),
             ("aj", JUDGE_STATES)]  # fmt: skip
    for n, combo in enumerate(itertools.product(*(states for _, states in slots))):
        dims = {}
        for (dim, states), state in zip(slots, combo, strict=True):
            if states[state] is not None:
                dims[dim] = states[state]
        event_id = f"p{n:03d}-" + "-".join(combo)
        events.append(event(event_id, {"user_message": ["x"]}, at=n % 1000, dims=dims))
        expected[event_id] = guide_verdict(combo[:2], combo[2:])
    assert len(events) == 3**5
    assert run(shared_store, fx, events) == expected
    # every verdict state is reached
    assert set(expected.values()) == set(VERDICT_ORDER)


@pytest.mark.parametrize(
    ("verdicts", "top"),
    [
        (["pass", "unevaluable", "unevaluable", "unevaluable"], "pass"),
        (["pass", "fail", "requires-judge"], "fail"),
        (["requires-judge", "unevaluable", "not-applicable"], "requires-judge"),
        (["unevaluable", "not-applicable"], "unevaluable"),
        (["not-applicable", "not-applicable"], "not-applicable"),
        ([], "unevaluable"),
    ],
)
def test_top_level_verdict_and_counts(shared_store: Store, verdicts: list[str], top: str) -> None:
    fx = fixture(
        fresh_surface(),
        [{"kind": "judge", "criterion": "c", "dimension": "aj"},
         {"kind": "dimension-passed", "dimension": "a1"}],
        when=[{"kind": "dimension-passed", "dimension": "g"}],
    )  # fmt: skip
    dims_for = {
        "pass": {"g": (True, None), "aj": (True, None), "a1": (True, None)},
        "fail": {"g": (True, None), "a1": (False, None)},
        "requires-judge": {"g": (True, None)},
        "unevaluable": {},
        "not-applicable": {"g": (False, None)},
    }
    events = [event(f"e{i}", dims=dims_for[v]) for i, v in enumerate(verdicts)]
    by_event = run(shared_store, fx, events)
    assert list(by_event.values()) == verdicts
    result = check_fixture(shared_store, fx, since=T0, until=T0 + DAY, persist=False)
    assert result.verdict == top
    for verdict in VERDICT_ORDER:
        assert result.counts[verdict] == verdicts.count(verdict)
    applicable = len([v for v in verdicts if v != "not-applicable"])
    evaluable = len([v for v in verdicts if v in ("pass", "fail")])
    assert result.events_checked == len(verdicts)
    assert result.evaluable_share == (evaluable / applicable if applicable else None)


# --- guards from the Guide ------------------------------------------------------------


def test_guide_refund_fixture_with_when_guard(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(
        surface,
        [{"kind": "tool-invoked", "tool": "refund_lookup"}],
        when=[{"kind": "marker-contains", "column": "user_message", "value": "refund"}],
    )
    verdicts = run(
        shared_store,
        fx,
        [
            event("asked-and-looked-up", {"user_message": ["Refund me"], TOOLS: ["refund_lookup"]}),
            event("asked-not-looked-up", {"user_message": ["a refund?"], TOOLS: ["search"]}),
            event("not-asked", {"user_message": ["where is my parcel"], TOOLS: []}),
            event("asked-no-tool-marker", {"user_message": ["refund now"]}),
            event("no-user-message", {TOOLS: ["refund_lookup"]}),
        ],
    )
    assert verdicts == {
        "asked-and-looked-up": "pass",
        "asked-not-looked-up": "fail",
        "not-asked": "not-applicable",
        "asked-no-tool-marker": "unevaluable",
        "no-user-message": "unevaluable",
    }


def test_guide_dollar_fixture_any_marker_guard(shared_store: Store) -> None:
    # The Guide's example leaves `column` out: the guard reads every marker.
    surface = fresh_surface()
    fx = fixture(
        surface,
        [{"kind": "marker-not-contains", "column": "response_text", "value": "$"}],
        when=[{"kind": "marker-not-contains", "value": "refund_lookup"}],
    )
    verdicts = run(
        shared_store,
        fx,
        [
            event("quoted-after-lookup", {"response_text": ["$40"], TOOLS: ["refund_lookup"]}),
            event("quoted-no-lookup", {"response_text": ["$40 back"], TOOLS: []}),
            event("no-quote", {"response_text": ["we will check"], TOOLS: []}),
            event("no-markers"),
        ],
    )
    assert verdicts == {
        "quoted-after-lookup": "not-applicable",
        "quoted-no-lookup": "fail",
        "no-quote": "pass",
        "no-markers": "unevaluable",
    }


# --- window, filters, paging, persistence ----------------------------------------------


def test_window_is_half_open_and_reported(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(surface, [{"kind": "cohort-tag-present", "tag": "x"}])
    insert_events(
        shared_store,
        [event("before", at=-1), event("at-start", at=0), event("inside", at=59),
         event("at-end", at=60)],
        surface_id=surface,
    )  # fmt: skip
    until = T0 + dt.timedelta(minutes=60)
    result = check_fixture(shared_store, fx, since=T0, until=until, persist=False)
    assert [e.event_id for e in result.events] == ["at-start", "inside"]
    assert (result.window.since, result.window.until) == (T0, until)
    defaulted = check_fixture(shared_store, fx, until=until, persist=False, clock=lambda: T0)
    assert defaulted.window.since == until - DAY
    with pytest.raises(ValueError, match="empty window"):
        check_fixture(shared_store, fx, since=until, until=T0, persist=False)


def test_run_mode_filter_and_surface_mismatch(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(surface, [{"kind": "cohort-tag-present", "tag": "x"}])
    insert_events(shared_store, [event("prod", tags=["x"])], surface_id=surface)
    insert_events(shared_store, [event("eval", at=5)], surface_id=surface, run_mode="eval")
    window = {"since": T0, "until": T0 + DAY, "persist": False}
    assert check_fixture(shared_store, fx, run_modes=["production"], **window).verdict == "pass"
    assert check_fixture(shared_store, fx, run_modes=["eval"], **window).verdict == "fail"
    assert check_fixture(shared_store, fx, **window).events_checked == 2
    with pytest.raises(ValueError, match="applies to"):
        check_fixture(shared_store, fx, surface_id="another-surface", **window)


def test_paging_and_verdict_filter(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(surface, [{"kind": "latency-at-most", "maxMs": 100}])
    events = [event(f"e{i:02d}", at=i, latency=float(50 if i % 3 else 500)) for i in range(25)]
    insert_events(shared_store, events, surface_id=surface)
    window = {"since": T0, "until": T0 + DAY, "persist": False}
    first = check_fixture(shared_store, fx, page_size=10, **window)
    second = check_fixture(shared_store, fx, page_offset=10, page_size=10, **window)
    last = check_fixture(shared_store, fx, page_offset=20, page_size=10, **window)
    ids = [e.event_id for r in (first, second, last) for e in r.events]
    assert ids == [e.event_id for e in events]
    assert first.counts["fail"] == 9 and first.counts["pass"] == 16
    fails = check_fixture(shared_store, fx, page_verdicts=["fail"], **window)
    assert [e.event_id for e in fails.events] == [f"e{i:02d}" for i in range(0, 25, 3)]
    assert list(first.failing_event_ids) == [f"e{i:02d}" for i in range(0, 25, 3)]
    with pytest.raises(ValueError, match="page size"):
        check_fixture(shared_store, fx, page_size=5000, **window)


def test_result_is_persisted(shared_store: Store) -> None:
    surface = fresh_surface()
    fx = fixture(surface, [{"kind": "latency-at-most", "maxMs": 100}])
    insert_events(
        shared_store, [event("ok", latency=5.0), event("slow", at=1, latency=500.0), event("n")],
        surface_id=surface,
    )  # fmt: skip
    checked_at = dt.datetime(2026, 7, 2, 6, 0, tzinfo=dt.UTC)
    result = check_fixture(
        shared_store, fx, since=T0, until=T0 + DAY, clock=lambda: checked_at, check_id="chk_test"
    )
    rows = shared_store.query(
        "SELECT * FROM holonograph.conformance_results FINAL WHERE check_id = 'chk_test'"
    ).dicts()
    assert len(rows) == 1
    row = rows[0]
    assert row["verdict"] == "fail" == result.verdict
    assert (row["count_pass"], row["count_fail"], row["count_unevaluable"]) == (1, 1, 1)
    assert row["events_checked"] == 3 and row["evaluable_share"] == pytest.approx(2 / 3)
    assert row["failing_event_ids"] == ["slow"]
    assert row["checked_at"] == checked_at.replace(tzinfo=None)
    assert row["window_start"] == T0.replace(tzinfo=None)
    assert row["fixture_version"] == 0 and row["surface_id"] == surface


def test_check_stored_needs_approval(shared_store: Store) -> None:
    with pytest.raises(FixtureNotFound):
        check_stored(shared_store, "never-approved", since=T0, until=T0 + DAY)


# --- the two evaluators agree ------------------------------------------------------------

NAMES = st.sampled_from(["user_message", "response_text", TOOLS])
WORDS = st.sampled_from(["refund", "Refund", "$", "lookup", "refund_lookup", "hi", "ß", "SS"])
ASSERTIONS = st.one_of(
    st.builds(
        lambda k, c, v, cs: {"kind": k, "column": c, "value": v, "caseSensitive": cs},
        st.sampled_from(["marker-contains", "marker-not-contains"]),
        st.one_of(st.none(), NAMES),
        WORDS,
        st.booleans(),
    ).map(lambda a: {k: v for k, v in a.items() if v is not None}),
    st.builds(
        lambda k, t: {"kind": k, "tool": t},
        st.sampled_from(["tool-invoked", "tool-not-invoked"]),
        st.sampled_from(["refund_lookup", "search"]),
    ),
    st.just({"kind": "tool-invoked", "tool": "search", "before": "refund_lookup"}),
    st.builds(
        lambda k, d: {"kind": k, "dimension": d},
        st.sampled_from(["dimension-passed", "dimension-failed"]),
        st.sampled_from(["d1", "d2"]),
    ),
    st.builds(
        lambda m: {"kind": "score-at-least", "dimension": "d1", "min": m},
        st.sampled_from([0.0, 0.5, 1.0]),
    ),
    st.builds(lambda m: {"kind": "latency-at-most", "maxMs": m}, st.sampled_from([0, 10, 100])),
    st.builds(lambda m: {"kind": "cost-at-most", "maxUsd": m}, st.sampled_from([0, 0.5])),
    st.builds(lambda t: {"kind": "cohort-tag-present", "tag": t}, st.sampled_from(["a", "b"])),
    st.builds(
        lambda m: {"kind": "judge", "criterion": "c", "dimension": "d2", "minScore": m},
        st.one_of(st.none(), st.just(0.5)),
    ).map(lambda a: {k: v for k, v in a.items() if v is not None}),
)
EVENTS = st.builds(
    lambda markers, tags, latency, cost, dims: event(
        "x", markers, tags=tags, latency=latency, cost=cost, dims=dims
    ),
    st.dictionaries(NAMES, st.lists(WORDS, max_size=3), max_size=3),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
    st.one_of(st.none(), st.sampled_from([0.0, 10.0, 50.0])),
    st.one_of(st.none(), st.sampled_from([0.0, 0.5, 2.0])),
    st.dictionaries(
        st.sampled_from(["d1", "d2"]),
        st.tuples(st.one_of(st.none(), st.booleans()), st.one_of(st.none(), st.just(0.5))),
        max_size=2,
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    when=st.lists(ASSERTIONS, max_size=2),
    checks=st.lists(ASSERTIONS, min_size=1, max_size=3),
    events=st.lists(EVENTS, min_size=1, max_size=6),
)
def test_sql_and_python_agree(
    shared_store: Store,
    when: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    events: list[EventView],
) -> None:
    fx = fixture(fresh_surface(), checks, when=when or None)
    events = [
        EventView(f"h{i}", None, e.markers, e.cohort_tags, e.latency_ms, e.cost_usd, e.dimensions)
        for i, e in enumerate(events)
    ]
    run(shared_store, fx, events)  # asserts agreement


def test_every_derived_golden_fixture_runs_in_the_store(shared_store: Store) -> None:
    """Each candidate fixture of the derive corpus compiles to SQL and agrees with Python."""
    corpus = Path(__file__).parents[2] / "testdata" / "conformance" / "derive"
    events = [
        event("d1", {"user_message": ["a refund please"], "response_text": ["$40, guaranteed"],
                     TOOLS: ["refund_lookup", "issue_refund"]}, latency=900.0, cost=0.01,
              dims={"correctness": (False, 0.5)}),
        event("d2", {"user_message": ["hello"], "response_text": ["Hi"], TOOLS: []},
              tags=["vip", "lens=v2"], dims={"tone": (None, 0.9)}),
        event("d3", {"response_text": ["see https://x"]}, at=3),
    ]  # fmt: skip
    ran = 0
    for expected in sorted(corpus.glob("*/expected.json")):
        for candidate in json.loads(expected.read_text())["candidates"]:
            if candidate["fixture"] is None:
                continue
            fx = Fixture.model_validate(
                {**candidate["fixture"], "appliesTo": {"surfaceId": fresh_surface()}}
            )
            run(shared_store, fx, events)
            ran += 1
    assert ran >= 50
