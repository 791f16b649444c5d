"""Turn request bytes into an OTLP `ExportTraceServiceRequest` and attribute values
into Python values. Nothing here knows about holonograph semantics (see validate).

Limits apply after decompression: a gzip body is inflated in bounded steps and
refused as soon as it passes `max_bytes`, so a gzip bomb never reaches memory.

A span the decoder cannot read (nested past its recursion limit, not UTF-8) costs
only itself: the request is read again span by span (`ingest.export.salvage`) and that span
is quarantined. Only a body whose envelope is unreadable is refused whole.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError as PB2DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue as PB2AnyValue
from opentelemetry.proto.common.v1.common_pb2 import KeyValue as PB2KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.errors import DecodeError, PayloadTooLarge, UnsupportedMediaType
from ingest.export.salvage import (
    json_into,
    keep_unparsed,
    salvage_protobuf,
    salvaged_request,
    unparsed_json,
)

_CHUNK = 1 << 16


def gunzip_bounded(body: bytes, max_bytes: int) -> bytes:
    """Inflate a gzip body, refusing once the output would exceed `max_bytes`."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = bytearray()
    data = body
    try:
        while data:
            out += inflater.decompress(data, _CHUNK)
            if len(out) > max_bytes:
                raise PayloadTooLarge(f"request exceeds {max_bytes} bytes after gzip decompression")
            data = inflater.unconsumed_tail
        out += inflater.flush()
    except zlib.error as err:
        raise DecodeError(f"gzip body is corrupt: {err}") from None
    if len(out) > max_bytes:
        raise PayloadTooLarge(f"request exceeds {max_bytes} bytes after gzip decompression")
    if not inflater.eof:
        raise DecodeError("gzip body is truncated")
    return bytes(out)


def decode_body(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"request of {len(body)} bytes exceeds {max_bytes} bytes")
        return body
    if encoding == "gzip":
        return gunzip_bounded(body, max_bytes)
    raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported (use gzip)")


def parse_protobuf(payload: bytes) -> PB2ExportTraceServiceRequest:
    request = PB2ExportTraceServiceRequest()
    try:
        request.ParseFromString(payload)
    except PB2DecodeError as err:
        salvaged = salvage_protobuf(payload)
        if salvaged is None:
            raise DecodeError(f"body is not a protobuf ExportTraceServiceRequest: {err}") from None
        return salvaged
    return request


def parse_json(payload: bytes) -> PB2ExportTraceServiceRequest:
    """OTLP/JSON: lowerCamelCase keys, hex trace/span ids, enums as integers,
    int64 as string or number; unknown fields are ignored."""
    document = _json_document(payload)
    try:
        for span in _span_documents(document):
            _span_ids_to_base64(span)
        request = PB2ExportTraceServiceRequest()
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
        return request
    except (DecodeError, *_JSON_ERRORS):
        # Some part is wrong: find which, one span at a time, on a fresh copy (the ids
        # of some spans were converted in place already).
        return _salvage_json(_json_document(payload))


# What json_format raises for a document that is not the message it should be (upb
# raises SystemError for an enum name holding a lone surrogate).
_JSON_ERRORS = (
    json_format.ParseError,
    TypeError,
    ValueError,
    AttributeError,
    RecursionError,
    SystemError,
)


def _json_document(payload: bytes) -> dict[str, Any]:
    try:
        document = json.loads(payload)
    except (UnicodeDecodeError, ValueError) as err:
        raise DecodeError(f"body is not valid JSON: {err}") from None
    except RecursionError:
        raise DecodeError("body is not valid JSON: nested too deeply to parse") from None
    if not isinstance(document, dict):
        raise DecodeError("OTLP/JSON body must be a JSON object")
    return document


def _span_documents(document: dict[str, Any]) -> list[Any]:
    return [
        span
        for resource_spans in _list(document, "resourceSpans", "resource_spans")
        for scope_spans in _list(resource_spans, "scopeSpans", "scope_spans")
        for span in _list(scope_spans, "spans")
    ]


def _span_ids_to_base64(span: Any) -> None:
    if not isinstance(span, dict):
        raise DecodeError(f"a span must be a JSON object, got {type(span).__name__}")
    _hex_ids_to_base64(span, ("traceId", "trace_id"), ("spanId", "span_id"))
    _hex_ids_to_base64(span, ("parentSpanId", "parent_span_id"))
    for link in _list(span, "links"):
        _hex_ids_to_base64(link, ("traceId", "trace_id"), ("spanId", "span_id"))


