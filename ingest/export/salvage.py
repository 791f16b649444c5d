"""Spans the decoder cannot read, kept one by one instead of failing their request.

upb parses a whole request in one call and refuses all of it when any part nests
deeper than its recursion limit (100 messages: a span attribute holding about 31
levels of kvlist, which OTLP allows) or holds a string that is not UTF-8;
`json_format` has the same limit. One such span must not cost the others. When the
whole parse fails, the request is read again with shallow message types whose
resources, scopes and spans are opaque bytes, each of those is parsed on its own,
and every span that still fails (or whose resource does) becomes an `UnparsedSpan`
that validation quarantines with its bytes and with what can be read of it (its
`head`: ids, name, times and every attribute that parses alone, so its
emission ordinal still counts as arrived). Only a body whose envelope cannot be
read is refused whole.

Unparsed spans travel inside the ordinary request object, so every stage keeps
taking one type: as an unknown field of the ScopeSpans they came in, under a field
number OTLP does not use. The request is marked with a per-process random token in
another such field, so unknown fields a client sent are never mistaken for ours.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError as PB2DecodeError
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope as PB2Scope
from opentelemetry.proto.common.v1.common_pb2 import KeyValue as PB2KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PB2Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans as PB2ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

# The largest field numbers protobuf allows; OTLP's messages number theirs from 1.
SALVAGED_FIELD = (1 << 29) - 1
UNPARSED_FIELD = (1 << 29) - 2
_TOKEN = os.urandom(16)

SPAN_REASON = (
    "span: not a decodable OTLP span (nested deeper than the decoder's limit of 100"
    " messages, a string that is not UTF-8, or corrupt bytes)"
)
RESOURCE_REASON = (
    "resource: not a decodable OTLP resource (nested deeper than the decoder's limit"
    " of 100 messages, a string that is not UTF-8, or corrupt bytes)"
)

_B, _S, _M, _F64, _BOOL = (
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    descriptor_pb2.FieldDescriptorProto.TYPE_FIXED64,
    descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
)
_ONE, _MANY = (
    descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
)
_SHAPES: dict[str, list[tuple[int, str, int, int, str]]] = {
    # The OTLP envelope with opaque parts (the same field numbers and wire types).
    "Request": [(1, "resource_spans", _M, _MANY, ".holonograph.salvage.ResourceSpans")],
    "ResourceSpans": [
        (1, "resource", _B, _ONE, ""),
        (2, "scope_spans", _M, _MANY, ".holonograph.salvage.ScopeSpans"),
    ],
    "ScopeSpans": [(1, "scope", _B, _ONE, ""), (2, "spans", _B, _MANY, "")],
    # What can be read of any span: ids, name, times, attributes with opaque values
    # (its events, links and status are skipped unparsed).
    "SpanHead": [
        (1, "trace_id", _B, _ONE, ""),
        (2, "span_id", _B, _ONE, ""),
        (5, "name", _B, _ONE, ""),
        (7, "start_time_unix_nano", _F64, _ONE, ""),
        (8, "end_time_unix_nano", _F64, _ONE, ""),
        (9, "attributes", _M, _MANY, ".holonograph.salvage.KeyValue"),
    ],
    "KeyValue": [(1, "key", _B, _ONE, ""), (2, "value", _B, _ONE, "")],
    # `head`: a serialized OTLP Span holding what could be read; `named`: its name
    # could be read (an empty one is a span named "", not a span of unknown name).
    "UnparsedSpan": [
        (1, "proto", _B, _ONE, ""),
        (2, "json", _B, _ONE, ""),
        (3, "reason", _S, _ONE, ""),
        (4, "head", _B, _ONE, ""),
        (5, "named", _BOOL, _ONE, ""),
    ],
}  # fmt: skip


def _message_classes() -> dict[str, Any]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="holonograph/salvage.proto", package="holonograph.salvage", syntax="proto3"
    )
    for name, fields in _SHAPES.items():
        message = proto.message_type.add(name=name)
        for number, field_name, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"holonograph.salvage.{name}")
        )
        for name in _SHAPES
    }


# Built at import from `_SHAPES` (generated classes are typed loosely: Any).
_CLASSES = _message_classes()
_Request, _SpanHead, UnparsedSpan = (
    _CLASSES["Request"],
    _CLASSES["SpanHead"],
    _CLASSES["UnparsedSpan"],
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _unknown_field(number: int, data: bytes) -> bytes:
    """A length-delimited field as it appears on the wire."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _parsed(kind: Callable[[], Any], raw: bytes) -> Any:
    """`raw` parsed as `kind`, or None when it cannot be."""
    message = kind()
    try:
        message.ParseFromString(raw)
    except PB2DecodeError:
        return None
    return message


def salvaged_request() -> PB2ExportTraceServiceRequest:
    """An empty request marked as salvaged, to be filled part by part."""
    request = PB2ExportTraceServiceRequest()
    request.MergeFromString(_unknown_field(SALVAGED_FIELD, _TOKEN))
    return request


def keep_unparsed(scope_spans: PB2ScopeSpans, unparsed: Any) -> None:
    """Carry an `UnparsedSpan` in the ScopeSpans it came in."""
    scope_spans.MergeFromString(_unknown_field(UNPARSED_FIELD, unparsed.SerializeToString()))


