"""Assertion verdicts for one event, twice: as ClickHouse expressions (checks over the
store) and in Python (suites over a file of recorded events). Both follow one table,
and a test holds them equal on random events.

Per assertion: pass, fail, requires-judge (a judge assertion not graded yet) or
unevaluable (the event lacks the data the assertion reads: never a guess). Per event:
a `when` guard with any failing predicate makes it not-applicable; a guard that cannot
be decided gives its strongest undecided verdict; otherwise the strongest assertion
verdict, by the Guide's order fail > pass > requires-judge > unevaluable > not-applicable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.conformance import (
    JUDGE_DIMENSION_PREFIX,
    VERDICT_RANK,
    Assertion,
    CohortTagAssertion,
    CostAssertion,
    DimensionAssertion,
    JudgeAssertion,
    LatencyAssertion,
    MarkerAssertion,
    ScoreAssertion,
    ToolAssertion,
    Verdict,
    strongest,
)

TOOL_MARKER = "tool_invocations"
FAIL, PASS, JUDGE, UNEVALUABLE, NOT_APPLICABLE = (
    VERDICT_RANK[v] for v in ("fail", "pass", "requires-judge", "unevaluable", "not-applicable")
)


@dataclass(frozen=True)
class DimensionView:
    passed: bool | None
    score: float | None
    judge: str = ""


@dataclass(frozen=True)
class EventView:
    """What conformance reads of one evaluation event."""

    event_id: str
    timestamp: Any = None
    markers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    cohort_tags: Sequence[str] = ()
    latency_ms: float | None = None
    cost_usd: float | None = None
    dimensions: Mapping[str, DimensionView] = field(default_factory=dict)


def judge_dimension(assertion: JudgeAssertion, rule_id: str) -> str:
    """The dimension that carries a judge's grade for this rule."""
    return assertion.dimension or f"{JUDGE_DIMENSION_PREFIX}{rule_id}"


def describe(a: Assertion) -> str:
    """One assertion in words, for people reviewing a candidate fixture."""
    if isinstance(a, MarkerAssertion):
        where = a.column or "any marker"
        verb = "contains" if a.kind == "marker-contains" else "does not contain"
        case = " (exact case)" if a.case_sensitive else ""
        return f'{where} {verb} "{a.value}"{case}'
    if isinstance(a, ToolAssertion):
        if a.kind == "tool-not-invoked":
            return f"{a.tool} is not invoked"
        return f"{a.tool} is invoked" + (f" before {a.before}" if a.before else "")
    if isinstance(a, DimensionAssertion):
        return f"dimension {a.dimension} {'passed' if a.kind == 'dimension-passed' else 'failed'}"
    if isinstance(a, ScoreAssertion):
        return f"{a.dimension} score >= {a.min:g}"
    if isinstance(a, CohortTagAssertion):
        return f'cohort tag "{a.tag}" is present'
    if isinstance(a, LatencyAssertion):
        return f"latency <= {a.max_ms:g} ms"
    if isinstance(a, CostAssertion):
        return f"cost <= ${a.max_usd:g}"
    return f'a judge grades it against "{a.criterion}"'


def explain(when: Sequence[Assertion], checks: Sequence[Assertion]) -> str:
    body = " and ".join(describe(a) for a in checks)
    if not when:
        return f"on every event: {body}"
    return f"when {' and '.join(describe(p) for p in when)}: {body}"


# --- Python ----------------------------------------------------------------------------


def _outcome(holds: bool) -> Verdict:
    return "pass" if holds else "fail"


def _contains(values: Sequence[str], needle: str, case_sensitive: bool) -> bool:
    if case_sensitive:
        return any(needle in v for v in values)
    low = needle.lower()
    return any(low in v.lower() for v in values)


def _marker(a: MarkerAssertion, e: EventView) -> Verdict:
    if a.column is None:
        if not e.markers:
            return "unevaluable"
        values: Sequence[str] = [v for vs in e.markers.values() for v in vs]
    elif a.column in e.markers:
        values = e.markers[a.column]
    else:
        return "unevaluable"
    found = _contains(values, a.value, a.case_sensitive)
    return _outcome(found if a.kind == "marker-contains" else not found)


