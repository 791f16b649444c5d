"""The head-to-head comparison: aggregates from ClickHouse (`sql.py`), statistics on
them here.

Intervals are at 95%: a pass rate's is Wilson's (honest near 0 and 1 and for small
counts), a paired difference of pass rates Newcombe's hybrid score interval for paired
proportions (its coverage holds at 30 calls), a mean score's and a paired mean
difference's use Student's t on a variance ClickHouse computes stably. Paired
pass/fail differences are tested with McNemar's exact test (the two-sided binomial
test of improved against regressed calls at 1/2), paired score differences with the
paired t-test. A report holds a family of paired comparisons (every observer against
the primary, on every dimension), and a vendor switch gated on "any of them at 5 %"
would fire far more often than 5 % of the time; so the p-values are adjusted by Holm's
step-down method, which keeps the family-wise error at alpha whatever the tests'
dependence (`--correction none`: each test at alpha on its own). Every raw p-value is
listed beside its adjusted one.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from processors.compare import sql
from processors.jobs import Job, JobError, JobRequest, saves_nothing
from processors.series.cells import SeriesQuery
from processors.special import ufuncs
from schemas.analysis import Interval, Role
from schemas.compare import (
    COMPARE_BY,
    CompareParameters,
    CompareReport,
    Correction,
    FallbackRate,
    GroupDimension,
    GroupSummary,
    Missing,
    OutcomeKind,
    PairedComparison,
    Quantiles,
)
from schemas.events import RunMode
from schemas.registry import versions_by_id
from schemas.routing import Answer, primary_answer, routing_in_force
from schemas.store import Store
from schemas.times import Clock
from schemas.utctime import UtcTime

LEVEL = 0.95
_Z = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class CompareRequest:
    """What to compare: one surface over [since, until), grouped `by` light source, lens
    or `substrate:<column>`, optionally one dimension; provenance/run-mode filters as
    the other analyses (empty: no filter); tenant None: every tenant."""

    surface_id: str
    since: dt.datetime
    until: dt.datetime
    by: str = "light-source"
    dimension_id: str | None = None
    run_modes: tuple[str, ...] = ()
    provenances: tuple[str, ...] = ("production-state",)
    alpha: float = 0.05
    tenant_id: str | None = None
    correction: Correction = "holm"
    role: Role | None = None  # the per-group readings' events; None: `group_role`

    def __post_init__(self) -> None:
        if self.until <= self.since:
            raise ValueError("--until must be after --since")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("--alpha must be between 0 and 1")
        if self.by not in COMPARE_BY and not (
            self.by.startswith("substrate:") and self.by.split(":", 1)[1].strip()
        ):
            raise ValueError("--by must be light-source, lens or substrate:<column>")

    @property
    def group_role(self) -> Role:
        """Which events the per-group readings take: every event when a group is one
        light source (nothing of two vendors is averaged), else what the agent used (a
        lens version or substrate value would otherwise blend the primary's events with
        the observers'); `role` overrides. The fallbacks and the paired comparison read
        the roles themselves."""
        if self.role is not None:
            return self.role
        return "all" if self.by == "light-source" else "primary"

    @property
    def group_column(self) -> str:
        """The fixed SQL fragment that names a group."""
        return sql.GROUP_COLUMNS.get(self.by, sql.SUBSTRATE)

    def params(self) -> dict[str, Any]:
        series = SeriesQuery(
            surface_id=self.surface_id,
            since=self.since,
            until=self.until,
            dimension_id=self.dimension_id,
            provenances=self.provenances,
            run_modes=self.run_modes,
            tenant_id=self.tenant_id,
            role=self.group_role,
        )
        key = self.by.split(":", 1)[1] if self.by.startswith("substrate:") else ""
        return {**series.params(), "substrate_key": key}


# --- statistics on aggregates


def wilson(passes: int, n: int, z: float = _Z) -> Interval | None:
    """The Wilson score interval of a pass rate; None without graded events."""
    if n <= 0:
        return None
    p = passes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Interval(estimate=p, ci_low=max(0.0, centre - half), ci_high=min(1.0, centre + half))


def t_interval(mean: float, variance: float, n: int) -> Interval | None:
    """Mean with a Student-t interval from a count, the mean and the sample variance
    (computed stably: from a sum of squares, n mean^2 cancels for large scores)."""
    special = ufuncs()  # what scipy.stats.t calls, without importing scipy.stats

    if n < 2 or not math.isfinite(variance):  # one value has no spread to build on
        return None
    half = float(special.stdtrit(n - 1, 0.5 + LEVEL / 2)) * math.sqrt(max(variance, 0.0) / n)
    return Interval(estimate=mean, ci_low=mean - half, ci_high=mean + half)


def paired_t_p(mean: float, variance: float, n: int) -> float | None:
    """Two-sided p-value of the paired t-test that the mean difference is 0."""
    special = ufuncs()

    if n < 2 or not math.isfinite(variance):
        return None
    if variance <= 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / math.sqrt(variance / n)
    return float(2 * special.stdtr(n - 1, -abs(t)))  # Student's t survival function


def mcnemar_exact(improved: int, regressed: int) -> float:
    """McNemar's exact two-sided p-value: discordant calls split as a fair coin would."""
    special = ufuncs()

    discordant = improved + regressed
    if discordant == 0:
        return 1.0
    tail = float(special.bdtr(min(improved, regressed), discordant, 0.5))  # binomial CDF
    return min(1.0, 2.0 * tail)


def paired_rate_difference(both: int, improved: int, regressed: int, n: int) -> Interval | None:
    """Observer minus primary pass rate on `n` paired calls (`both` passed on both sides,
    `improved`: only the observer, `regressed`: only the primary), with Newcombe's
    hybrid score interval for paired proportions (Newcombe 1998, Statistics in
    Medicine 17:2635, method 10): each rate's Wilson interval, combined through the
    calls' phi correlation (its numerator ad - bc shrunk by n/2 towards 0 when
    positive). Its coverage holds at small n where the Wald interval's does not
    (`bench/PAIRED_INTERVAL_RESULTS.md`), and it never has zero width when some calls
    differ."""
    if n <= 0:
        return None
    neither = n - both - improved - regressed
    p1, p2 = (both + improved) / n, (both + regressed) / n
    observer, primary = wilson(both + improved, n), wilson(both + regressed, n)
    assert observer is not None and primary is not None
    l1, u1, l2, u2 = observer.ci_low, observer.ci_high, primary.ci_low, primary.ci_high
    product = float(both + improved) * (neither + regressed) * (both + regressed)
    product *= neither + improved
    cross = float(both) * neither - float(improved) * regressed
    shrunk = cross - n / 2 if cross > n / 2 else min(cross, 0.0)
    phi = shrunk / math.sqrt(product) if product > 0 else 0.0
    d = p1 - p2
    low = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    high = d + math.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0))
    return Interval(estimate=d, ci_low=max(-1.0, low), ci_high=min(1.0, high))


