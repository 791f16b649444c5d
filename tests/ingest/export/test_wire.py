"""The compiled wire reader (`ingest.export._wire`) on bytes no OTLP client writes:
truncated, overlong varints, known fields with another wire type, huge lengths,
invalid UTF-8, values sent twice, ten-byte varints, unknown fields. On every input it
returns (never crashes); where the OTLP parse reads the bytes and the reader does too,
each span's fields are the OTLP parse's and each value it reads is the reference's
(`decode.attributes`, in its order, of the same types). Where it falls back (None,
`Unread`) the pure form or the reference reads; on the requests clients send it
falls back no more than the pure form (`test_flat`, `test_fast`). Skipped where it was not built."""

from __future__ import annotations

import gc
import math
import random
import struct
import sys
import tracemalloc
from typing import Any

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from bench.payload import PayloadSpec, RequestFactory
from ingest.export import flat
from ingest.export.decode import attributes, to_any_value
from ingest.export.fast import LAYOUT, fast_batch
from tests.ingest.export.conftest import NOT_BUILT
from tests.ingest.export.test_fuzz import _base

pytestmark = pytest.mark.skipif(flat.COMPILED is None, reason=NOT_BUILT)

# Keys the hostile requests use, of each kind, and the hot path's dimension keys.
_OWN = [("k", flat.ANY), ("a", flat.TEXT), ("", flat.NUMBER), ("missing", flat.STRINGS),
        ("b", flat.BOOL), ("n", flat.INT)]  # fmt: skip
WIRE_LAYOUT = flat.Layout(_OWN, [*zip(LAYOUT.event_keys, LAYOUT.event_kinds, strict=True), *_OWN])


def _typed(value: Any) -> Any:
    """A value with its types (and a float's bits): equal only where both are."""
    if type(value) is float:
        return (float, math.isnan(value) or struct.pack("<d", value))
    if type(value) is list:
        return (list, [_typed(v) for v in value])
    if type(value) is dict:
        return (dict, [(k, _typed(v)) for k, v in value.items()])
    return (type(value), value)


def _span_read(form: flat.Form, item: Any) -> Any:
    try:
        values, rest = form.span(item, WIRE_LAYOUT)
    except flat.Unread:
        return flat.Unread
    return _typed(list(values)), _typed(rest or {})


def _event_values(form: flat.Form, item: Any) -> Any:
    try:
        return _typed(list(form.event(item, WIRE_LAYOUT)))
    except flat.Unread:
        return flat.Unread


def check(wire: bytes) -> str:
    """What the compiled reader made of `wire` ('unparsed': the OTLP parse refuses it;
    'fallback': the reader left the request to the pure form; 'read'), asserting the
    module's claims."""
    got = flat._wire.spans(wire, WIRE_LAYOUT.wire)  # never raises
    assert got is None or type(got) is list
    try:
        request = PB2ExportTraceServiceRequest.FromString(wire)
    except DecodeError:
        return "unparsed"
    if got is None:
        read = flat.spans(request, WIRE_LAYOUT, wire, flat.COMPILED)
        assert read is None or read[1] is flat.PURE
        return "fallback"
    assert flat.COMPILED is not None
    pure = flat.spans(request, WIRE_LAYOUT, wire, flat.PURE)  # None: the pure form leaves it
    assert len(got) == len(request.resource_spans)
    assert pure is None or len(pure[0]) == len(got)
    for r, resource_spans in enumerate(request.resource_spans):
        assert len(got[r]) == len(resource_spans.scope_spans)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            assert len(got[r][s]) == len(scope_spans.spans)
            for n, span in enumerate(scope_spans.spans):
                mine = got[r][s][n]
                theirs = None if pure is None else pure[0][r][s][n]
                assert (mine.name, mine.trace_id, mine.span_id, mine.end_time_unix_nano) == (
                    span.name, span.trace_id, span.span_id, span.end_time_unix_nano
                )  # fmt: skip
                assert [e.name for e in mine.events] == [e.name for e in span.events]
                _compare_span(attributes(span.attributes), theirs, mine)
                theirs_events = [None] * len(span.events) if theirs is None else theirs.events
                for otlp, compiled, pure_item in zip(
                    span.events, mine.events, theirs_events, strict=True
                ):
                    _compare_event(attributes(otlp.attributes), pure_item, compiled)
    return "read"


