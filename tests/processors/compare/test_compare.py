"""The comparison over seeded multiplex traffic with a known truth: one vendor better
by a known margin on the same calls, one with missing outcomes, fallback calls."""

from __future__ import annotations

import datetime as dt

import pytest
from scipy import stats

from ingest.store.clickhouse import ClickHouseStore
from processors.compare.job import CompareRequest, compare, holm, judged, mcnemar_exact, wilson
from schemas.compare import CompareReport, Missing, PairedComparison
from testkit import multiplex
from testkit.multiplex import BETTER, GAPPY, PRIMARY, Call, MultiplexSpec

pytestmark = pytest.mark.clickhouse

SPEC = MultiplexSpec(lost=(5, 6, 7))
SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)


def _run(
    store: ClickHouseStore, spec: MultiplexSpec = SPEC, **kw: object
) -> tuple[CompareReport, list[Call]]:
    seeded = multiplex.seed(store, spec, 7)
    request = CompareRequest(surface_id=spec.surface_id, since=SINCE, until=UNTIL, **kw)  # type: ignore[arg-type]
    return compare(store, request), seeded.calls


def _pair(report: CompareReport, dimension: str, primary: str, observer: str) -> PairedComparison:
    return next(
        p
        for p in report.paired
        if (p.dimension_id, p.primary, p.observer) == (dimension, primary, observer)
    )


def _primary_calls(calls: list[Call], vendor: str, spec: MultiplexSpec) -> list[Call]:
    """Calls whose stored primary event is `vendor`'s (lost primary events are absent)."""
    kept = [c for c in calls if not c.fallback]
    stored = [c for i, c in enumerate(kept) if i not in spec.lost]
    return stored if vendor == PRIMARY else [c for c in calls if c.fallback]


def test_the_better_vendor_is_found_on_the_same_calls_with_the_true_margin(
    store: ClickHouseStore,
) -> None:
    report, calls = _run(store)
    pair = _pair(report, "correctness", PRIMARY, BETTER)
    shared = _primary_calls(calls, PRIMARY, SPEC)
    outcomes = [(c.of(PRIMARY), c.of(BETTER)) for c in shared]
    improved = sum(1 for a, b in outcomes if b and a and b.passed and not a.passed)
    regressed = sum(1 for a, b in outcomes if b and a and a.passed and not b.passed)
    assert (pair.calls, pair.paired) == (len(shared), len(shared))
    assert (pair.improved, pair.regressed) == (improved, regressed)
    assert pair.equal == len(shared) - improved - regressed
    # McNemar's exact test is the two-sided binomial test of the discordant calls.
    reference = stats.binomtest(improved, improved + regressed, 0.5).pvalue
    assert pair.p_value == pytest.approx(reference, rel=1e-9)
    assert pair.significant
    truth = SPEC.better_rate - SPEC.base
    assert pair.difference is not None
    assert pair.difference.ci_low < truth < pair.difference.ci_high
    assert pair.difference.ci_low > 0
    groups = {g.group: g for g in report.groups}
    better_rate = groups[BETTER].dimensions[0].pass_rate
    primary_rate = groups[PRIMARY].dimensions[0].pass_rate
    assert better_rate is not None and primary_rate is not None
    assert better_rate.ci_low < SPEC.better_rate < better_rate.ci_high
    assert primary_rate.ci_low < SPEC.base < primary_rate.ci_high
    scores = _pair(report, "helpfulness", PRIMARY, BETTER)
    assert scores.test == "paired-t" and scores.difference is not None
    assert scores.difference.ci_low < SPEC.score_gain < scores.difference.ci_high


def test_missing_outcomes_are_counted_as_missing_never_as_failures(
    store: ClickHouseStore,
) -> None:
    report, calls = _run(store)
    pair = _pair(report, "correctness", PRIMARY, GAPPY)
    shared = _primary_calls(calls, PRIMARY, SPEC)
    missing = [c for c in shared if c.of(GAPPY) is None or c.of(GAPPY).passed is None]  # type: ignore[union-attr]
    graded = [c for c in shared if c not in missing]
    assert pair.missing.observer == len(missing) > 0
    assert (pair.missing.primary, pair.missing.both) == (0, 0)
    assert pair.paired == len(graded)
    assert pair.improved + pair.regressed + pair.equal == len(graded)
    assert not pair.significant  # as good as the primary in truth
    gappy = next(g for g in report.groups if g.group == GAPPY)
    sent = [o for c in calls if (o := c.of(GAPPY)) is not None]
    correctness = next(d for d in gappy.dimensions if d.dimension_id == "correctness")
    assert gappy.events == len(sent)
    assert correctness.missing == sum(1 for o in sent if o.passed is None)
    assert correctness.passes == sum(1 for o in sent if o.passed)
    # Were missing outcomes failures, the rate would sit far below the truth.
    assert correctness.pass_rate is not None
    assert correctness.pass_rate.ci_low < SPEC.base < correctness.pass_rate.ci_high
    assert report.calls_without_primary == len(SPEC.lost)