# --- the job


def compare(store: Store, request: CompareRequest) -> CompareReport:
    """The comparison of one window: per group, then each observer against the primary."""
    params = request.params()
    group = request.group_column
    kinds = _dimension_kinds(store, params)
    totals = store.query(sql.multiplex_totals_sql(group), params).rows
    calls, without_primary = (int(totals[0][0]), int(totals[0][1])) if totals else (0, 0)
    # The usual primary and the pairs are read from the multiplex calls' primaries: with
    # no call in the window both are empty, unread (the paired query is a compare's
    # dearest, ~0.1 s on a small store).
    usual = store.query(sql.usual_primary_sql(group), params).rows if calls else []
    usual_primary = str(usual[0][0]) if usual else None
    answers = _primary_answers(store, request, params, group)
    groups = _groups(store, params, group, kinds, answers)
    paired = _paired(store, params, group, kinds) if kinds and calls else []
    paired = judged(paired, request.alpha, request.correction)
    notes = []
    if not groups:
        notes.append("no events for the surface in the window")
    elif not calls:
        notes.append("no multiplex calls in the window: no paired comparison")
    if without_primary:
        notes.append(
            f"{without_primary} multiplex call(s) have no primary event in the window and"
            " are left out of the paired comparison"
        )
    return CompareReport(
        tenant_id=request.tenant_id,
        surface_id=request.surface_id,
        since=request.since,
        until=request.until,
        parameters=CompareParameters(
            by=request.by,
            dimension_id=request.dimension_id,
            run_modes=list(request.run_modes),
            provenances=list(request.provenances),
            alpha=request.alpha,
            correction=request.correction,
            role=request.group_role,
        ),
        events=sum(g.events for g in groups),
        multiplex_calls=calls,
        calls_without_primary=without_primary,
        usual_primary=usual_primary,
        groups=groups,
        paired=paired,
        fallbacks=fallback_rates(answers),
        notes=notes,
    )


def _dimension_kinds(store: Store, params: dict[str, Any]) -> dict[str, OutcomeKind]:
    """Each dimension's kind: pass/fail when most of its outcomes are booleans."""
    rows = store.query(sql.dimension_kinds_sql(), params).rows
    return {
        str(d): "pass-fail" if int(b) >= int(s) else "score"
        for d, b, s in rows
        if int(b) + int(s) > 0
    }


