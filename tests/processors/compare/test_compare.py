"""The comparison over seeded multiplex traffic with a known truth: one vendor better
by a known margin on the same calls, one with missing outcomes, fallback calls."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools

import numpy as np
import pytest
from scipy import stats

from ingest.store.clickhouse import ClickHouseStore
from processors.compare import sql
from processors.compare.job import (
    CompareRequest,
    compare,
    holm,
    judged,
    mcnemar_exact,
    paired_rate_difference,
    wilson,
)
from schemas.compare import CompareReport, Missing, PairedComparison
from schemas.contracts import parse_contract
from schemas.registry import register
from schemas.store import QueryResult
from schemas.tables import EVALUATION_EVENTS
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


def _routed(store: ClickHouseStore, spec: MultiplexSpec) -> MultiplexSpec:
    """`spec` with its events checked against a registered contract routing the
    surface to PRIMARY, then BETTER, then GAPPY."""
    contract = parse_contract(
        {
            "agentId": "billing-triage",
            "surfaces": [
                {
                    "id": spec.surface_id,
                    "routings": [
                        {"surfaceId": spec.surface_id, "lightSourceId": [PRIMARY, BETTER, GAPPY]}
                    ],
                }
            ],
        }
    )
    version = register(store, "default", contract, SINCE).version
    return dataclasses.replace(spec, contract_version_id=version.version_id)


def test_a_fallback_is_attributed_to_the_vendor_that_answered(store: ClickHouseStore) -> None:
    spec = _routed(store, SPEC)
    report, _ = _run(store, spec)
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
    (rate,) = report.fallbacks
    calls = SPEC.calls - len(SPEC.lost) + SPEC.fallbacks
    assert (rate.declared_primary, rate.answered_by, rate.rule) == (PRIMARY, BETTER, "routing")
    assert (rate.fallbacks, rate.calls) == (SPEC.fallbacks, calls)
    assert rate.rate.estimate == pytest.approx(SPEC.fallbacks / calls)
    assert rate.rate.ci_low < SPEC.fallbacks / calls < rate.rate.ci_high


def test_without_a_contract_a_fallback_is_a_primary_not_served_as_requested(
    store: ClickHouseStore,
) -> None:
    # The fallback calls record the primary as asked for; BETTER answered.
    report, _ = _run(store, dataclasses.replace(SPEC, fallback_requested=PRIMARY))
    (rate,) = report.fallbacks
    assert (rate.declared_primary, rate.answered_by, rate.rule) == (PRIMARY, BETTER, "requested")
    assert (rate.fallbacks, rate.calls) == (SPEC.fallbacks, SPEC.calls - len(SPEC.lost) + 20)
    assert {g.group: g.fallbacks for g in report.groups}[BETTER] == SPEC.fallbacks


def test_calls_served_as_requested_are_no_fallbacks(store: ClickHouseStore) -> None:
    """Without a contract, a vendor answering as itself is no fallback, however rarely
    it is primary (the old rule counted every call of a non-usual primary)."""
    report, _ = _run(store)
    assert report.fallbacks == []
    assert all(g.fallbacks == 0 for g in report.groups)


def test_equal_vendors_are_not_called_different(store: ClickHouseStore) -> None:
    spec = MultiplexSpec(with_better=False, fallbacks=0, absent=0.0, ungraded=0.0)
    report, _ = _run(store, spec)
    assert {p.observer for p in report.paired} == {GAPPY}
    assert report.significant == []
    pair = _pair(report, "correctness", PRIMARY, GAPPY)
    assert pair.p_value == pytest.approx(
        stats.binomtest(pair.improved, pair.improved + pair.regressed, 0.5).pvalue, rel=1e-9
    )


def test_grouping_by_a_substrate_column_reads_what_the_agent_used(
    store: ClickHouseStore,
) -> None:
    """A group that is not one vendor (a substrate value, a lens version) would average
    the primary's events with the observers': by default it takes the primary's."""
    report, calls = _run(store, by="substrate:region")
    assert [g.group for g in report.groups] == ["eu"]
    assert report.parameters.role == "primary"
    primaries = sum(1 for c in calls for o in c.outcomes if o.role == "primary")
    assert report.groups[0].events == primaries - len(SPEC.lost)
    assert report.paired == []  # one group: nothing to pair
    pooled = compare(
        store,
        CompareRequest(
            surface_id=SPEC.surface_id, since=SINCE, until=UNTIL, by="substrate:region",
            role="all",
        ),
    )  # fmt: skip
    assert pooled.parameters.role == "all"
    assert pooled.groups[0].events == sum(len(c.outcomes) for c in calls) - len(SPEC.lost)
    by_vendor = compare(store, CompareRequest(surface_id=SPEC.surface_id, since=SINCE, until=UNTIL))
    assert by_vendor.parameters.role == "all"  # a light source is one vendor: every event


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


def _tables(n: int) -> np.ndarray:
    """Every paired 2x2 table of n calls: (both passed, only the observer, only the
    primary, neither)."""
    rows = [
        (a, b, c, n - a - b - c)
        for a, b, c in itertools.product(range(n + 1), repeat=3)
        if a + b + c <= n
    ]
    return np.array(rows)


