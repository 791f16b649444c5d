"""Fail-closed validation: one OTLP span becomes an `EvaluationEvent` (or a sentinel)
with its `EmissionRecord`, or a `QuarantineRecord` saying exactly what was wrong.

Nothing is guessed: a missing or unknown run mode, a missing surface, stream or seq,
a dimension with no grade, a malformed id, a wrongly typed attribute or a value its
column cannot hold (`ingest.export.domain`) rejects the span. Unknown `holonograph.*`
attributes are kept in `extras`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span
from pydantic import ValidationError

from ingest.export.decode import attributes, jsonable
from ingest.export.domain import (
    TIME_RANGE,
    attributes_problem,
    float_problem,
    nanos_problem,
    time_problem,
)
from schemas.events import (
    DIMENSION_EVENT,
    EVALUATION_SPAN,
    OVERRIDE_SPAN,
    PROVENANCES,
    RUN_MODES,
    SENTINEL_SPAN,
    Emission,
    EmissionKind,
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
    SentinelCounters,
    default_provenance,
)
from schemas.overrides import OverrideFields, override_event

PREFIX = "holonograph."
SUBSTRATE_PREFIX = "holonograph.substrate."
MARKER_PREFIX = "holonograph.marker."
_SUBSTRATE_CUT = len(SUBSTRATE_PREFIX)
_MARKER_CUT = len(MARKER_PREFIX)

# The Guide's W3C Baggage keys, as a BaggageSpanProcessor copies them onto a worker's
# spans: other spellings of two span attributes, read by the same rules.
RUN_MODE_BAGGAGE = "holonograph.runmode"
CORRELATION_BAGGAGE = "holonograph.correlation-id"
_BAGGAGE_KEYS = frozenset({RUN_MODE_BAGGAGE, CORRELATION_BAGGAGE})
_EVALUATION_KEYS = _BAGGAGE_KEYS | frozenset(
    {
        "holonograph.event.id",
        "holonograph.surface.id",
        "holonograph.run_mode",
        "holonograph.emission.stream",
        "holonograph.emission.seq",
        "holonograph.emission.final",
        "holonograph.agent.id",
        "holonograph.correlation.id",
        "holonograph.provenance",
        "holonograph.lens.version",
        "holonograph.light_source.id",
        "holonograph.light_source.requested",
        "holonograph.cohort_tags",
        "holonograph.multiplex.role",
        "holonograph.fixture.id",
        "holonograph.latency_ms",
        "holonograph.cost.usd",
        "holonograph.tokens.input",
        "holonograph.tokens.output",
        "holonograph.sdk.name",
        "holonograph.sdk.version",
        "holonograph.timestamp",
    }
)
_SENTINEL_COUNTERS = ("offered", "delivered", "dropped", "failed")
OVERRIDE_PREFIX = "holonograph.override."
# Each output comes as a value (a string is the text itself; an array or kvlist, the
# JSON it maps to) or, for exporters that carry only primitive attributes, as JSON text.
_OUTPUTS = ("original_output", "corrected_output")
_OVERRIDE_KEYS = frozenset(
    {
        *(f"{OVERRIDE_PREFIX}{name}" for name in _OUTPUTS),
        *(f"{OVERRIDE_PREFIX}{name}_json" for name in _OUTPUTS),
        f"{OVERRIDE_PREFIX}rationale",
        f"{OVERRIDE_PREFIX}tags",
    }
)
# The attribute each field of `OverrideFields` is read from (named in a rejection).
_OVERRIDE_FIELD_KEYS = {
    "agent_id": "holonograph.agent.id",
    "surface_id": "holonograph.surface.id",
    "correlation_id": "holonograph.correlation.id",
    "original_output": f"{OVERRIDE_PREFIX}original_output",
    "corrected_output": f"{OVERRIDE_PREFIX}corrected_output",
    "rationale": f"{OVERRIDE_PREFIX}rationale",
    "tags": f"{OVERRIDE_PREFIX}tags",
    "event_id": "holonograph.event.id",
    "run_mode": "holonograph.run_mode",
    "at": "holonograph.timestamp",
}
# Every attribute the wire contract names: a rejection's reason starts with the one
# at fault (metrics count reasons by it, `ingest.metrics.reason_label`).
CONTRACT_ATTRIBUTES = (
    _EVALUATION_KEYS
    | _OVERRIDE_KEYS
    | frozenset(
        {
            *(f"holonograph.completeness.{name}" for name in _SENTINEL_COUNTERS),
            "holonograph.completeness.window_start",
            "holonograph.completeness.window_end",
            "holonograph.sentinel.interval_ms",
            *(
                f"holonograph.dimension.{name}"
                for name in ("id", "passed", "score", "expected", "actual", "judge")
            ),
        }
    )
)


class SpanRejected(Exception):
    """The span breaks the wire contract; the message names the attribute and why."""


def is_holonograph_span(name: str) -> bool:
    return name.startswith(PREFIX)


# --- typed attribute readers -------------------------------------------------------


def _string(attrs: dict[str, Any], key: str, required: bool = False) -> str:
    value = attrs.get(key)
    if value is None:
        if required:
            raise SpanRejected(f"{key}: missing")
        return ""
    if not isinstance(value, str):
        raise SpanRejected(f"{key}: expected a string, got {_type_name(value)}")
    if required and not value:
        raise SpanRejected(f"{key}: empty")
    return value


def _int(attrs: dict[str, Any], key: str) -> int | None:
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpanRejected(f"{key}: expected an int, got {_type_name(value)}")
    return value


def _float(attrs: dict[str, Any], key: str) -> float | None:
    """A double the contract reads; every one is stored, so NaN and ±Infinity reject."""
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpanRejected(f"{key}: expected a double, got {_type_name(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise SpanRejected(f"{key}: {float_problem(number)}")
    return number


def _bool(attrs: dict[str, Any], key: str) -> bool | None:
    value = attrs.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise SpanRejected(f"{key}: expected a bool, got {_type_name(value)}")
    return value


def _strings(attrs: dict[str, Any], key: str) -> tuple[str, ...]:
    value = attrs.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SpanRejected(f"{key}: expected a string or string array, got {_type_name(value)}")


def _type_name(value: Any) -> str:
    return {
        str: "string",
        bool: "bool",
        int: "int",
        float: "double",
        list: "array",
        dict: "kvlist",
        bytes: "bytes",
    }.get(type(value), type(value).__name__)


def _time_from_nanos(nanos: int) -> dt.datetime:
    seconds, rem = divmod(nanos, 1_000_000_000)
    return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=rem // 1000)


def _rfc3339(key: str, text: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise SpanRejected(f"{key}: {text!r} is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise SpanRejected(f"{key}: {text!r} has no UTC offset")
    outside = f"{key}: {text!r} is outside the times the store holds ({TIME_RANGE})"
    try:
        utc = parsed.astimezone(dt.UTC)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it: no datetime holds it
        raise SpanRejected(outside) from None
    if time_problem(utc) is not None:
        raise SpanRejected(outside)
    return utc


# --- pieces shared by both span kinds -----------------------------------------------


def _ids(span: PB2Span) -> tuple[str, str]:
    trace_id, span_id = span.trace_id, span.span_id  # each read copies the bytes
    if len(trace_id) != 16 or not any(trace_id):
        raise SpanRejected(f"trace_id: must be 16 non-zero bytes, got {len(trace_id)} bytes")
    if len(span_id) != 8 or not any(span_id):
        raise SpanRejected(f"span_id: must be 8 non-zero bytes, got {len(span_id)} bytes")
    return trace_id.hex(), span_id.hex()


def _emission(attrs: dict[str, Any]) -> dict[str, Any]:
    stream = _string(attrs, "holonograph.emission.stream", required=True)
    seq = _int(attrs, "holonograph.emission.seq")
    if seq is None:
        raise SpanRejected("holonograph.emission.seq: missing")
    if seq < 0:
        raise SpanRejected(f"holonograph.emission.seq: must be >= 0, got {seq}")
    final = _bool(attrs, "holonograph.emission.final") or False
    return {"stream": stream, "seq": seq, "final": final}


def _timestamp(span: PB2Span, attrs: dict[str, Any]) -> dt.datetime:
    value = attrs.get("holonograph.timestamp")
    if value is None:
        end = span.end_time_unix_nano
        if end == 0:
            raise SpanRejected("end_time_unix_nano: 0 and no holonograph.timestamp")
        problem = nanos_problem(end)
        if problem is not None:
            raise SpanRejected(f"end_time_unix_nano: {problem}")
        return _time_from_nanos(end)
    if isinstance(value, str):
        return _rfc3339("holonograph.timestamp", value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return _time_from_nanos(value)
    raise SpanRejected(
        f"holonograph.timestamp: expected RFC 3339 string or unix nanos, got {value!r}"
    )


def derive_event_id(stream: str, seq: int) -> str:
    """Stable id for an event sent without `holonograph.event.id`."""
    digest = hashlib.sha256(f"{stream}\x00{seq}".encode()).hexdigest()
    return f"evt_d_{digest[:24]}"


# --- evaluation spans ----------------------------------------------------------------


def _dimension(event: PB2Span.Event, index: int) -> dict[str, Any]:
    attrs = attributes(event.attributes)
    try:
        dimension_id = _string(attrs, "holonograph.dimension.id", required=True)
        passed = _bool(attrs, "holonograph.dimension.passed")
        score = _float(attrs, "holonograph.dimension.score")
        if passed is None and score is None:
            raise SpanRejected(
                f"dimension {dimension_id!r}: neither holonograph.dimension.passed"
                " nor holonograph.dimension.score"
            )
        return {
            "dimension_id": dimension_id,
            "passed": passed,
            "score": score,
            "expected": _string(attrs, "holonograph.dimension.expected"),
            "actual": _string(attrs, "holonograph.dimension.actual"),
            "judge": _string(attrs, "holonograph.dimension.judge"),
        }
    except SpanRejected as err:
        raise SpanRejected(f"event {index} ({DIMENSION_EVENT}): {err}") from None


def _dimensions(span: PB2Span) -> list[dict[str, Any]]:
    results = []
    seen: set[str] = set()
    for index, event in enumerate(span.events):
        if event.name != DIMENSION_EVENT:
            continue
        result = _dimension(event, index)
        dimension_id = result["dimension_id"]
        if dimension_id in seen:
            raise SpanRejected(f"event {index}: dimension {dimension_id!r} graded twice")
        seen.add(dimension_id)
        results.append(result)
    return results


def _spelled(attrs: dict[str, Any], key: str, baggage: str) -> tuple[str | None, str]:
    """A string attribute that may also come in its baggage spelling: (the key that
    carries it, None when neither does; its value). Both present must agree: two
    different run modes (or correlation ids) on one span leave nothing to trust."""
    if baggage not in attrs:  # the usual span: one lookup more
        return (key if key in attrs else None), _string(attrs, key)
    other = _string(attrs, baggage)
    if key not in attrs:
        return baggage, other
    value = _string(attrs, key)
    if value != other:
        raise SpanRejected(f"{baggage}: {other!r} differs from {key} {value!r}")
    return key, value


def _run_mode(attrs: dict[str, Any]) -> str:
    key, run_mode = _spelled(attrs, "holonograph.run_mode", RUN_MODE_BAGGAGE)
    if key is None:
        raise SpanRejected("holonograph.run_mode: missing")
    if not run_mode:
        raise SpanRejected(f"{key}: empty")
    if run_mode not in RUN_MODES:
        allowed = "|".join(sorted(RUN_MODES))
        raise SpanRejected(f"{key}: {run_mode!r} is not one of {allowed}")
    return run_mode


def _provenance(attrs: dict[str, Any], run_mode: str) -> str:
    provenance = _string(attrs, "holonograph.provenance")
    if not provenance:
        return default_provenance(run_mode)
    if provenance not in PROVENANCES:
        raise SpanRejected(
            f"holonograph.provenance: {provenance!r} is not production-state or exploratory-state"
        )
    return provenance


def _open_ended(
    attrs: dict[str, Any],
) -> tuple[dict[str, str], dict[str, tuple[str, ...]], dict[str, Any]]:
    """Substrate columns, markers and unknown `holonograph.*` extras, in one pass."""
    columns: dict[str, str] = {}
    markers: dict[str, tuple[str, ...]] = {}
    extras: dict[str, Any] = {}
    for key, value in attrs.items():
        if not key.startswith(PREFIX) or key in _EVALUATION_KEYS:
            continue
        if key.startswith(SUBSTRATE_PREFIX):
            columns[key[_SUBSTRATE_CUT:]] = _string(attrs, key)
        elif key.startswith(MARKER_PREFIX):
            markers[key[_MARKER_CUT:]] = _strings(attrs, key)
        else:
            extras[key] = jsonable(value)
    if extras:
        problem = attributes_problem(extras)
        if problem is not None:
            raise SpanRejected(problem)
    return columns, markers, extras


def _diagnostic_columns(tags: tuple[str, ...]) -> dict[str, str]:
    return dict(tag.split("=", 1) for tag in tags if "=" in tag)


def evaluation_event(
    span: PB2Span, attrs: dict[str, Any], resource: dict[str, Any]
) -> EvaluationEvent:
    """Check every rule of the contract, then validate the whole event in one pydantic
    call (one pass through its core instead of one per nested model). `resource`
    must already be JSON-safe; a request's events share it."""
    trace_id, span_id = _ids(span)
    emission = _emission(attrs)
    run_mode = _run_mode(attrs)
    surface_id = _string(attrs, "holonograph.surface.id", required=True)
    event_id = _string(attrs, "holonograph.event.id") or derive_event_id(
        emission["stream"], emission["seq"]
    )
    agent_id = _string(attrs, "holonograph.agent.id")
    provenance = _provenance(attrs, run_mode)
    lens_version = _string(attrs, "holonograph.lens.version")
    light_source_id = _string(attrs, "holonograph.light_source.id")
    cohort_tags = _strings(attrs, "holonograph.cohort_tags")
    _, correlation_id = _spelled(attrs, "holonograph.correlation.id", CORRELATION_BAGGAGE)
    timestamp = _timestamp(span, attrs)
    columns, markers, extras = _open_ended(attrs)
    return EvaluationEvent.model_validate(
        {
            "event_id": event_id,
            "surface_id": surface_id,
            "agent_id": agent_id,
            "correlation_id": correlation_id,
            "run_mode": run_mode,
            "provenance": provenance,
            "timestamp": timestamp,
            "emission": emission,
            "trace_id": trace_id,
            "span_id": span_id,
            "substrate": {
                "surface_id": surface_id,
                "agent_id": agent_id,
                "run_mode": run_mode,
                "provenance": provenance,
                "lens_version": lens_version,
                "light_source_id": light_source_id,
                "columns": columns,
                "diagnostic": _diagnostic_columns(cohort_tags),
            },
            "light_source": {
                "id": light_source_id,
                "requested": _string(attrs, "holonograph.light_source.requested"),
            },
            "lens": {
                "version": lens_version,
                "fixture_id": _string(attrs, "holonograph.fixture.id"),
            },
            "outcome": {
                "dimensions": _dimensions(span),
                "cohort_tags": cohort_tags,
                "markers": markers,
                "latency_ms": _float(attrs, "holonograph.latency_ms"),
                "cost_usd": _float(attrs, "holonograph.cost.usd"),
                "tokens_input": _int(attrs, "holonograph.tokens.input"),
                "tokens_output": _int(attrs, "holonograph.tokens.output"),
            },
            "multiplex_role": _string(attrs, "holonograph.multiplex.role"),
            "sdk_name": _string(attrs, "holonograph.sdk.name"),
            "sdk_version": _string(attrs, "holonograph.sdk.version"),
            "resource_attributes": resource,
            "extras": extras,
        }
    )


