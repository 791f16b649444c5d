"""Body decoding: bounded gzip, OTLP/JSON specifics, precise decode errors."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from collections.abc import Callable

import pytest
from google.protobuf.message import DecodeError as PB2DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2Request,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.errors import DecodeError, PayloadTooLarge, UnsupportedMediaType
from ingest.export.decode import any_value, decode_body, gunzip_bounded, parse_json, parse_protobuf
from ingest.export.request import validate_request
from ingest.export.salvage import RESOURCE_REASON, SPAN_REASON, UnparsedSpan
from tests.ingest.helpers import to_otlp_json
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans
from tests.values import nested, set_attribute


def test_gunzip_bounded_round_trips() -> None:
    assert gunzip_bounded(gzip.compress(b"hello" * 1000), 10_000) == b"hello" * 1000


def test_gzip_bomb_stops_at_the_limit_without_inflating_it() -> None:
    bomb = gzip.compress(b"\0" * (200 * 1024 * 1024), compresslevel=9)
    tracemalloc.start()
    with pytest.raises(PayloadTooLarge, match="after gzip decompression"):
        gunzip_bounded(bomb, 1024 * 1024)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024


def test_truncated_and_corrupt_gzip() -> None:
    with pytest.raises(DecodeError, match="truncated"):
        gunzip_bounded(gzip.compress(b"x" * 1000)[:-12], 10_000)
    with pytest.raises(DecodeError, match="corrupt"):
        gunzip_bounded(b"\x1f\x8bnot really", 10_000)


def test_decode_body_encodings_and_limits() -> None:
    assert decode_body(b"abc", None, 3) == b"abc"
    assert decode_body(b"abc", "identity", 3) == b"abc"
    with pytest.raises(PayloadTooLarge):
        decode_body(b"abcd", None, 3)
    with pytest.raises(UnsupportedMediaType, match="'deflate'"):
        decode_body(b"abc", "deflate", 3)


def test_parse_json_hex_ids_and_int64_forms() -> None:
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0102030405060708090a0b0c0d0e0f10",
                                "spanId": "0102030405060708",
                                "parentSpanId": "",
                                "name": "x",
                                "kind": 2,
                                "endTimeUnixNano": 17,
                                "startTimeUnixNano": "16",
                                "unknownField": True,
                            }
                        ]
                    }
                ]
            }
        ]
    }
    request = parse_json(json.dumps(document).encode())
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id == bytes(range(1, 17))
    assert span.span_id == bytes(range(1, 9))
    assert span.kind == 2
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (16, 17)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[]", "must be a JSON object"),
        (b'{"resourceSpans": {}}', "'resourceSpans' must be a JSON array"),
        (b'{"resourceSpans": [{"scopeSpans": {}}]}', "'scopeSpans' must be a JSON array"),
        (b"\xff", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_parse_json_errors_say_what_was_wrong(body: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        parse_json(body)


def test_parse_protobuf_error() -> None:
    with pytest.raises(DecodeError, match="not a protobuf ExportTraceServiceRequest"):
        parse_protobuf(b"\x0a\xff\xff\xff\xff\x0f")


def test_any_value_covers_every_kind() -> None:
    nested = AnyValue(
        kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(int_value=3))])
    )
    array = AnyValue(array_value=ArrayValue(values=[AnyValue(bool_value=True), nested]))
    assert any_value(array) == [True, {"k": 3}]
    assert any_value(AnyValue(double_value=1.5)) == 1.5
    assert any_value(AnyValue(bytes_value=b"\x01")) == b"\x01"
    assert any_value(AnyValue()) is None


# --- spans the decoder cannot read cost only themselves (ingest.export.salvage) --------------


def _three_spans(spoil: Callable[[PB2Span], None], where: int = 1) -> PB2Request:
    request = export_request(
        record_spans([Evaluation("sv", 0), Evaluation("sv", 1), Sentinel("sv", 2)], seed=8)
    )
    spoil(request.resource_spans[0].scope_spans[0].spans[where])
    return request


def _deep(span: PB2Span) -> None:
    set_attribute(span, "holonograph.custom.tree", nested(40))


def _marked(span: PB2Span) -> None:
    set_attribute(span, "holonograph.custom.note", AnyValue(string_value=_MARK.decode()))


_MARK = b"@@@@@@"


def _deep_payload() -> bytes:
    return _three_spans(_deep).SerializeToString()


def _not_utf8_payload() -> bytes:
    """A string attribute holding bytes that are not UTF-8: made on the wire, since the
    protobuf API refuses to build one."""
    payload = _three_spans(_marked).SerializeToString()
    assert payload.count(_MARK) == 1
    return payload.replace(_MARK, b"\xc3\x28\xff\xfe\xfd\xfc")


@pytest.mark.parametrize("payload", [_deep_payload, _not_utf8_payload], ids=["deep", "not-utf8"])
def test_a_span_protobuf_cannot_read_is_quarantined_alone(payload: Callable[[], bytes]) -> None:
    body = payload()
    with pytest.raises(PB2DecodeError):
        PB2Request.FromString(body)  # what one upb call does with the whole request
    batch = validate_request(parse_protobuf(body))
    assert [e.event_id for e in batch.events] == ["evt_sv_0"]
    assert [(e.seq, e.kind, e.quarantined) for e in batch.emissions] == [
        (0, "evaluation", False),
        (2, "sentinel", False),
        (1, "evaluation", True),  # it arrived: not a gap
    ]
    (record,) = batch.quarantined
    assert record.reason == SPAN_REASON
    assert (record.span_name, record.emission_stream, record.emission_seq) == (
        "holonograph.evaluation",
        "sv",
        1,
    )
    assert record.attributes["holonograph.event.id"] == "evt_sv_1"
    assert "holonograph.custom.tree" not in record.attributes  # the part it could not read
    assert record.span_proto in body  # the span's own bytes, as sent
    with pytest.raises(PB2DecodeError):
        PB2Span.FromString(record.span_proto)


def test_a_deep_span_in_otlp_json_is_quarantined_alone() -> None:
    document = json.loads(to_otlp_json(_three_spans(_deep)))
    batch = validate_request(parse_json(json.dumps(document).encode()))
    assert [e.event_id for e in batch.events] == ["evt_sv_0"]
    (record,) = batch.quarantined
    assert record.reason == (
        "span: not a decodable OTLP/JSON span: nested deeper than the decoder's limit"
        " of 100 messages"
    )
    assert record.emission_seq == 1
    assert record.span_proto == b""  # JSON: nothing to replay


def test_a_resource_protobuf_cannot_read_quarantines_its_spans() -> None:
    request = _three_spans(lambda span: None)
    pair = request.resource_spans[0].resource.attributes.add()
    pair.key = "tree"
    pair.value.CopyFrom(nested(40))
    fine = export_request(record_spans([Evaluation("fine", 0)], seed=9))
    request.resource_spans.extend(fine.resource_spans)
    batch = validate_request(parse_protobuf(request.SerializeToString()))
    assert [e.event_id for e in batch.events] == ["evt_fine_0"]
    assert [q.reason for q in batch.quarantined] == [RESOURCE_REASON] * 3


def test_unknown_fields_a_client_sends_are_never_taken_for_unparsed_spans() -> None:
    request = _three_spans(lambda span: None)
    # What a salvaged request carries, sent by a client in a request that parses.
    forged = UnparsedSpan(reason="forged", head=PB2Span(name="x").SerializeToString())
    data = forged.SerializeToString()
    scope = request.resource_spans[0].scope_spans[0]
    scope.MergeFromString(bytes([0xF2, 0xFF, 0xFF, 0xFF, 0x0F, len(data)]) + data)
    batch = validate_request(parse_protobuf(request.SerializeToString()))
    assert len(batch.events) == 2
    assert batch.quarantined == ()


def test_a_span_otlp_json_cannot_read_is_quarantined_with_the_reason() -> None:
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"spanId": 5, "name": "holonograph.evaluation"},
                            {"endTimeUnixNano": "soon", "name": "holonograph.evaluation"},
                            ["not", "a", "span"],
                        ]
                    }
                ]
            }
        ]
    }
    batch = validate_request(parse_json(json.dumps(body).encode()))
    assert [q.reason for q in batch.quarantined] == [
        "span: spanId must be a hex string",
        "span: not a decodable OTLP/JSON span: Failed to parse endTimeUnixNano field:"
        " invalid literal for int() with base 10: 'soon'.",
        "span: expected a JSON object, got list",
    ]


def test_an_unreadable_span_that_is_not_ours_is_ignored_not_quarantined() -> None:
    def other(span: PB2Span) -> None:
        span.name = "GET /orders"
        _deep(span)

    batch = validate_request(parse_protobuf(_three_spans(other).SerializeToString()))
    assert (len(batch.events), batch.quarantined, batch.ignored_spans) == (1, (), 1)