def _compare_span(reference: dict[str, Any], pure_item: Any, compiled_item: Any) -> None:
    """Where the compiled form reads a span's values and rest, they are the reference's
    as `flat.fix` takes them (values, types and order), and the pure form's where it
    reads them too; where `fix` finds a value not of its kind, neither reads them."""
    assert flat.COMPILED is not None
    fixed = flat.fix(reference, WIRE_LAYOUT.span_keys, WIRE_LAYOUT.span_kinds)
    expected = None
    if fixed is not None:
        expected = _typed(list(fixed)), _typed(flat.rest(reference, WIRE_LAYOUT.span_keys) or {})
    compiled = _span_read(flat.COMPILED, compiled_item)
    assert compiled is flat.Unread or compiled == expected
    if pure_item is not None:
        pure = _span_read(flat.PURE, pure_item)
        assert pure is flat.Unread or (
            expected is not None
            and pure[0] == expected[0]
            and sorted(pure[1][1]) == sorted(expected[1][1])
        )


def _compare_event(reference: dict[str, Any], pure_item: Any, compiled_item: Any) -> None:
    """`_compare_span` for an event's values (its other attributes are not read)."""
    assert flat.COMPILED is not None
    fixed = flat.fix(reference, WIRE_LAYOUT.event_keys, WIRE_LAYOUT.event_kinds)
    expected = flat.Unread if fixed is None else _typed(list(fixed))
    compiled = _event_values(flat.COMPILED, compiled_item)
    assert compiled is flat.Unread or compiled == expected
    if pure_item is not None:
        pure = _event_values(flat.PURE, pure_item)
        assert pure is flat.Unread or pure == expected


def _varint(value: int) -> bytes:
    return bytes(_VarintBytes(value))


def _field(number: int, kind: int, payload: bytes) -> bytes:
    head = _varint(number << 3 | kind)
    return head + (_varint(len(payload)) + payload if kind == 2 else payload)


def _request(*spans: bytes) -> bytes:
    scope = b"".join(_field(2, 2, span) for span in spans)
    return _field(1, 2, _field(2, 2, scope))


def _pair(key: bytes, value: bytes | None, *more: bytes) -> bytes:
    body = _field(1, 2, key) + (b"" if value is None else _field(2, 2, value))
    return _field(9, 2, body + b"".join(more))


def _any(value: Any) -> bytes:
    return bytes(to_any_value(value).SerializeToString())


def _span(*fields: bytes) -> bytes:
    ids = _field(1, 2, b"\x01" * 16) + _field(2, 2, b"\x02" * 8)
    return ids + _field(5, 2, b"holonograph.evaluation") + b"".join(fields)


