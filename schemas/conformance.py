"""Conformance contract: fixtures, assertions, verdicts, check results and harness suites.

Every model is strict about its shape (unknown fields rejected, every string and list
bounded, ids unique) because fixtures and suites are written by people and gate
releases: a typo must fail loudly at load time, never silently widen a check.
JSON uses the Guide's camelCase names; Python uses snake_case attributes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from schemas.events import RunMode

Verdict = Literal["fail", "pass", "requires-judge", "unevaluable", "not-applicable"]
Enforceability = Literal["trace-enforceable", "judge-required", "not-enforceable"]

# Strongest first: the Guide's precedence for combining assertion and event verdicts.
VERDICT_ORDER: tuple[Verdict, ...] = (
    "fail",
    "pass",
    "requires-judge",
    "unevaluable",
    "not-applicable",
)
VERDICT_RANK: dict[str, int] = {v: len(VERDICT_ORDER) - i for i, v in enumerate(VERDICT_ORDER)}
RANK_VERDICT: dict[int, Verdict] = {VERDICT_RANK[v]: v for v in VERDICT_ORDER}
JUDGE_DIMENSION_PREFIX = "judge:"

Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$")]
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=200)]
LongText = Annotated[str, StringConstraints(min_length=1, max_length=2000)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def strongest(verdicts: Iterable[str]) -> Verdict | None:
    """The strongest verdict by the Guide's precedence, None for an empty input."""
    ranks = [VERDICT_RANK[v] for v in verdicts]
    return RANK_VERDICT[max(ranks)] if ranks else None


def require_unique(ids: Iterable[str], what: str) -> None:
    """Refuse repeated ids, naming every one repeated."""
    seen: set[str] = set()
    dupes: set[str] = set()
    for item in ids:
        (dupes if item in seen else seen).add(item)
    if dupes:
        raise ValueError(f"duplicate {what}: {', '.join(sorted(dupes))}")


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        str_strip_whitespace=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON shape, without unset optional fields or defaults."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


# --- assertions (the same vocabulary serves `when` guards) -----------------------------


class MarkerAssertion(Model):
    """A marker holds (or not) a substring. `column` absent: any recorded marker.
    Matching is case-insensitive unless `caseSensitive` is true."""

    kind: Literal["marker-contains", "marker-not-contains"]
    column: Name | None = None
    value: ShortText
    case_sensitive: bool = False


class ToolAssertion(Model):
    """A tool name is (not) in `tool_invocations`; exact, case-sensitive match.
    `before` (tool-invoked only): the tool's first call precedes that tool's first call."""

    kind: Literal["tool-invoked", "tool-not-invoked"]
    tool: Name
    before: Name | None = None

    @model_validator(mode="after")
    def _before_needs_invoked(self) -> ToolAssertion:
        if self.before is not None and self.kind != "tool-invoked":
            raise ValueError("`before` only applies to tool-invoked")
        if self.before == self.tool:
            raise ValueError("`before` names the same tool")
        return self


class DimensionAssertion(Model):
    kind: Literal["dimension-passed", "dimension-failed"]
    dimension: Id


class ScoreAssertion(Model):
    kind: Literal["score-at-least"]
    dimension: Id
    min: Finite


class CohortTagAssertion(Model):
    kind: Literal["cohort-tag-present"]
    tag: ShortText


class LatencyAssertion(Model):
    kind: Literal["latency-at-most"]
    max_ms: NonNegative


class CostAssertion(Model):
    kind: Literal["cost-at-most"]
    max_usd: NonNegative


class JudgeAssertion(Model):
    """Needs a judge model's grade. The grade is the event's dimension `dimension`
    (default `judge:<ruleId>`), restricted to rows whose `judge` column equals `judge`
    when set; graded means `passed` recorded, or `score` recorded and `minScore` set.
    Until then the verdict is requires-judge."""

    kind: Literal["judge"]
    criterion: LongText
    dimension: Id | None = None
    judge: ShortText | None = None
    min_score: Finite | None = None


Assertion = Annotated[
    MarkerAssertion
    | ToolAssertion
    | DimensionAssertion
    | ScoreAssertion
    | CohortTagAssertion
    | LatencyAssertion
    | CostAssertion
    | JudgeAssertion,
    Field(discriminator="kind"),
]


# --- fixtures ---------------------------------------------------------------------------


class AppliesTo(Model):
    surface_id: Id


