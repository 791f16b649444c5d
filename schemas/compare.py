"""Response shape of `holonograph compare`, the head-to-head vendor comparison (the
Guide's chapter 11, the multiplexer).

Two readings of one window: per *group* (a light source, a lens version or a
substrate column's value) what every event of that group says; and, for multiplex
calls (events sharing a correlation id, `multiplex.role` primary/observer), each
observer against the primary *on the same calls*. A call where a vendor has no graded
outcome is counted as missing, on its own, never as a failure. JSON is camelCase like
the other analyses (`schemas.analysis.Model`).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from schemas.analysis import Interval, Model, Role
from schemas.routing import FallbackRule

CompareBy = Literal["light-source", "lens"]  # or "substrate:<column>"
COMPARE_BY: tuple[CompareBy, ...] = ("light-source", "lens")
OutcomeKind = Literal["pass-fail", "score"]
Correction = Literal["holm", "none"]  # over the paired comparisons of one report
MultiplexRole = Literal["primary", "observer"]
MULTIPLEX_ROLES: tuple[MultiplexRole, ...] = ("primary", "observer")


class Quantiles(Model):
    p50: float | None
    p95: float | None


class GroupDimension(Model):
    """One dimension of one group: `graded` events with an outcome, `missing` events of
    the group without one (not failures); `pass_rate` with a 95% Wilson interval for a
    pass/fail dimension, `mean` with a 95% t interval for a scored one."""

    dimension_id: str
    kind: OutcomeKind
    graded: int
    missing: int
    passes: int | None = None
    pass_rate: Interval | None = None
    mean: Interval | None = None


class GroupSummary(Model):
    """Every event of one group in the window. `as_primary` counts multiplex calls this
    group answered as primary; `fallbacks` the calls it answered as primary (multiplex
    or not) that fell back: served by a light source other than the primary of the
    routing in force (`schemas.routing`; a version rollover is never one)."""

    group: str
    events: int
    latency_ms: Quantiles
    cost_per_evaluation_usd: float | None
    cost_usd: float | None
    tokens_input: int
    tokens_output: int
    tokens_per_evaluation: float | None
    as_primary: int
    as_observer: int
    fallbacks: int
    dimensions: list[GroupDimension]


class Missing(Model):
    """Calls of a pair without a graded outcome: the primary's only, the observer's
    only, or both's."""

    primary: int
    observer: int
    both: int


class PairedComparison(Model):
    """One observer against the primary on the calls they share, for one dimension.
    `improved`: the observer did better than the primary on the call; `difference`:
    observer minus primary (pass rate, or mean score) over the calls both graded;
    `p_value`: McNemar's exact test (pass/fail) or the paired t-test (scores)."""

    dimension_id: str
    kind: OutcomeKind
    primary: str
    observer: str
    calls: int
    paired: int
    improved: int
    regressed: int
    equal: int
    missing: Missing
    difference: Interval | None
    test: Literal["mcnemar-exact", "paired-t"]
    p_value: float | None
    significant: bool
    # The p-value adjusted for the report's family of paired comparisons (Holm), or the
    # p-value itself with correction "none"; `significant` compares it with alpha.
    adjusted_p_value: float | None = None


class FallbackRate(Model):
    """Calls whose declared primary (`rule` routing: the first entry of the routing in
    force for the surface and run mode; `requested`: no routing in force, the primary
    event's requested id) was answered by `answered_by` instead (a routing entry, else
    the served id): `fallbacks` of `calls` (every call with that declared primary), the
    rate with its 95% Wilson interval."""

    declared_primary: str
    answered_by: str
    rule: FallbackRule
    calls: int
    fallbacks: int
    rate: Interval


class CompareParameters(Model):
    by: str
    dimension_id: str | None
    run_modes: list[str]
    provenances: list[str]
    alpha: float
    level: float = 0.95
    correction: Correction = "holm"
    role: Role = "all"  # the events the per-group readings took (`CompareRequest.group_role`)


class CompareReport(Model):
    tenant_id: str | None = None
    surface_id: str
    since: dt.datetime
    until: dt.datetime
    parameters: CompareParameters
    events: int
    multiplex_calls: int
    calls_without_primary: int
    usual_primary: str | None
    groups: list[GroupSummary]
    paired: list[PairedComparison]
    fallbacks: list[FallbackRate] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def significant(self) -> list[PairedComparison]:
        """The findings: paired differences significant at the chosen level."""
        return [p for p in self.paired if p.significant]