A1 = _field(1, 2, b"a") + _field(2, 2, _any(1))  # KeyValue{a: 1}
TEN = b"\xff" * 9 + b"\x01"  # a ten-byte varint: 2**64 - 1
ELEVEN = b"\x80" * 10 + b"\x00"
HOSTILE = [
    _request(_span(_pair(b"k", b"\x18" + TEN))),  # an int in ten bytes: -1
    _request(_span(_pair(b"k", b"\x18" + b"\xff" * 9 + b"\x7f"))),  # bits past 64
    _request(_span(_pair(b"k", b"\x18" + ELEVEN))),  # eleven bytes
    _request(_span(_pair(b"k", b"\x0a" + TEN + b"ab"))),  # a string's length: 2**64 - 1
    _request(_span(_pair(b"k", b"\x0a\x85\x80\x80\x80\x00abcde"))),  # its length in five
    _request(_span(b"\x4a" + TEN + _field(1, 2, b"k"))),  # the pair's length
    _request(_span(b"\x4a\xff\xff\xff\xff\x0f")),  # a huge length, nothing after
    _request(_span(_field(9, 0, b"\x05"))),  # attributes as a varint
    _request(_span(_field(5, 0, b"\x05"))),  # the name as a varint
    _request(_span(_field(1, 0, b"\x05"))),  # trace_id as a varint
    _request(_span(_field(8, 0, b"\x05"))),  # end_time as a varint
    _request(_span(_field(8, 5, b"\x05\x00\x00\x00"))),  # as fixed32
    _request(_span(_field(9, 2, _field(1, 0, b"\x01") + _field(2, 2, _any(1))))),  # key
    _request(_span(_field(9, 2, _field(1, 2, b"k") + _field(2, 0, b"\x01")))),  # value
    _request(_span(_field(8, 1, b"\x01" * 8) * 2)),  # end_time twice: the last
    _request(_span(_field(5, 2, b"other"))),  # the name twice: the last
    _request(_span(_field(5, 2, b"\xc3\x28"))),  # a name not UTF-8
    _request(_span(_pair(b"\xed\xa0\x80", _any(1)))),  # a key not UTF-8 (a surrogate)
    _request(_span(_pair(b"k", b"\x0a\x02\xc3\x28"))),  # a string value not UTF-8
    _request(_span(_pair(b"k", _any("a"), _field(2, 2, _any("b"))))),  # value twice
    _request(_span(_pair(b"k", _any(["a"]), _field(2, 2, _any(["b"]))))),  # arrays
    _request(_span(_pair(b"k", _any("a")), _pair(b"k", _any({"x": 1})))),  # last: kvlist
    _request(_span(_pair(b"k", _any({"x": 1})), _pair(b"k", _any("a")))),  # last: read
    _request(_span(_pair(b"k", None), _pair(b"a", _any(1)))),  # a key without a value
    _request(_span(_pair(b"k", b""), _pair(b"a", _any(1)))),  # an empty value
    _request(_span(_pair(b"k", b"\x10\x02"))),  # a bool of 2
    _request(_span(_pair(b"k", b"\x2a\x07\x0a\x84\x00\x0a\x02ab"))),  # an item in two
    _request(_span(_pair(b"k", _any([[[[["deep"]]]]])))),
    _request(_span(_pair(b"k", _any("a"), _field(3, 0, b"\x01"), _field(4, 1, b"\0" * 8)))),
    _request(_span(_field(3, 3, b"") + _field(3, 4, b""))),  # a group (unknown)
    _request(_span(_field(15, 6, b""))),  # wire type 6
    _request(_span(b"\x00\x01")),  # field number 0
    _request(_span(b"\x8a\x80\x80\x80\x00\x00")),  # a five-byte tag (field 1)
    _request(_span(_field(11, 2, _field(2, 2, b"holonograph.dimension") + _field(3, 2, A1)))),
    _request(_span(_field(11, 2, _field(3, 2, _field(1, 2, b"a") + _field(2, 2, _any({}))))))
    + _field(1, 2, b""),
]  # fmt: skip


def _payloads() -> list[bytes]:
    factory = RequestFactory(PayloadSpec(batch=4, sentinel_every=2, tag="hostile0"))
    return [factory.body(0), *(_base(n).SerializeToString() for n in range(3)), *HOSTILE]


def test_hand_made_hostile_bytes_are_read_as_the_otlp_parse_reads_them() -> None:
    outcomes = [check(wire) for wire in HOSTILE]
    assert {"read", "fallback", "unparsed"} <= set(outcomes), outcomes
    for prefix in range(len(HOSTILE[0])):  # every truncation
        check(HOSTILE[0][:prefix])


