"""Body decoding: bounded gzip, OTLP/JSON specifics, precise decode errors."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from ingest.decode import any_value, decode_body, gunzip_bounded, parse_json, parse_protobuf
from ingest.errors import DecodeError, PayloadTooLarge, UnsupportedMediaType


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
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": 5}]}]}]}', "spanId must be"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"endTimeUnixNano": "soon"}]}]}]}',
            "OTLP/JSON",
        ),
        (b"\xff", "not valid JSON"),
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