# --- overrides -----------------------------------------------------------------------


def _output(attrs: dict[str, Any], name: str) -> Any:
    key = f"{OVERRIDE_PREFIX}{name}"
    as_json = f"{key}_json"
    if key in attrs and as_json in attrs:
        raise SpanRejected(f"{as_json}: {key} is set too; send the output once")
    if as_json in attrs:
        text = _string(attrs, as_json)
        try:
            return json.loads(text)
        except ValueError as err:
            raise SpanRejected(f"{as_json}: not JSON text ({err})") from None
    if key not in attrs:
        raise SpanRejected(f"{key}: missing (or {as_json})")
    value = jsonable(attrs[key])
    problem = attributes_problem({key: value})
    if problem is not None:
        raise SpanRejected(problem)
    return value


def override_span(span: PB2Span, attrs: dict[str, Any]) -> OverrideEvent:
    """A `holonograph.override` span: its values read into the fields `POST
    /hil/override` takes (`schemas.overrides.OverrideFields`, the same domains), with
    its ordinal and span ids. Unknown `holonograph.override.*` attributes reject it (a
    misspelt rationale is not silently lost); other attributes are not stored."""
    trace_id, span_id = _ids(span)
    emission = _emission(attrs)
    for key in attrs:
        if key.startswith(OVERRIDE_PREFIX) and key not in _OVERRIDE_KEYS:
            raise SpanRejected(f"{key}: not an attribute of {OVERRIDE_SPAN}")
    _, correlation_id = _spelled(attrs, "holonograph.correlation.id", CORRELATION_BAGGAGE)
    body = {
        "agent_id": _string(attrs, "holonograph.agent.id", required=True),
        "surface_id": _string(attrs, "holonograph.surface.id", required=True),
        "correlation_id": correlation_id
        or _string(attrs, "holonograph.correlation.id", required=True),
        "run_mode": _run_mode(attrs),
        "original_output": _output(attrs, "original_output"),
        "corrected_output": _output(attrs, "corrected_output"),
        "rationale": _string(attrs, f"{OVERRIDE_PREFIX}rationale"),
        "tags": _strings(attrs, f"{OVERRIDE_PREFIX}tags"),
        "at": _timestamp(span, attrs),
    }
    event_id = _string(attrs, "holonograph.event.id")
    if event_id:
        body["event_id"] = event_id
    try:
        fields = OverrideFields.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        field, *inner = [str(p) for p in first["loc"]] or ["span"]
        where = _OVERRIDE_FIELD_KEYS.get(field, field)
        item = f" item {'.'.join(inner)}:" if inner else ""
        raise SpanRejected(f"{where}:{item} {first['msg']}") from None
    record = Emission(**emission)
    return override_event(fields, fields.at or dt.datetime.now(dt.UTC), record, trace_id, span_id)