def test_a_request_it_cannot_read_exactly_is_left_to_the_pure_form() -> None:
    """A value sent twice in one pair (merged by the OTLP parse), a name or key that is
    not UTF-8, a known field with another wire type: the whole request."""

    def spans(wire: bytes) -> Any:
        return flat._wire.spans(wire, WIRE_LAYOUT.wire)

    assert spans(_request(_span(_pair(b"k", _any("a"), _field(2, 2, _any("b")))))) is None
    assert spans(_request(_span(_field(5, 2, b"\xc3\x28")))) is None
    assert spans(_request(_span(_field(8, 0, b"\x05")))) is None
    # a value of another shape, or not of its kind: only that span (its last value counts)
    for pairs in (
        _pair(b"k", _any({"x": 1})) + _pair(b"a", _any("x")),
        _pair(b"other", _any({"x": 1})) + _pair(b"a", _any("x")),
        _pair(b"a", _any("x")) + _pair(b"a", _any(1)),
    ):
        got = spans(_request(_span(pairs)))
        assert got is not None
        assert got[0][0][0].values is None and got[0][0][0].rest is None
    got = spans(_request(_span(_pair(b"a", _any(1)) + _pair(b"a", _any("x")))))
    assert got is not None and got[0][0][0].values[1] == "x"


def _mutate(rng: random.Random, wire: bytes) -> bytes:
    data = bytearray(wire)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        kind = rng.randrange(8)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            del data[at:]
        elif kind == 2:
            del data[at : at + rng.randint(1, 8)]
        elif kind == 3:
            data[at:at] = data[at : at + rng.randint(1, 40)]
        elif kind == 4:
            data[at:at] = rng.choice([TEN, ELEVEN, b"\xff\xff\xff\xff\x0f", b"\x80\x00"])
        elif kind == 5:
            data[at:at] = rng.choice([b"\xc3\x28", b"\xed\xa0\x80", b"\xff"])
        elif kind == 6:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
    return bytes(data)


def test_mutated_requests_are_read_as_the_otlp_parse_reads_them() -> None:
    rng = random.Random(24)
    outcomes: dict[str, int] = {}
    for wire in _payloads():
        for _ in range(150):
            outcome = check(_mutate(rng, wire))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert set(outcomes) == {"read", "fallback", "unparsed"}, outcomes  # each exercised


# Messages field by field, as no client writes them: the fields the reader knows with
# their wire type or another, sent once, twice or not at all, and unknown ones.
TEXT = st.one_of(st.text(max_size=6).map(str.encode), st.sampled_from([b"\xc3\x28", b"k", b""]))


def _each(number: int, items: list[bytes]) -> bytes:
    return b"".join(_field(number, 2, item) for item in items)


def _kvlist(values: list[bytes]) -> bytes:
    return _field(6, 2, _each(1, [_field(1, 2, b"x") + _field(2, 2, v) for v in values]))


def _event(name: bytes, pairs: list[bytes]) -> bytes:
    return _field(11, 2, _field(2, 2, name) + _each(3, pairs))


LEAVES = st.one_of(
    st.builds(lambda t: _field(1, 2, t), TEXT),
    st.builds(lambda v: _field(2, 0, _varint(v)), st.integers(0, 3)),
    st.builds(lambda v: _field(3, 0, _varint(v)), st.integers(0, 2**64 - 1)),
    st.just(_field(3, 0, TEN)),
    st.builds(lambda b: _field(4, 1, b), st.binary(min_size=8, max_size=8)),
    st.builds(lambda b: _field(7, 2, b), st.binary(max_size=3)),
    st.just(_field(9, 0, b"\x01")),
)
ANY = st.recursive(
    st.lists(LEAVES, max_size=2).map(b"".join),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda values: _field(5, 2, _each(1, values))),
        st.lists(inner, max_size=2).map(_kvlist),
        st.tuples(inner, inner).map(b"".join),
    ),
    max_leaves=6,
)
PAIR = st.one_of(
    st.builds(lambda k, v: _field(1, 2, k) + _field(2, 2, v), TEXT, ANY),
    st.builds(lambda k, vs: _field(1, 2, k) + _each(2, vs), TEXT, st.lists(ANY, max_size=2)),
    st.builds(lambda v: _field(2, 2, v) + _field(1, 0, b"\x01"), ANY),
)
ODD_FIELDS = [_field(8, 0, b"\x01"), _field(6, 0, b"\x02"), _field(15, 2, b"\x08\x01")]
SPAN_FIELDS = st.one_of(
    st.builds(lambda p: _field(9, 2, p), PAIR),
    st.builds(_event, TEXT, st.lists(PAIR, max_size=3)),
    st.builds(lambda b: _field(1, 2, b), st.binary(max_size=17)),
    st.builds(lambda t: _field(5, 2, t), TEXT),
    st.builds(lambda b: _field(8, 1, b), st.binary(min_size=8, max_size=8)),
    st.sampled_from([*ODD_FIELDS, _field(20, 5, b"\0" * 4)]),
)
REQUESTS = st.lists(st.lists(SPAN_FIELDS, max_size=6).map(b"".join), max_size=3).map(
    lambda spans: _request(*spans)
)