def _tool(a: ToolAssertion, e: EventView) -> Verdict:
    if TOOL_MARKER not in e.markers:
        return "unevaluable"
    tools = list(e.markers[TOOL_MARKER])
    invoked = a.tool in tools
    if a.kind == "tool-not-invoked":
        return _outcome(not invoked)
    if invoked and a.before is not None and a.before in tools:
        return _outcome(tools.index(a.tool) < tools.index(a.before))
    return _outcome(invoked)


def _dimension(a: DimensionAssertion | ScoreAssertion, e: EventView) -> Verdict:
    dim = e.dimensions.get(a.dimension)
    if isinstance(a, ScoreAssertion):
        if dim is None or dim.score is None:
            return "unevaluable"
        return _outcome(dim.score >= a.min)
    if dim is None or dim.passed is None:
        return "unevaluable"
    return _outcome(dim.passed if a.kind == "dimension-passed" else not dim.passed)


def _judge(a: JudgeAssertion, e: EventView, rule_id: str) -> Verdict:
    dim = e.dimensions.get(judge_dimension(a, rule_id))
    if dim is None or (a.judge is not None and dim.judge != a.judge):
        return "requires-judge"
    if dim.passed is not None:
        return _outcome(dim.passed)
    if dim.score is not None and a.min_score is not None:
        return _outcome(dim.score >= a.min_score)
    return "requires-judge"


def _limit(value: float | None, limit: float) -> Verdict:
    return "unevaluable" if value is None else _outcome(value <= limit)


def assertion_verdict(a: Assertion, e: EventView, rule_id: str) -> Verdict:
    """One assertion (or `when` predicate) over one event."""
    if isinstance(a, MarkerAssertion):
        return _marker(a, e)
    if isinstance(a, ToolAssertion):
        return _tool(a, e)
    if isinstance(a, DimensionAssertion | ScoreAssertion):
        return _dimension(a, e)
    if isinstance(a, CohortTagAssertion):
        return _outcome(a.tag in e.cohort_tags)
    if isinstance(a, LatencyAssertion):
        return _limit(e.latency_ms, a.max_ms)
    if isinstance(a, CostAssertion):
        return _limit(e.cost_usd, a.max_usd)
    return _judge(a, e, rule_id)


def combine(guard: Sequence[str], assertions: Sequence[str]) -> Verdict:
    """The event verdict from its guard predicates' and assertions' verdicts."""
    if "fail" in guard:
        return "not-applicable"
    undecided = [v for v in guard if v != "pass"]
    return strongest(undecided or assertions) or "not-applicable"


@dataclass(frozen=True)
class EventVerdict:
    event_id: str
    timestamp: Any
    verdict: Verdict
    when: tuple[Verdict, ...]
    assertions: tuple[Verdict, ...]


def evaluate_event(
    e: EventView, when: Sequence[Assertion], checks: Sequence[Assertion], rule_id: str
) -> EventVerdict:
    guard = tuple(assertion_verdict(p, e, rule_id) for p in when)
    verdicts = tuple(assertion_verdict(a, e, rule_id) for a in checks)
    return EventVerdict(e.event_id, e.timestamp, combine(guard, verdicts), guard, verdicts)


# --- ClickHouse ------------------------------------------------------------------------