def salvage_protobuf(payload: bytes) -> PB2ExportTraceServiceRequest | None:
    """The request with every span that parses on its own, the others kept as
    unparsed spans; None when even the envelope cannot be read."""
    shallow = _parsed(_Request, payload)
    if shallow is None:
        return None
    request = salvaged_request()
    for shallow_resource_spans in shallow.resource_spans:
        resource_spans = request.resource_spans.add()
        resource = _parsed(PB2Resource, shallow_resource_spans.resource)
        if resource is not None:
            resource_spans.resource.CopyFrom(resource)
        for shallow_scope_spans in shallow_resource_spans.scope_spans:
            scope_spans = resource_spans.scope_spans.add()
            scope = _parsed(PB2Scope, shallow_scope_spans.scope)
            if scope is not None:  # nothing reads the scope: an unreadable one is dropped
                scope_spans.scope.CopyFrom(scope)
            for raw in shallow_scope_spans.spans:
                span = _parsed(PB2Span, raw) if resource is not None else None
                if span is not None:
                    scope_spans.spans.append(span)
                    continue
                reason = SPAN_REASON if resource is not None else RESOURCE_REASON
                keep_unparsed(scope_spans, _unparsed_protobuf(raw, reason))
    return request


def _unparsed_protobuf(raw: bytes, reason: str) -> Any:
    read = _parsed(_SpanHead, raw)
    shallow = read or _SpanHead()
    head = PB2Span(
        trace_id=shallow.trace_id,
        span_id=shallow.span_id,
        name=shallow.name.decode("utf-8", "replace"),
        start_time_unix_nano=shallow.start_time_unix_nano,
        end_time_unix_nano=shallow.end_time_unix_nano,
    )
    head_bytes = head.SerializeToString()
    for pair in shallow.attributes:
        attribute = _unknown_field(1, pair.key) + _unknown_field(2, pair.value)
        head_bytes += _attribute_in_span(attribute)
    return UnparsedSpan(proto=raw, reason=reason, head=head_bytes, named=read is not None)


def _attribute_in_span(attribute: bytes) -> bytes:
    """The Span field holding one KeyValue (its bytes), or nothing when that attribute
    cannot be read even in a span of its own (too deep, not UTF-8: what the reason
    names). Checked as the head will be parsed, so the head always parses."""
    field = _unknown_field(_SPAN_ATTRIBUTES, attribute)
    return field if _parsed(PB2Span, field) is not None else b""


_SPAN_ATTRIBUTES = 9


def json_into(document: Any, message: Message) -> str | None:
    """Parse an optional sub-document into `message`; the problem when it cannot be."""
    if document is None:
        return None
    parsed = type(message)()
    try:
        json_format.ParseDict(document, parsed, ignore_unknown_fields=True)
    except (
        json_format.ParseError,
        TypeError,
        ValueError,
        AttributeError,
        RecursionError,
        SystemError,  # upb, for an enum name holding a lone surrogate
    ) as err:
        return f"not a decodable OTLP/JSON {message.DESCRIPTOR.name}: {err}"
    message.CopyFrom(parsed)
    return None


def storable(text: str) -> str:
    """`text` as UTF-8 can hold it: a lone surrogate (a valid JSON escape such as
    `\\ud800`, never valid UTF-8) becomes that escape, so a name or reason quoting one
    is stored and answered, not refused by the store's encoder."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def unparsed_json(span_doc: Any, reason: str) -> Any:
    """An OTLP/JSON span document that cannot be read, with what can be of it. Its JSON
    text escapes what is not ASCII (lone surrogates included)."""
    try:
        text = json.dumps(span_doc, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError, RecursionError):
        text = b""
    return UnparsedSpan(
        json=text,
        reason=storable(reason),
        head=_json_head(span_doc),
        named=isinstance(span_doc, dict),
    )


def _json_head(span_doc: Any) -> bytes:
    """A serialized Span of what reads in `span_doc`."""
    doc = span_doc if isinstance(span_doc, dict) else {}
    head = PB2Span()
    name = doc.get("name")
    head.name = storable(name) if isinstance(name, str) else ""
    head.trace_id = _hex(doc.get("traceId", doc.get("trace_id")))
    head.span_id = _hex(doc.get("spanId", doc.get("span_id")))
    head.start_time_unix_nano = _nanos(
        doc.get("startTimeUnixNano", doc.get("start_time_unix_nano"))
    )
    head.end_time_unix_nano = _nanos(doc.get("endTimeUnixNano", doc.get("end_time_unix_nano")))
    head_bytes: bytes = head.SerializeToString()
    pairs = doc.get("attributes")
    for pair in pairs if isinstance(pairs, list) else []:
        kv = PB2KeyValue()
        if json_into(pair, kv) is None:
            head_bytes += _attribute_in_span(kv.SerializeToString())
    return head_bytes


def _hex(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return bytes.fromhex(value)
    except ValueError:
        return b""


def _nanos(value: Any) -> int:
    try:
        nanos = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else 0
    except ValueError:
        return 0
    return nanos if 0 <= nanos < 1 << 64 else 0


def unparsed_spans(scope_spans: PB2ScopeSpans) -> Iterator[Any]:
    """The `UnparsedSpan`s a ScopeSpans of a salvaged request carries."""
    for field in UnknownFieldSet(scope_spans):
        if field.field_number == UNPARSED_FIELD and field.wire_type == 2:
            yield UnparsedSpan.FromString(field.data)


def is_salvaged(request: PB2ExportTraceServiceRequest) -> bool:
    """True for a request built here (cheap: a request normally has no unknown fields)."""
    return any(
        field.field_number == SALVAGED_FIELD and field.data == _TOKEN
        for field in UnknownFieldSet(request)
    )