class Fixture(Model):
    """One rule as a check: optional `when` guard (all must hold), then `assertion` or
    `assertions` (exactly one of the two)."""

    fixture_id: Id
    rule_id: Id
    rule_source: ShortText | None = None
    description: LongText
    enforceability: Enforceability
    applies_to: AppliesTo
    when: list[Assertion] | None = Field(default=None, min_length=1, max_length=10)
    assertion: Assertion | None = None
    assertions: list[Assertion] | None = Field(default=None, min_length=1, max_length=20)

    @model_validator(mode="after")
    def _coherent(self) -> Fixture:
        if (self.assertion is None) == (self.assertions is None):
            raise ValueError("give exactly one of `assertion` or `assertions`")
        if self.enforceability == "not-enforceable":
            raise ValueError(
                "a not-enforceable rule cannot be a fixture: rephrase it or hand-author an"
                " enforceable fixture"
            )
        has_judge = any(a.kind == "judge" for a in [*self.checks(), *(self.when or [])])
        if self.enforceability == "judge-required" and not has_judge:
            raise ValueError("a judge-required fixture needs a `judge` assertion")
        if self.enforceability == "trace-enforceable" and has_judge:
            raise ValueError("a trace-enforceable fixture cannot contain a `judge` assertion")
        return self

    def checks(self) -> list[Assertion]:
        """The assertions, whether written as `assertion` or `assertions`."""
        return [self.assertion] if self.assertion is not None else list(self.assertions or [])

    @property
    def surface_id(self) -> str:
        return self.applies_to.surface_id


class FixtureSet(Model):
    fixtures: list[Fixture] = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _unique(self) -> FixtureSet:
        require_unique([f.fixture_id for f in self.fixtures], "fixtureId")
        return self


class ApprovalRequest(Model):
    """The Guide's POST /lens/conformance/fixtures body."""

    approver_id: Id
    source_surface_id: Id
    fixture: Fixture
    comment: LongText | None = None


class RejectionRequest(Model):
    approver_id: Id
    source_surface_id: Id
    fixture: Fixture
    comment: LongText


# --- derive input -----------------------------------------------------------------------


class ToolDeclaration(Model):
    name: Name
    description: Annotated[str, StringConstraints(max_length=2000)] | None = None
    parameters: dict[str, Any] | None = None


class RuleInput(Model):
    rule_id: Id | None = None
    text: LongText
    source: ShortText | None = None


class SurfaceInput(Model):
    """The Guide's POST /lens/conformance/derive body; a rule is a string or an object."""

    surface_id: Id
    tools: list[ToolDeclaration] = Field(default_factory=list, max_length=200)
    rules: list[LongText | RuleInput] = Field(min_length=1, max_length=500)
    rule_source: ShortText | None = None

    @model_validator(mode="after")
    def _unique(self) -> SurfaceInput:
        require_unique([t.name for t in self.tools], "tool name")
        require_unique(
            [r.rule_id for r in self.rules if isinstance(r, RuleInput) and r.rule_id], "ruleId"
        )
        return self


# --- recorded events (the credential-free lane) -----------------------------------------

MAX_RECORDED_EVENTS = 10_000


class RecordedDimension(Model):
    dimension_id: Id
    passed: bool | None = None
    score: Finite | None = None
    judge: Annotated[str, StringConstraints(max_length=200)] = ""


class RecordedEvent(Model):
    """An evaluation event as conformance reads it, in a file instead of the store."""

    event_id: Id
    surface_id: Id
    timestamp: Annotated[str, StringConstraints(max_length=40)]
    fixture_id: Annotated[str, StringConstraints(max_length=128)] = ""
    run_mode: RunMode = "test"
    markers: dict[Name, list[Annotated[str, StringConstraints(max_length=20000)]]] = Field(
        default_factory=dict, max_length=64
    )
    cohort_tags: list[ShortText] = Field(default_factory=list, max_length=64)
    latency_ms: NonNegative | None = None
    cost_usd: NonNegative | None = None
    dimensions: list[RecordedDimension] = Field(default_factory=list, max_length=64)

    @model_validator(mode="before")
    @classmethod
    def _string_markers(cls, data: Any) -> Any:
        # The wire allows a marker as one string; the store keeps it as a 1-element array.
        if isinstance(data, dict) and isinstance(data.get("markers"), dict):
            markers = {k: [v] if isinstance(v, str) else v for k, v in data["markers"].items()}
            data = {**data, "markers": markers}
        return data

    @model_validator(mode="after")
    def _unique(self) -> RecordedEvent:
        require_unique([d.dimension_id for d in self.dimensions], "dimensionId")
        return self


class RecordedEvents(Model):
    schema_: Literal["holonograph-recorded-events/v1"] = Field(alias="schema")
    events: list[RecordedEvent] = Field(max_length=MAX_RECORDED_EVENTS)

    @model_validator(mode="after")
    def _unique(self) -> RecordedEvents:
        require_unique([e.event_id for e in self.events], "eventId")
        return self


def finite_or_none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value
