"""What one OTLP span becomes after decoding: the models every later step shares.

An `EvaluationEvent` binds the Guide's four layers of one model call (substrate,
light source, lens, outcome) with the metadata that ties them together. Every
`holonograph.*` span, evaluation or sentinel, also yields an `EmissionRecord` for
delivery accounting; a span that fails validation yields a `QuarantineRecord`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue

RunMode = Literal["production", "test", "eval", "replay", "local_dev"]
Provenance = Literal["production-state", "exploratory-state"]

RUN_MODES: frozenset[str] = frozenset(get_args(RunMode))
PROVENANCES: frozenset[str] = frozenset(get_args(Provenance))
EmissionKind = Literal["evaluation", "sentinel"]

# The tenant of every row written by a receiver that runs without authentication.
DEFAULT_TENANT = "default"

EVALUATION_SPAN = "holonograph.evaluation"
SENTINEL_SPAN = "holonograph.session.sentinel"
# A human's correction of one call (`schemas.overrides`, docs/lessons.md).
OVERRIDE_SPAN = "holonograph.override"
DIMENSION_EVENT = "holonograph.dimension"
# An OpenTelemetry GenAI evaluation result (`schemas.genai`): the span event, log event
# or span of that name an event without emission ordinals comes from.
GENAI_RESULT = "gen_ai.evaluation.result"


def default_provenance(run_mode: str) -> Provenance:
    return "production-state" if run_mode == "production" else "exploratory-state"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DimensionResult(_Model):
    """One graded dimension; at least one of `passed` and `score` is set."""

    dimension_id: str = Field(min_length=1)
    passed: bool | None = None
    score: float | None = None
    expected: str = ""
    actual: str = ""
    judge: str = ""


class Substrate(_Model):
    """Deployment state at call time: the mandatory columns plus the operator's
    `holonograph.substrate.*` columns and diagnostic `column=value` cohort tags."""

    surface_id: str
    agent_id: str = ""
    run_mode: RunMode
    provenance: Provenance
    lens_version: str = ""
    light_source_id: str = ""
    columns: dict[str, str] = Field(default_factory=dict)
    diagnostic: dict[str, str] = Field(default_factory=dict)


class LightSource(_Model):
    """The model that answered, as served, and the alias asked for when it differs."""

    id: str = ""
    requested: str = ""


class Lens(_Model):
    """The evaluation configuration in effect."""

    version: str = ""
    fixture_id: str = ""


class Outcome(_Model):
    dimensions: tuple[DimensionResult, ...] = ()
    cohort_tags: tuple[str, ...] = ()
    markers: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    latency_ms: float | None = None
    cost_usd: float | None = None
    tokens_input: int | None = None
    tokens_output: int | None = None


class Emission(_Model):
    stream: str = Field(min_length=1)
    seq: int = Field(ge=0)
    final: bool = False


class EvaluationEvent(_Model):
    """One model call's evaluation. `emission` is its ordinal on the client's stream;
    None for an event that arrived without one (an OpenTelemetry GenAI evaluation:
    `schemas.genai`), which delivery accounting cannot count."""

    event_id: str = Field(min_length=1)
    surface_id: str = Field(min_length=1)
    agent_id: str = ""
    correlation_id: str = ""
    run_mode: RunMode
    provenance: Provenance
    timestamp: dt.datetime
    emission: Emission | None
    trace_id: str
    span_id: str
    substrate: Substrate
    light_source: LightSource
    lens: Lens
    outcome: Outcome
    multiplex_role: str = ""
    sdk_name: str = ""
    sdk_version: str = ""
    resource_attributes: dict[str, Any] = Field(default_factory=dict)
    extras: dict[str, Any] = Field(default_factory=dict)
    # What the receiver's contract check said (`ingest.export.contracts`): the version
    # checked against ('' = none) and findings such as `undeclared-dimension:tone`.
    contract_version_id: str = ""
    contract_findings: tuple[str, ...] = ()

    @property
    def stream(self) -> str:
        """Its emission stream; '' (never a stream's name) for an event without one."""
        return self.emission.stream if self.emission is not None else ""


class OverrideEvent(_Model):
    """A human's correction of one call, as it travels from the door to the store: from
    a `holonograph.override` span (with its ordinal and span ids) or `POST
    /hil/override` (without). Its values were checked at the door against the columns
    of `lesson_overrides` (`schemas.overrides.OverrideFields`); `event_id` is resolved
    (given, or a digest of the content) and `occurred_at` is at store precision."""

    event_id: str = Field(min_length=1)
    agent_id: str = Field(min_length=1)
    surface_id: str = Field(min_length=1)
    correlation_id: str = Field(min_length=1)
    run_mode: RunMode
    original_output: JsonValue
    corrected_output: JsonValue
    rationale: str = ""
    tags: tuple[str, ...] = ()
    occurred_at: dt.datetime
    emission: Emission | None = None
    trace_id: str = ""
    span_id: str = ""

    @property
    def stream(self) -> str:
        return self.emission.stream if self.emission is not None else ""


class SentinelCounters(_Model):
    """The client's own accounting for its last window, as a sentinel reports it."""

    interval_ms: int | None = None
    offered: int | None = None
    delivered: int | None = None
    dropped: int | None = None
    failed: int | None = None
    window_start: dt.datetime | None = None
    window_end: dt.datetime | None = None


class EmissionRecord(_Model):
    """One arrival of a (stream, seq); `quarantined` marks arrived-but-invalid."""

    stream: str = Field(min_length=1)
    seq: int = Field(ge=0)
    kind: EmissionKind
    final: bool = False
    quarantined: bool = False
    event_id: str = ""
    surface_id: str = ""
    event_time: dt.datetime
    sentinel: SentinelCounters | None = None


class QuarantineRecord(_Model):
    """A rejected span, its reason, and enough of the original to replay it."""

    quarantine_id: str
    reason: str
    span_name: str
    trace_id: str
    span_id: str
    emission_stream: str | None = None
    emission_seq: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    resource_attributes: dict[str, Any] = Field(default_factory=dict)
    span_proto: bytes = b""
    source: str = "receiver"


def decoded_quarantine(
    item: EvaluationEvent | EmissionRecord | OverrideEvent, reason: str
) -> QuarantineRecord:
    """A span rejected after decoding (at the store edge, where its bytes are no longer
    at hand), as the quarantine keeps it: the decoded event (or emission) as its
    attributes, nothing to replay, and a digest of that content as its id."""
    body = item.model_dump(mode="json")
    if isinstance(item, OverrideEvent):
        return QuarantineRecord(
            quarantine_id=hashlib.sha256(item.model_dump_json().encode()).hexdigest(),
            reason=reason,
            span_name=OVERRIDE_SPAN,
            trace_id=item.trace_id,
            span_id=item.span_id,
            emission_stream=item.emission.stream if item.emission else None,
            emission_seq=item.emission.seq if item.emission else None,
            attributes=body,
        )
    if isinstance(item, EvaluationEvent):
        return QuarantineRecord(
            quarantine_id=hashlib.sha256(item.model_dump_json().encode()).hexdigest(),
            reason=reason,
            span_name=EVALUATION_SPAN if item.emission is not None else GENAI_RESULT,
            trace_id=item.trace_id,
            span_id=item.span_id,
            emission_stream=item.emission.stream if item.emission else None,
            emission_seq=item.emission.seq if item.emission else None,
            attributes=body,
            resource_attributes=body.pop("resource_attributes"),
        )
    return QuarantineRecord(
        quarantine_id=hashlib.sha256(item.model_dump_json().encode()).hexdigest(),
        reason=reason,
        span_name=SENTINEL_SPAN if item.kind == "sentinel" else EVALUATION_SPAN,
        trace_id="",
        span_id="",
        emission_stream=item.stream,
        emission_seq=item.seq,
        attributes=body,
    )


class ValidatedBatch(_Model):
    """Everything one export request yields, ready to hand off. A request has one
    principal, so one tenant: `tenant_id` owns every row the batch becomes, and one
    agent set: `agents`, the agents it may write (None: any), which the streams it
    opens belong to (`ingest.store.owners`). `collapsed_spans` counts accepted spans
    stored within another span's event: identical to an earlier span of the request
    (same event id, same content), or a GenAI evaluation result of an operation whose
    event another span of the request carries."""

    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1)
    agents: frozenset[str] | None = None
    events: tuple[EvaluationEvent, ...] = ()
    emissions: tuple[EmissionRecord, ...] = ()
    quarantined: tuple[QuarantineRecord, ...] = ()
    overrides: tuple[OverrideEvent, ...] = ()
    ignored_spans: int = 0
    collapsed_spans: int = 0

    @property
    def rejected(self) -> int:
        return len(self.quarantined)