def test_a_fallback_is_attributed_to_the_vendor_that_answered(store: ClickHouseStore) -> None:
    report, _ = _run(store)
    groups = {g.group: g for g in report.groups}
    assert report.usual_primary == PRIMARY
    assert groups[PRIMARY].as_primary == SPEC.calls - len(SPEC.lost)
    assert (groups[BETTER].as_primary, groups[BETTER].fallbacks) == (SPEC.fallbacks, SPEC.fallbacks)
    assert groups[BETTER].events == SPEC.calls + SPEC.fallbacks
    assert groups[PRIMARY].fallbacks == 0
    # The fallback calls pair the vendor that answered with the observers of those calls.
    fallback = _pair(report, "correctness", BETTER, GAPPY)
    assert fallback.calls == SPEC.fallbacks
    assert all(p.primary != PRIMARY for p in report.paired if p.calls == SPEC.fallbacks)


def test_equal_vendors_are_not_called_different(store: ClickHouseStore) -> None:
    spec = MultiplexSpec(with_better=False, fallbacks=0, absent=0.0, ungraded=0.0)
    report, _ = _run(store, spec)
    assert {p.observer for p in report.paired} == {GAPPY}
    assert report.significant == []
    pair = _pair(report, "correctness", PRIMARY, GAPPY)
    assert pair.p_value == pytest.approx(
        stats.binomtest(pair.improved, pair.improved + pair.regressed, 0.5).pvalue, rel=1e-9
    )


def test_grouping_by_a_substrate_column_pools_the_vendors(store: ClickHouseStore) -> None:
    report, calls = _run(store, by="substrate:region")
    assert [g.group for g in report.groups] == ["eu"]
    assert report.groups[0].events == sum(len(c.outcomes) for c in calls) - len(SPEC.lost)
    assert report.paired == []  # one group: nothing to pair


def test_the_interval_and_test_helpers_match_their_references() -> None:
    interval = wilson(7, 10)
    assert interval is not None
    # Wilson's interval for 7/10 at 95% (statsmodels' proportion_confint, method="wilson").
    assert (interval.ci_low, interval.ci_high) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    assert wilson(0, 0) is None
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 9) == pytest.approx(stats.binomtest(1, 10, 0.5).pvalue)


def test_paired_p_values_are_adjusted_over_the_report_family(store: ClickHouseStore) -> None:
    holm_report, _ = _run(store)
    raw_report, _ = _run(store, correction="none")
    assert holm_report.parameters.correction == "holm"
    assert len(holm_report.paired) >= 4  # two observers on two dimensions
    expected = holm([p.p_value for p in holm_report.paired])
    assert [p.adjusted_p_value for p in holm_report.paired] == pytest.approx(expected)
    for p in holm_report.paired:
        assert p.p_value is None or (p.adjusted_p_value or 0.0) >= p.p_value
        assert p.significant == (p.adjusted_p_value is not None and p.adjusted_p_value < 0.05)
    assert [p.adjusted_p_value for p in raw_report.paired] == [p.p_value for p in raw_report.paired]


def test_holm_keeps_the_family_wise_level() -> None:
    # Sorted: 0.005 x 4, 0.01 x 3, 0.03 x 2, 0.04 x 1, kept non-decreasing.
    assert holm([0.01, 0.04, 0.03, None, 0.005]) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert holm([0.9, 0.6]) == pytest.approx([1.0, 1.0])  # 0.6 x 2 caps at 1, and 0.9 keeps it
    assert holm([]) == []


def test_two_tests_near_alpha_are_not_a_finding_together() -> None:
    def pair(observer: str, p: float) -> PairedComparison:
        return PairedComparison(
            dimension_id="correctness", kind="pass-fail", primary=PRIMARY, observer=observer,
            calls=100, paired=100, improved=10, regressed=2, equal=88,
            missing=Missing(primary=0, observer=0, both=0), difference=None,
            test="mcnemar-exact", p_value=p, significant=False,
        )  # fmt: skip

    family = [pair("a", 0.03), pair("b", 0.04)]
    assert [p.significant for p in judged(family, 0.05, "holm")] == [False, False]
    assert [p.significant for p in judged(family, 0.05, "none")] == [True, True]