def _groups(
    store: Store,
    params: dict[str, Any],
    group: str,
    kinds: dict[str, OutcomeKind],
    answers: list[tuple[str, Answer, int]],
) -> list[GroupSummary]:
    outcomes: dict[tuple[str, str], dict[str, Any]] = {
        (str(r["grp"]), str(r["dimension_id"])): r
        for r in store.query(sql.group_outcomes_sql(group), params).dicts()
    }
    fell_back: dict[str, int] = defaultdict(int)
    for name, answer, calls in answers:
        if answer.fallback:
            fell_back[name] += calls
    out = []
    for r in store.query(sql.group_events_sql(group), params).dicts():
        name, events = str(r["grp"]), int(r["events"])
        dimensions = [
            _group_dimension(dimension_id, kind, events, outcomes.get((name, dimension_id)))
            for dimension_id, kind in kinds.items()
        ]
        with_cost, with_tokens = int(r["with_cost"]), int(r["with_tokens"])
        tokens = int(r["tokens_in"]) + int(r["tokens_out"])
        out.append(
            GroupSummary(
                group=name,
                events=events,
                latency_ms=Quantiles(
                    p50=_number(r["p50"]) if int(r["with_latency"]) else None,
                    p95=_number(r["p95"]) if int(r["with_latency"]) else None,
                ),
                cost_per_evaluation_usd=float(r["cost"]) / with_cost if with_cost else None,
                cost_usd=float(r["cost"]) if with_cost else None,
                tokens_input=int(r["tokens_in"]),
                tokens_output=int(r["tokens_out"]),
                tokens_per_evaluation=tokens / with_tokens if with_tokens else None,
                as_primary=int(r["as_primary"]),
                as_observer=int(r["as_observer"]),
                fallbacks=fell_back.get(name, 0),
                dimensions=dimensions,
            )
        )
    return out


def _primary_answers(
    store: Store, request: CompareRequest, params: dict[str, Any], group: str
) -> list[tuple[str, Answer, int]]:
    """(group, how its primary events stand to the routing in force, calls) per row of
    `primaries_sql`. The routing in force is the one of the contract version each event
    was checked against at ingest (`contract_version_id`), for its surface and run mode;
    an event checked against none (or a version without a routing for it) is judged by
    its requested id."""
    rows = store.query(sql.primaries_sql(group), params).rows
    versions = versions_by_id(store, {(str(r[0]), str(r[1])) for r in rows if r[1]})
    out = []
    for tenant, version_id, run_mode, served, requested, name, calls in rows:
        version = versions.get((str(tenant), str(version_id)))
        surface = version.contract.surface(request.surface_id) if version else None
        routing = routing_in_force(surface, str(run_mode))
        out.append((str(name), primary_answer(routing, str(served), str(requested)), int(calls)))
    return out


def fallback_rates(answers: list[tuple[str, Answer, int]]) -> list[FallbackRate]:
    """Per (declared primary -> the light source that answered instead): the share of
    the declared primary's calls that fell back to it, with a Wilson interval."""
    calls: dict[tuple[str, str], int] = defaultdict(int)
    fell_back: dict[tuple[str, str, str], int] = defaultdict(int)
    for _, answer, n in answers:
        calls[answer.declared, answer.rule] += n
        if answer.fallback:
            fell_back[answer.declared, answer.rule, answer.answered] += n
    out = []
    for (declared, rule, answered), n in sorted(fell_back.items()):
        total = calls[declared, rule]
        rate = wilson(n, total)
        assert rate is not None
        out.append(
            FallbackRate(
                declared_primary=declared,
                answered_by=answered,
                rule=rule,  # type: ignore[arg-type]
                calls=total,
                fallbacks=n,
                rate=rate,
            )
        )
    return out


def _group_dimension(
    dimension_id: str, kind: OutcomeKind, events: int, row: dict[str, Any] | None
) -> GroupDimension:
    if kind == "pass-fail":
        graded = int(row["graded_pf"]) if row else 0
        passes = int(row["passes"]) if row else 0
        return GroupDimension(
            dimension_id=dimension_id,
            kind=kind,
            graded=graded,
            missing=events - graded,
            passes=passes,
            pass_rate=wilson(passes, graded),
        )
    graded = int(row["graded_score"]) if row else 0
    mean = t_interval(_float(row["score_mean"]), _float(row["score_var"]), graded) if row else None
    return GroupDimension(
        dimension_id=dimension_id, kind=kind, graded=graded, missing=events - graded, mean=mean
    )


