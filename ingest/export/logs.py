"""OTLP logs -> the GenAI evaluation results they carry, as the export path reads them.

A log record whose event name is `gen_ai.evaluation.result` (OTLP's `event_name`; from
SDKs older than that field, the `event.name` attribute) is one evaluation result of the
operation its trace and span ids name. The conventions give the same result a span
form: a span of that name, parented to the operation span, holding the attributes. A
log record is read as that span (`as_spans`), so one export path validates, maps,
quarantines and replays both (`ingest.export.genai`). Every other log record is counted
and ignored, as a span that is not Holonograph's is.

Bodies are parsed as the traces' are: protobuf, or OTLP/JSON (lowerCamelCase keys, hex
trace and span ids, unknown fields ignored); a body that does not parse is refused
whole (there is no per-record salvage for logs).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from google.protobuf import json_format
from google.protobuf.message import DecodeError as PB2DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest as PB2ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PB2LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.errors import DecodeError
from ingest.export.decode import _JSON_ERRORS, _hex_ids_to_base64, _json_document, _list
from schemas.genai import EVALUATION_RESULT, LEGACY_EVENT_NAME


def parse_logs_protobuf(payload: bytes) -> PB2ExportLogsServiceRequest:
    request = PB2ExportLogsServiceRequest()
    try:
        request.ParseFromString(payload)
    except PB2DecodeError as err:
        raise DecodeError(f"body is not a protobuf ExportLogsServiceRequest: {err}") from None
    return request


def parse_logs_json(payload: bytes) -> PB2ExportLogsServiceRequest:
    """OTLP/JSON: lowerCamelCase keys, hex trace/span ids, enums as integers, int64 as
    string or number; unknown fields are ignored."""
    document = _json_document(payload)
    request = PB2ExportLogsServiceRequest()
    try:
        for resource_logs in _list(document, "resourceLogs", "resource_logs"):
            for scope_logs in _list(resource_logs, "scopeLogs", "scope_logs"):
                for record in _list(scope_logs, "logRecords", "log_records"):
                    if not isinstance(record, dict):
                        raise DecodeError(
                            f"a log record must be a JSON object, got {type(record).__name__}"
                        )
                    _hex_ids_to_base64(record, ("traceId", "trace_id"), ("spanId", "span_id"))
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except _JSON_ERRORS as err:
        raise DecodeError(f"body is not an OTLP/JSON ExportLogsServiceRequest: {err}") from None
    return request


def is_evaluation_result(record: PB2LogRecord) -> bool:
    if record.event_name:
        return record.event_name == EVALUATION_RESULT
    return any(
        kv.key == LEGACY_EVENT_NAME and kv.value.string_value == EVALUATION_RESULT
        for kv in record.attributes
    )


def record_count(request: PB2ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


@dataclass
class LogsAsSpans:
    """A logs request read as a traces request of its evaluation results: `records`
    log records in all, `ignored` of them not evaluation results; `names[span id]`
    says which log record a span stands for, for the answer."""

    request: PB2ExportTraceServiceRequest
    records: int = 0
    ignored: int = 0
    names: dict[str, str] = field(default_factory=dict)


def as_spans(request: PB2ExportLogsServiceRequest) -> LogsAsSpans:
    """Each evaluation result as its span form, under the same resource and scope."""
    out = LogsAsSpans(PB2ExportTraceServiceRequest())
    for resource_logs in request.resource_logs:
        resource_spans = out.request.resource_spans.add()
        resource_spans.resource.CopyFrom(resource_logs.resource)
        resource_spans.schema_url = resource_logs.schema_url
        for scope_logs in resource_logs.scope_logs:
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.CopyFrom(scope_logs.scope)
            scope_spans.schema_url = scope_logs.schema_url
            for record in scope_logs.log_records:
                index = out.records
                out.records += 1
                if not is_evaluation_result(record):
                    out.ignored += 1
                    continue
                span = result_span(record)
                scope_spans.spans.append(span)
                out.names[span.span_id.hex()] = f"log record {index} ({EVALUATION_RESULT})"
    return out


def result_span(record: PB2LogRecord) -> PB2Span:
    """A log record's evaluation result in its span form: named `gen_ai.evaluation.result`,
    in the record's trace, parented to the record's span (the operation's), at the
    record's time, with its attributes. Its own span id is derived from the record, so
    a retried record is the same span (and the same quarantine row)."""
    time_ns = record.time_unix_nano or record.observed_time_unix_nano
    digest = hashlib.sha256(record.SerializeToString(deterministic=True)).digest()
    span_id = digest[:8] if any(digest[:8]) else b"\x00" * 7 + b"\x01"
    span = PB2Span(
        trace_id=record.trace_id,
        span_id=span_id,
        parent_span_id=record.span_id,
        name=EVALUATION_RESULT,
        kind=PB2Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=time_ns,
        end_time_unix_nano=time_ns,
    )
    span.attributes.extend(kv for kv in record.attributes if kv.key != LEGACY_EVENT_NAME)
    return span


__all__ = [
    "LogsAsSpans",
    "as_spans",
    "is_evaluation_result",
    "parse_logs_json",
    "parse_logs_protobuf",
    "record_count",
    "result_span",
]