def test_the_paired_difference_interval_covers_at_30_calls_and_is_never_a_point() -> None:
    """Exact coverage (every table of 30 calls, weighted by its multinomial probability)
    at least 0.93 wherever the vendors' true rates and agreement put it, and an
    interval of positive width on every table where some call differs."""
    tables = _tables(30)
    intervals = np.array(
        [
            (iv.ci_low, iv.ci_high)
            for iv in (paired_rate_difference(a, b, c, 30) for a, b, c, _ in tables)
            if iv is not None
        ]
    )
    differ = tables[:, 1] + tables[:, 2] > 0
    assert np.all(intervals[differ, 1] - intervals[differ, 0] > 1e-9)
    for both, only_observer, only_primary in (
        (0.68, 0.02, 0.02),  # equal vendors that agree on nearly every call
        (0.60, 0.20, 0.05),  # the observer better by 0.15
        (0.80, 0.01, 0.10),  # the primary better, rarely worse
        (0.45, 0.05, 0.05),  # near one half
        (0.90, 0.05, 0.00),  # near the top, one-sided disagreement
    ):
        p = np.array([both, only_observer, only_primary, 1 - both - only_observer - only_primary])
        truth = only_observer - only_primary
        weight = np.exp(stats.multinomial.logpmf(tables, 30, p))
        covered = (intervals[:, 0] <= truth + 1e-12) & (truth - 1e-12 <= intervals[:, 1])
        assert float(np.sum(weight * covered)) >= 0.93, (p, float(np.sum(weight * covered)))


def test_the_paired_difference_interval_is_newcombes() -> None:
    interval = paired_rate_difference(20, 6, 2, 30)
    assert interval is not None and interval.estimate == pytest.approx(4 / 30)
    # Newcombe's method 10 by hand: the Wilson limits of 26/30 and 22/30 (4 places), phi of the
    # table with ad - bc = 20*2 - 6*2 = 28 shrunk by n/2 = 15.
    l1, u1 = 0.7032, 0.9469
    l2, u2 = 0.5555, 0.8582
    phi = (28 - 15) / np.sqrt(26 * 4 * 22 * 8)
    p1, p2 = 26 / 30, 22 / 30
    low = p1 - p2 - np.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + np.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    assert (interval.ci_low, interval.ci_high) == pytest.approx((low, high), abs=2e-4)
    assert paired_rate_difference(0, 0, 0, 0) is None
    assert paired_rate_difference(0, 30, 0, 30) is not None


def test_score_intervals_hold_for_large_scores(store: ClickHouseStore) -> None:
    """Scores near 1e8: a variance from the sum of squares less n mean^2 would be
    rounding noise (or zero); the stable one matches the two-pass variance."""
    spec = MultiplexSpec(score_offset=1e8, fallbacks=0, lost=())
    report, calls = _run(store, spec)
    scores = np.array(
        [o.score for c in calls if (o := c.of(PRIMARY)) is not None and o.score is not None]
    )
    groups = {g.group: g for g in report.groups}
    (helpfulness,) = [d for d in groups[PRIMARY].dimensions if d.dimension_id == "helpfulness"]
    assert helpfulness.mean is not None and helpfulness.graded == scores.size
    half = stats.t.ppf(0.975, scores.size - 1) * scores.std(ddof=1) / np.sqrt(scores.size)
    assert helpfulness.mean.estimate == pytest.approx(scores.mean(), rel=1e-12)
    width = helpfulness.mean.ci_high - helpfulness.mean.ci_low
    assert width == pytest.approx(2 * half, rel=1e-6)


class _Plain:
    """The store, its events stored without a correlation id: no multiplex calls."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store

    def insert(self, table: str, rows: list[list[object]], columns: list[str]) -> None:
        if table == EVALUATION_EVENTS.qualified:
            at = list(columns).index("correlation_id")
            rows = [[*row[:at], "", *row[at + 1 :]] for row in rows]
        self.store.insert(table, rows, columns)


class _Recording:
    def __init__(self, store: ClickHouseStore) -> None:
        self.store, self.sent = store, []  # type: ignore[var-annotated]

    def query(self, sql_text: str, parameters: dict[str, object] | None = None) -> QueryResult:
        self.sent.append(sql_text)
        return self.store.query(sql_text, parameters)


def test_without_multiplex_calls_the_pairs_are_empty_and_not_read(store: ClickHouseStore) -> None:
    """The usual primary and the pairs come from the window's multiplex calls: with none,
    their queries (which would answer nothing, checked here) are not sent."""
    multiplex.seed(_Plain(store), SPEC, 7)  # type: ignore[arg-type]
    request = CompareRequest(surface_id=SPEC.surface_id, since=SINCE, until=UNTIL)
    recording = _Recording(store)
    report = compare(recording, request)  # type: ignore[arg-type]
    assert {g.group for g in report.groups} >= {PRIMARY, BETTER}  # the events are there
    assert report.paired == [] and report.usual_primary is None
    assert "no multiplex calls in the window: no paired comparison" in report.notes
    group, params = request.group_column, request.params()
    for text in (sql.paired_sql(group), sql.usual_primary_sql(group)):
        assert text not in recording.sent
        assert store.query(text, params).rows == []  # what it would have read
    assert sql.multiplex_totals_sql(group) in recording.sent