class SqlBuilder:
    """Compiles assertions to UInt8 verdict-rank expressions over the columns `markers`,
    `cohort_tags`, `latency_ms`, `cost_usd` and `dims` (an array of (dimension_id,
    passed, score, judge) tuples). Values are bound parameters, never inlined."""

    def __init__(self, prefix: str = "c") -> None:
        self.prefix = prefix
        self.parameters: dict[str, Any] = {}

    def bind(self, value: Any, type_name: str) -> str:
        name = f"{self.prefix}{len(self.parameters)}"
        self.parameters[name] = value
        return f"{{{name}:{type_name}}}"

    def _marker(self, a: MarkerAssertion) -> str:
        needle = self.bind(a.value, "String")
        if a.case_sensitive:
            match = f"arrayExists(x -> position(x, {needle}) > 0, VALUES)"
        else:
            match = f"arrayExists(x -> position(lowerUTF8(x), lowerUTF8({needle})) > 0, VALUES)"
        if a.column is None:
            missing, values = "empty(mapKeys(markers))", "arrayFlatten(mapValues(markers))"
        else:
            column = self.bind(a.column, "String")
            missing, values = f"NOT mapContains(markers, {column})", f"markers[{column}]"
        match = match.replace("VALUES", values)
        holds = match if a.kind == "marker-contains" else f"NOT {match}"
        return f"multiIf({missing}, {UNEVALUABLE}, {holds_if(holds)})"

    def _tool(self, a: ToolAssertion) -> str:
        tools = f"markers['{TOOL_MARKER}']"
        tool = self.bind(a.tool, "String")
        invoked = f"has({tools}, {tool})"
        if a.kind == "tool-not-invoked":
            holds = f"NOT {invoked}"
        elif a.before is not None:
            other = self.bind(a.before, "String")
            holds = (
                f"{invoked} AND (NOT has({tools}, {other})"
                f" OR indexOf({tools}, {tool}) < indexOf({tools}, {other}))"
            )
        else:
            holds = invoked
        missing = f"NOT mapContains(markers, '{TOOL_MARKER}')"
        return f"multiIf({missing}, {UNEVALUABLE}, {holds_if(holds)})"

    def _dim(self, dimension: str, judge: str | None = None) -> str:
        cond = f"tupleElement(t, 1) = {self.bind(dimension, 'String')}"
        if judge is not None:
            cond += f" AND tupleElement(t, 4) = {self.bind(judge, 'String')}"
        return f"arrayFirst(t -> {cond}, dims)"

    def _dimension(self, a: DimensionAssertion | ScoreAssertion) -> str:
        dim = self._dim(a.dimension)
        if isinstance(a, ScoreAssertion):
            value, holds = f"tupleElement({dim}, 3)", f">= {self.bind(a.min, 'Float64')}"
        else:
            value = f"tupleElement({dim}, 2)"
            holds = "= true" if a.kind == "dimension-passed" else "= false"
        return f"multiIf(isNull({value}), {UNEVALUABLE}, {holds_if(f'{value} {holds}')})"

    def _judge(self, a: JudgeAssertion, rule_id: str) -> str:
        dim = self._dim(judge_dimension(a, rule_id), a.judge)
        passed, score = f"tupleElement({dim}, 2)", f"tupleElement({dim}, 3)"
        parts = [f"isNotNull({passed}), {holds_if(f'{passed} = true')}"]
        if a.min_score is not None:
            threshold = self.bind(a.min_score, "Float64")
            parts.append(f"isNotNull({score}), {holds_if(f'{score} >= {threshold}')}")
        return f"multiIf({', '.join(parts)}, {JUDGE})"

    def _limit(self, column: str, limit: float) -> str:
        bound = self.bind(limit, "Float64")
        return f"multiIf(isNull({column}), {UNEVALUABLE}, {holds_if(f'{column} <= {bound}')})"

    def assertion(self, a: Assertion, rule_id: str) -> str:
        if isinstance(a, MarkerAssertion):
            return self._marker(a)
        if isinstance(a, ToolAssertion):
            return self._tool(a)
        if isinstance(a, DimensionAssertion | ScoreAssertion):
            return self._dimension(a)
        if isinstance(a, CohortTagAssertion):
            return holds_if(f"has(cohort_tags, {self.bind(a.tag, 'String')})")
        if isinstance(a, LatencyAssertion):
            return self._limit("latency_ms", a.max_ms)
        if isinstance(a, CostAssertion):
            return self._limit("cost_usd", a.max_usd)
        return self._judge(a, rule_id)

    def array(self, items: Sequence[Assertion], rule_id: str) -> str:
        """`CAST([...], 'Array(UInt8)')`: an empty list is a typed empty array."""
        inner = ", ".join(self.assertion(a, rule_id) for a in items)
        return f"CAST([{inner}], 'Array(UInt8)')"


def holds_if(condition: str) -> str:
    """Rank expression: pass when the condition holds, else fail."""
    return f"if({condition}, {PASS}, {FAIL})"


# The event verdict from arrays `g` (guard ranks) and `a` (assertion ranks), mirroring
# `combine`: a failed guard predicate wins, then undecided guard predicates.
VERDICT_SQL = (
    f"multiIf(has(g, {FAIL}), {NOT_APPLICABLE},"
    f" arrayAll(x -> x = {PASS}, g), arrayMax(a),"
    f" arrayMax(arrayFilter(x -> x != {PASS}, g)))"
)