def _paired(
    store: Store,
    params: dict[str, Any],
    group: str,
    kinds: dict[str, OutcomeKind],
) -> list[PairedComparison]:
    out = []
    for r in store.query(sql.paired_sql(group), params).dicts():
        kind = kinds.get(str(r["dimension_id"]))
        if kind is None:
            continue
        out.append(_pair(r, kind))
    return out


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None): the k-th smallest of m is
    multiplied by m - k + 1, capped at 1 and kept non-decreasing in that order."""
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        out[i] = running
    return out


def judged(
    paired: list[PairedComparison], alpha: float, correction: Correction
) -> list[PairedComparison]:
    """The comparisons with their adjusted p-values and significance at `alpha`."""
    raw = [p.p_value for p in paired]
    adjusted = holm(raw) if correction == "holm" else raw
    return [
        p.model_copy(update={"adjusted_p_value": a, "significant": a is not None and a < alpha})
        for p, a in zip(paired, adjusted, strict=True)
    ]


def _pair(r: dict[str, Any], kind: OutcomeKind) -> PairedComparison:
    suffix = "pf" if kind == "pass-fail" else "score"
    paired, improved, regressed = (
        int(r[f"{k}_{suffix}"]) for k in ("paired", "improved", "regressed")
    )
    if kind == "pass-fail":
        difference = paired_rate_difference(int(r["both_pf"]), improved, regressed, paired)
        p_value: float | None = mcnemar_exact(improved, regressed) if paired else None
    else:
        mean, variance = _float(r["diff_mean"]), _float(r["diff_var"])
        difference = t_interval(mean, variance, paired)
        p_value = paired_t_p(mean, variance, paired)
    return PairedComparison(
        dimension_id=str(r["dimension_id"]),
        kind=kind,
        primary=str(r["p_grp"]),
        observer=str(r["o_grp"]),
        calls=int(r["calls"]),
        paired=paired,
        improved=improved,
        regressed=regressed,
        equal=paired - improved - regressed,
        missing=Missing(
            primary=int(r[f"missing_primary_{suffix}"]),
            observer=int(r[f"missing_observer_{suffix}"]),
            both=int(r[f"missing_both_{suffix}"]),
        ),
        difference=difference,
        test="mcnemar-exact" if kind == "pass-fail" else "paired-t",
        p_value=p_value,
        significant=False,  # judged over the whole family (`judged`)
    )


def _float(value: Any) -> float:
    """An aggregate's value; NaN where it had no rows (NULL)."""
    return math.nan if value is None else float(value)


def _number(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


# --- the job (processors/jobs.py): POST /holonograph/compare


class CompareJobRequest(JobRequest):
    """`holonograph compare`'s request over HTTP: one surface over [since, until), the
    Guide's camelCase names; `provenances` empty: production-state, `any` or `all`:
    every provenance."""

    named_fields: ClassVar[Mapping[str, str]] = {
        "surface_id": "surface",
        "dimension_id": "dimension",
    }

    surface_id: str = Field(min_length=1, description="The surface compared.")
    since: UtcTime = Field(description="Window start (inclusive).")
    until: UtcTime = Field(description="Window end (exclusive).")
    dimension_id: str | None = Field(None, description="One dimension (default: every one).")
    by: str = Field("light-source", description="light-source, lens or substrate:<column>.")
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="Family-wise significance level.")
    correction: Correction = Field("holm", description="holm or none.")
    role: Role | None = Field(None, description="The per-group readings' events.")
    run_modes: tuple[RunMode, ...] = Field((), description="Only these modes (default: all).")
    provenances: tuple[Literal["production-state", "exploratory-state", "any", "all"], ...] = Field(
        (), description="Default production-state; any (or all): no filter."
    )

    def checked(self) -> CompareRequest:
        """The comparison asked; `ValueError` in the CLI's words (`--until ...`)."""
        chosen = tuple("any" if p == "all" else p for p in self.provenances)
        read = () if "any" in chosen else (chosen or ("production-state",))
        return CompareRequest(
            surface_id=self.surface_id, since=self.since, until=self.until, by=self.by,
            dimension_id=self.dimension_id, run_modes=self.run_modes, provenances=read,
            alpha=self.alpha, correction=self.correction, role=self.role,
            tenant_id=self.tenant,
        )  # fmt: skip

    def compare_request(self) -> CompareRequest:
        try:
            return self.checked()
        except ValueError as err:
            raise JobError(str(err).replace("--", "")) from None


Request = CompareJobRequest
Report = CompareReport


def run(store: Store, request: CompareJobRequest, clock: Clock) -> CompareReport:
    return compare(store, request.compare_request())


persist = saves_nothing


def finding(report: CompareReport) -> bool:
    """A paired difference significant at alpha (after the correction)."""
    return bool(report.significant)


JOB = Job(
    name="compare",
    request=CompareJobRequest,
    document=CompareReport,
    run=run,
    persist=persist,
    finding=finding,
)