@settings(max_examples=400, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(REQUESTS)
def test_requests_built_field_by_field_are_read_as_the_otlp_parse_reads_them(wire: bytes) -> None:
    check(wire)


def test_the_bench_payload_is_read_by_the_compiled_form_itself() -> None:
    """Not left to the pure form: it reads the spans the hot path takes."""
    wire = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="compiled")).body(0)
    request = PB2ExportTraceServiceRequest.FromString(wire)
    read = flat.spans(request, LAYOUT, wire, flat.COMPILED)
    assert read is not None and read[1] is flat.COMPILED
    assert all(span.values is not None for span in read[0][0][0])
    assert check(wire) == "read"


def test_it_keeps_no_memory_or_reference_per_call() -> None:
    """Every outcome (read, values not read, the request left to the pure form,
    unparsable) over and over: no memory kept, no reference to the shared objects."""
    inputs = _payloads()
    rng = random.Random(7)
    inputs += [_mutate(rng, wire) for wire in inputs for _ in range(20)]

    def spans(wire: bytes) -> Any:
        return flat._wire.spans(wire, WIRE_LAYOUT.wire)

    for wire in inputs:  # warm: the key cache filled
        spans(wire)
    gc.collect()
    counts = [sys.getrefcount(o) for o in (None, True, False, flat._wire.UNREAD)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(30):
            for wire in inputs:
                spans(wire)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # one object kept per call: 30 * len(inputs) * 16 bytes
    after = [sys.getrefcount(o) for o in (None, True, False, flat._wire.UNREAD)]
    # (a reference kept per call: 30 * len(inputs) more; the interpreter's own: a few)
    assert all(abs(a - b) < len(inputs) for a, b in zip(after, counts, strict=True)), after


def test_untrack_leaves_a_batchs_rows_to_reference_counting() -> None:
    """The garbage collector no longer walks the rows, nor their lists of strings (their
    other lists and dicts it still does), and the hot path's batches are untracked so;
    reference counting frees them."""
    rows: list[list[Any]] = [[1, "a"], [2, ["b"], ["c", 1], ["d", ["e"]], {"f": []}]]
    flat.untrack(rows)
    assert not any(gc.is_tracked(row) for row in rows)
    assert not gc.is_tracked(rows[1][1])  # a list of strings in a row
    assert gc.is_tracked(rows) and all(gc.is_tracked(item) for item in rows[1][2:])
    with pytest.raises(TypeError):
        flat._wire.untrack((1,))  # type: ignore[arg-type]
    wire = RequestFactory(PayloadSpec(batch=64, sentinel_every=16, tag="untrack0")).body(0)
    batch = fast_batch(PB2ExportTraceServiceRequest.FromString(wire), wire=wire)
    assert batch is not None and batch.events and batch.dimensions and batch.receipts
    assert not any(gc.is_tracked(row) for row in batch.events + batch.dimensions + batch.receipts)
    assert not any(gc.is_tracked(row[12]) or gc.is_tracked(row[22]) for row in batch.events)
    row = batch.events[0]
    del batch
    assert sys.getrefcount(row) == 2  # this name and the call's: nothing else holds it