# --- sentinels -----------------------------------------------------------------------


def sentinel_record(span: PB2Span, attrs: dict[str, Any]) -> EmissionRecord:
    _ids(span)
    emission = _emission(attrs)
    window = {}
    for edge in ("start", "end"):
        key = f"holonograph.completeness.window_{edge}"
        text = _string(attrs, key)
        window[edge] = _rfc3339(key, text) if text else None
    interval_ms = _int(attrs, "holonograph.sentinel.interval_ms")
    if interval_ms is not None and interval_ms < 0:  # a UInt64 column
        raise SpanRejected(f"holonograph.sentinel.interval_ms: must be >= 0, got {interval_ms}")
    counters = SentinelCounters(
        interval_ms=interval_ms,
        window_start=window["start"],
        window_end=window["end"],
        **{name: _int(attrs, f"holonograph.completeness.{name}") for name in _SENTINEL_COUNTERS},
    )
    return EmissionRecord(
        stream=emission["stream"],
        seq=emission["seq"],
        kind="sentinel",
        final=emission["final"],
        event_time=_timestamp(span, attrs),
        sentinel=counters,
    )


def emission_of(event: EvaluationEvent | OverrideEvent) -> EmissionRecord:
    """The arrival of an event with an ordinal (a holonograph span's); an override's is
    counted on its stream like an evaluation's, under its event id."""
    emission = event.emission
    assert emission is not None, "an event without ordinals has no arrival"
    time = event.occurred_at if isinstance(event, OverrideEvent) else event.timestamp
    return EmissionRecord(
        stream=emission.stream,
        seq=emission.seq,
        kind="evaluation",
        final=emission.final,
        event_id=event.event_id,
        surface_id=event.surface_id,
        event_time=time,
    )


