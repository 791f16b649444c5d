"""Overrides: a human's correction of one call, and the one place its values are checked
and its `lesson_overrides` row is built.

An override arrives as `POST /hil/override` (`processors.lessons.overrides`) or as the
OTLP span `holonograph.override` (`ingest.export.validate`, schemas/WIRE.md). Both
read their values into `OverrideFields` (the column domains, checked at the door),
resolve it into one `OverrideEvent` (`override_event`: the event id given, else a
digest of the content, so a plain retry is a re-send) and store it as one `Override`
row (`stored_override`). The same content gives the same row either way, but for how
it came (`source`, the span's ordinal) and when it was recorded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    field_validator,
)
from pydantic.alias_generators import to_camel

from schemas.changes import store_moment
from schemas.contracts import Id
from schemas.events import Emission, OverrideEvent, RunMode
from schemas.tables import LESSON_OVERRIDES
from schemas.utctime import UtcTime

# What one override may hold: the store takes any String, the limits keep one person's
# paste from becoming every reader's problem (checked at the door, named in the error).
MAX_OUTPUT_CHARS = 64 * 1024
MAX_TAGS = 50
Tag = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]
Rationale = Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)]
Source = Literal["http", "otlp"]


def canonical(value: Any) -> str:
    """Key-sorted compact JSON: equal documents have equal text (and digest)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(value).encode()).hexdigest()


def short_id(prefix: str, value: Any, length: int = 24) -> str:
    """`prefix_<hex>`: an id that is a function of `value` (the same input, the same id)."""
    return f"{prefix}_{hashlib.sha256(canonical(value).encode()).hexdigest()[:length]}"


def to_millisecond(moment: dt.datetime) -> dt.datetime:
    """Aware UTC at the store's millisecond precision: an answer says what a read will."""
    moment = moment.astimezone(dt.UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class OverrideFields(BaseModel):
    """What an override says, by the Guide's camelCase names (or field names): the
    POST /hil/override body, and what a `holonograph.override` span's attributes are
    read into."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    agent_id: Id = Field(description="The agent whose output was corrected.")
    surface_id: Id = Field(description="The surface of the corrected call.")
    correlation_id: Id = Field(description="The call's correlationId (its evaluation events').")
    original_output: JsonValue = Field(description="What the system produced.")
    corrected_output: JsonValue = Field(description="What the human sent instead.")
    rationale: Rationale = Field("", description="Why the human corrected it.")
    tags: tuple[Tag, ...] = Field(
        (), max_length=MAX_TAGS, description="e.g. fix_tier=tool-input-schema."
    )
    event_id: Id | None = Field(
        None, description="The idempotency key (default: a function of the content)."
    )
    run_mode: RunMode = Field("production", description="The run mode of the corrected call.")
    at: UtcTime | None = Field(None, description="When the human corrected it (default: now).")

    @field_validator("original_output", "corrected_output")
    @classmethod
    def _bounded(cls, value: JsonValue) -> JsonValue:
        if len(canonical(value)) > MAX_OUTPUT_CHARS:
            raise ValueError(f"longer than {MAX_OUTPUT_CHARS} characters as JSON")
        return value

    @field_validator("at")
    @classmethod
    def _moment(cls, value: dt.datetime | None) -> dt.datetime | None:
        return None if value is None else store_moment(value)

    @field_validator("tags")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))


def content_of(
    agent_id: str, surface_id: str, correlation_id: str, run_mode: str,
    original: Any, corrected: Any, rationale: str, tags: tuple[str, ...],
) -> dict[str, Any]:  # fmt: skip
    """What a re-send repeats: the digest and the default event id are of this."""
    return {
        "agentId": agent_id, "surfaceId": surface_id, "correlationId": correlation_id,
        "runMode": run_mode, "originalOutput": original, "correctedOutput": corrected,
        "rationale": rationale, "tags": sorted(tags),
    }  # fmt: skip


def _content(fields: OverrideFields | OverrideEvent) -> dict[str, Any]:
    return content_of(
        fields.agent_id, fields.surface_id, fields.correlation_id, fields.run_mode,
        fields.original_output, fields.corrected_output, fields.rationale, fields.tags,
    )  # fmt: skip


def override_event(
    fields: OverrideFields, now: dt.datetime, emission: Emission | None = None,
    trace_id: str = "", span_id: str = "",
) -> OverrideEvent:  # fmt: skip
    """The override `fields` say, its id resolved and its time (`at`, else `now`) at
    store precision."""
    return OverrideEvent(
        event_id=fields.event_id or short_id("ovr", _content(fields)),
        agent_id=fields.agent_id,
        surface_id=fields.surface_id,
        correlation_id=fields.correlation_id,
        run_mode=fields.run_mode,
        original_output=fields.original_output,
        corrected_output=fields.corrected_output,
        rationale=fields.rationale,
        tags=fields.tags,
        occurred_at=to_millisecond(fields.at or now),
        emission=emission,
        trace_id=trace_id,
        span_id=span_id,
    )


def content_digest(event: OverrideEvent) -> str:
    """Tells a re-send (the same digest) from another override reusing its id."""
    return digest(_content(event))


@dataclass(frozen=True)
class Override:
    """One stored override (a row of `lesson_overrides`)."""

    tenant_id: str
    event_id: str
    agent_id: str
    surface_id: str
    correlation_id: str
    run_mode: str
    original_output: Any
    corrected_output: Any
    rationale: str
    tags: tuple[str, ...]
    source: Source
    emission_stream: str
    emission_seq: int
    content_digest: str
    occurred_at: dt.datetime
    recorded_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "agentId": self.agent_id,
            "surfaceId": self.surface_id,
            "correlationId": self.correlation_id,
            "runMode": self.run_mode,
            "originalOutput": self.original_output,
            "correctedOutput": self.corrected_output,
            "rationale": self.rationale,
            "tags": list(self.tags),
            "source": self.source,
            "contentDigest": self.content_digest,
            "at": self.occurred_at,
            "recordedAt": self.recorded_at,
        }

    def row(self) -> list[Any]:
        values = {
            **self.__dict__,
            "original_output": canonical(self.original_output),
            "corrected_output": canonical(self.corrected_output),
            "tags": list(self.tags),
        }
        return [values[column] for column in LESSON_OVERRIDES.columns]


def stored_override(
    event: OverrideEvent, tenant: str, source: Source, recorded_at: dt.datetime
) -> Override:
    """The row `event` is stored as, for `tenant`, recorded at `recorded_at`."""
    emission = event.emission
    return Override(
        tenant_id=tenant,
        event_id=event.event_id,
        agent_id=event.agent_id,
        surface_id=event.surface_id,
        correlation_id=event.correlation_id,
        run_mode=event.run_mode,
        original_output=event.original_output,
        corrected_output=event.corrected_output,
        rationale=event.rationale,
        tags=event.tags,
        source=source,
        emission_stream=emission.stream if emission is not None else "",
        emission_seq=emission.seq if emission is not None else 0,
        content_digest=content_digest(event),
        occurred_at=event.occurred_at,
        recorded_at=to_millisecond(recorded_at),
    )
