"""The demo's plan: seeded and deterministic, with its truth where it says it is."""

from __future__ import annotations

import datetime as dt

import pytest

from holonograph.demo.traffic import SURFACES, DemoPlan, _items

UNTIL = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def _plan(**changes: int) -> DemoPlan:
    return DemoPlan(until=UNTIL, days=4, surfaces=3, calls_per_day=48, **changes)


def test_the_same_plan_sends_the_same_spans_and_another_seed_others() -> None:
    first, calls, dropped = _items(_plan())
    again, _, _ = _items(_plan())
    assert first == again
    other, _, _ = _items(_plan(seed=8))
    assert [i.passed for i in other] != [i.passed for i in first]
    assert len(calls) == 3 * 4 * 48  # every call has a primary and an observer
    evaluations = [i for i in first if i.passed is not None]
    assert len(evaluations) == 2 * len(calls) - dropped
    assert [i.end_ns for i in first] == sorted(i.end_ns for i in first)


def test_the_gap_stream_skips_ordinals_and_its_sentinel_counts_them() -> None:
    plan = _plan()
    items, _, dropped = _items(plan)
    on_gap = [i for i in items if i.attributes["holonograph.emission.stream"] == plan.gap_stream]
    seqs = sorted(i.attributes["holonograph.emission.seq"] for i in on_gap if i.passed is not None)
    (sentinel,) = [i for i in on_gap if i.passed is None]
    assert dropped > 0
    assert sentinel.attributes["holonograph.completeness.dropped"] == dropped
    offered = sentinel.attributes["holonograph.completeness.offered"]
    assert len(seqs) == offered - dropped
    missing = sorted(set(range(offered)) - set(seqs))
    assert missing == list(range(missing[0], missing[0] + dropped))  # one contiguous gap
    assert sentinel.attributes["holonograph.emission.seq"] == offered
    # Every other stream ends with a sentinel that dropped nothing.
    others = [i for i in items if i.passed is None and i is not sentinel]
    assert {i.attributes["holonograph.completeness.dropped"] for i in others} == {0}


def test_only_the_first_surface_changes_and_no_call_falls_back() -> None:
    plan = _plan()
    items, calls, _ = _items(plan)
    assert all(len(c.events) == 2 for c in calls)
    served = {
        (i.attributes["holonograph.surface.id"], i.attributes["holonograph.light_source.id"])
        for i in items
        if i.passed is not None and i.attributes["holonograph.multiplex.role"] == "primary"
    }
    assert (SURFACES[0], "acme/m/2026-10") in served
    assert {s for s, v in served if v == "acme/m/2026-10"} == {SURFACES[0]}
    assert plan.change_at == UNTIL - dt.timedelta(days=2)


@pytest.mark.parametrize("bad", [{"surfaces": 0}, {"surfaces": 6}, {"days": 1}])
def test_a_plan_out_of_range_is_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        DemoPlan(until=UNTIL, **bad)