# --- rejection -----------------------------------------------------------------------


def quarantine_record(
    span: PB2Span, attrs: dict[str, Any], resource: dict[str, Any], reason: str, source: str
) -> QuarantineRecord:
    span_bytes = span.SerializeToString(deterministic=True)
    resource_json = json.dumps(jsonable(resource), sort_keys=True)
    quarantine_id = hashlib.sha256(resource_json.encode() + b"\x00" + span_bytes).hexdigest()
    stream, seq = _arrived_ordinal(attrs)
    return QuarantineRecord(
        quarantine_id=quarantine_id,
        reason=reason,
        span_name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        emission_stream=stream,
        emission_seq=seq,
        attributes={k: jsonable(v) for k, v in attrs.items()},
        resource_attributes={k: jsonable(v) for k, v in resource.items()},
        span_proto=span_bytes,
        source=source,
    )


def unparsed_record(
    unparsed: Any, head: PB2Span, attrs: dict[str, Any], resource: dict[str, Any], source: str
) -> QuarantineRecord:
    """A span the decoder could not read (`ingest.export.salvage.UnparsedSpan`): its reason,
    what could be read of it (`head`, with `attrs` its attributes), and its bytes when
    it came as protobuf (an OTLP/JSON one cannot be replayed)."""
    resource_json = json.dumps(jsonable(resource), sort_keys=True)
    original = unparsed.proto or unparsed.json
    quarantine_id = hashlib.sha256(resource_json.encode() + b"\x00" + original).hexdigest()
    stream, seq = _arrived_ordinal(attrs)
    return QuarantineRecord(
        quarantine_id=quarantine_id,
        reason=unparsed.reason,
        span_name=head.name,
        trace_id=head.trace_id.hex(),
        span_id=head.span_id.hex(),
        emission_stream=stream,
        emission_seq=seq,
        attributes={k: jsonable(v) for k, v in attrs.items()},
        resource_attributes={k: jsonable(v) for k, v in resource.items()},
        span_proto=unparsed.proto,
        source=source,
    )