def _salvage_json(document: dict[str, Any]) -> PB2ExportTraceServiceRequest:
    """Every span that reads on its own; the others kept as unparsed spans (a span
    under a resource that cannot be read among them). The envelope's own structure
    (arrays where arrays belong) must hold, or the body is refused whole."""
    request = salvaged_request()
    for resource_doc in _list(document, "resourceSpans", "resource_spans"):
        resource_spans = request.resource_spans.add()
        resource_problem = json_into(_dict(resource_doc).get("resource"), resource_spans.resource)
        for scope_doc in _list(resource_doc, "scopeSpans", "scope_spans"):
            scope_spans = resource_spans.scope_spans.add()
            json_into(_dict(scope_doc).get("scope"), scope_spans.scope)  # unread; may be dropped
            for span_doc in _list(scope_doc, "spans"):
                if resource_problem is not None:
                    keep_unparsed(
                        scope_spans, unparsed_json(span_doc, f"resource: {resource_problem}")
                    )
                    continue
                try:
                    scope_spans.spans.append(_json_span(span_doc))
                except DecodeError as err:
                    keep_unparsed(scope_spans, unparsed_json(span_doc, f"span: {err}"))
    return request


def _json_span(span_doc: Any) -> PB2Span:
    converted = _dict(span_doc).copy()  # ids convert in the copy: the original is the record
    links = converted.get("links")
    if isinstance(links, list):
        converted["links"] = [link.copy() if isinstance(link, dict) else link for link in links]
    _span_ids_to_base64(converted)
    span = PB2Span()
    try:
        json_format.ParseDict(converted, span, ignore_unknown_fields=True)
    except _JSON_ERRORS as err:
        text = str(err.__cause__ if isinstance(err, SystemError) and err.__cause__ else err)
        if "too deep" in text or isinstance(err, RecursionError):  # the path is as deep
            text = "nested deeper than the decoder's limit of 100 messages"
        raise DecodeError(f"not a decodable OTLP/JSON span: {text}") from None
    return span


def _dict(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _list(obj: Any, *keys: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}")
    for key in keys:
        value = obj.get(key)
        if value is not None:
            if not isinstance(value, list):
                raise DecodeError(f"{key!r} must be a JSON array")
            return value
    return []


def _hex_ids_to_base64(obj: dict[str, Any], *names: tuple[str, ...] | tuple[str]) -> None:
    for aliases in names:
        for key in aliases:
            value = obj.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise DecodeError(f"{key} must be a hex string")
            try:
                obj[key] = base64.b64encode(binascii.unhexlify(value)).decode()
            except (binascii.Error, ValueError):
                raise DecodeError(f"{key} {value!r} is not valid hex") from None


_SCALAR_KINDS = frozenset(
    {"string_value", "int_value", "bool_value", "double_value", "bytes_value"}
)


def any_value(value: PB2AnyValue) -> Any:
    """AnyValue -> str | bool | int | float | bytes | list | dict | None."""
    kind = value.WhichOneof("value")
    if kind in _SCALAR_KINDS:
        return getattr(value, kind)
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return None


def attributes(pairs: Any) -> dict[str, Any]:
    """A repeated KeyValue field as a dict (a repeated key keeps its last value).
    Scalars, nearly every value, are read inline: this runs for every attribute of
    every span and event."""
    out: dict[str, Any] = {}
    for kv in pairs:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = getattr(value, kind) if kind in _SCALAR_KINDS else any_value(value)
    return out


def jsonable(value: Any) -> Any:
    """Attribute values as JSON-safe values (bytes become base64 text)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def to_any_value(value: Any) -> PB2AnyValue:
    """A JSON attribute value back to OTLP, the inverse of `any_value` + `jsonable`
    (bytes were stored as base64 text, so they come back as strings)."""
    if isinstance(value, bool):
        return PB2AnyValue(bool_value=value)
    if isinstance(value, int):
        return PB2AnyValue(int_value=value)
    if isinstance(value, float):
        return PB2AnyValue(double_value=value)
    if isinstance(value, list):
        out = PB2AnyValue()
        out.array_value.values.extend(to_any_value(v) for v in value)
        return out
    if isinstance(value, dict):
        out = PB2AnyValue()
        out.kvlist_value.values.extend(to_key_values(value))
        return out
    return PB2AnyValue(string_value=str(value))


def to_key_values(attrs: Mapping[str, Any]) -> list[PB2KeyValue]:
    return [PB2KeyValue(key=k, value=to_any_value(v)) for k, v in attrs.items()]