def _arrived_ordinal(attrs: dict[str, Any]) -> tuple[str | None, int | None]:
    """The (stream, seq) of a rejected span when both are valid: it arrived, no gap."""
    stream = attrs.get("holonograph.emission.stream")
    seq = attrs.get("holonograph.emission.seq")
    valid_seq = isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0
    if isinstance(stream, str) and stream and valid_seq:
        return stream, seq
    return None, None


def quarantined_emission(
    record: QuarantineRecord, span: PB2Span, attrs: dict[str, Any]
) -> EmissionRecord | None:
    if record.emission_stream is None or record.emission_seq is None:
        return None
    kind: EmissionKind = "sentinel" if span.name == SENTINEL_SPAN else "evaluation"
    final = attrs.get("holonograph.emission.final") is True
    surface = attrs.get("holonograph.surface.id")
    end = span.end_time_unix_nano
    # The arrival is what counts here: an end time the store cannot hold (maybe the
    # very reason for the rejection) is replaced by the time of arrival.
    usable = end != 0 and nanos_problem(end) is None
    event_time = _time_from_nanos(end) if usable else dt.datetime.now(dt.UTC)
    return EmissionRecord(
        stream=record.emission_stream,
        seq=record.emission_seq,
        kind=kind,
        final=final,
        quarantined=True,
        surface_id=surface if isinstance(surface, str) else "",
        event_time=event_time,
    )


__all__ = [
    "CONTRACT_ATTRIBUTES",
    "EVALUATION_SPAN",
    "OVERRIDE_SPAN",
    "SENTINEL_SPAN",
    "SpanRejected",
    "emission_of",
    "evaluation_event",
    "is_holonograph_span",
    "override_span",
    "quarantine_record",
    "quarantined_emission",
    "sentinel_record",
    "unparsed_record",
]
