"""The flat attribute reader (`ingest.export.flat`) against the reference reader
(`ingest.export.decode.attributes`) on the same spans: every value it decodes is the
reference's value, and everything else it leaves to the reference (`Unread`). Each
test runs for both forms of the reader (`wire_form`: pure, and compiled where built)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest.export import flat
from ingest.export.decode import attributes, parse_protobuf, to_any_value

SCALARS = st.one_of(
    st.text(max_size=300),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.lists(st.lists(SCALARS, max_size=2)))


def _request(pairs: list[KeyValue]) -> PB2ExportTraceServiceRequest:
    request = PB2ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.attributes.extend(pairs)
    span.events.add(name="e").attributes.extend(pairs)
    return parse_protobuf(request.SerializeToString())


pytestmark = pytest.mark.usefixtures("wire_form")


def _read_both(
    request: PB2ExportTraceServiceRequest, wire: bytes | None = None
) -> tuple[dict[str, Any], Any]:
    """The reference's attributes of the first span and the flat form's, as a span's
    `rest` with no keys in the layout (`wire`: the bytes `request` was parsed from,
    read as they are where `flat.spans` may). A form that says it is `ordered` has
    them in the reference's order too. Its events (the same pairs) give the values of
    the reference's keys, as `flat.fix` takes them from the reference's."""
    span = request.resource_spans[0].scope_spans[0].spans[0]
    reference = attributes(span.attributes)
    layout = flat.Layout([], [(key, flat.ANY) for key in reference])
    read = flat.spans(request, layout, wire)
    assert read is not None
    spans, form = read
    flat_span = spans[0][0][0]
    try:
        values, rest = form.span(flat_span, layout)
        assert values == ()
        got: Any = rest or {}
        if form.ordered:
            assert list(got) == list(reference)
    except flat.Unread:
        got = flat.Unread
    fixed = flat.fix(reference, layout.event_keys, layout.event_kinds)
    for event in flat_span.events:
        assert _event(form, event, layout) == (
            flat.Unread if got is flat.Unread or fixed is None else fixed
        )
    return reference, got


def _event(form: flat.Form, event: Any, layout: flat.Layout) -> Any:
    try:
        return form.event(event, layout)
    except flat.Unread:
        return flat.Unread


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "", "é"]), VALUES), max_size=6))
def test_every_value_it_reads_is_the_reference_value(items: list[tuple[str, Any]]) -> None:
    """Repeated keys too: both keep the last value."""
    reference, got = _read_both(
        _request([KeyValue(key=k, value=to_any_value(v)) for k, v in items])
    )
    assert got == reference
    for key, value in reference.items():  # the same types, not only equal values
        assert type(got[key]) is type(value)


def test_other_shapes_are_left_to_the_reference() -> None:
    kvlist = to_any_value({"k": "v"})
    for value in (kvlist, AnyValue(bytes_value=b"\x00\xff"), to_any_value([{"k": 1}])):
        reference, got = _read_both(_request([KeyValue(key="x", value=value)]))
        assert got is flat.Unread
        assert reference["x"] is not None


def test_a_key_without_a_value_reads_none() -> None:
    reference, got = _read_both(_request([KeyValue(key="x")]))
    assert reference == {"x": None}
    assert got in ({"x": None}, flat.Unread)


def test_a_value_sent_twice_in_one_pair_reads_as_the_reference_merged_it() -> None:
    """Two `value` fields in one KeyValue: the OTLP parse merges them (arrays append)
    and the flat form reads the request as that parse left it."""
    first = KeyValue(key="x", value=to_any_value(["a"])).SerializeToString()
    second = KeyValue(value=to_any_value(["b"])).SerializeToString()
    pair = first + second  # key, value, value
    span_field = b"\x4a" + bytes([len(pair)]) + pair  # Span.attributes = 9
    scope = b"\x12" + bytes([len(span_field)]) + span_field
    resource = b"\x12" + bytes([len(scope)]) + scope
    wire = b"\x0a" + bytes([len(resource)]) + resource
    request = parse_protobuf(wire)
    for sent in (None, wire):  # from the wire too: not read as it is (the last array)
        reference, got = _read_both(request, sent)
        assert reference == {"x": ["a", "b"]}
        assert got == reference


BOUNDARIES: list[Any] = [
    0, 1, 127, 128, 255, 16_383, 16_384, -1, -128, 2**63 - 1, -(2**63),
    True, False, 0.0, -0.0, 1.5,
    "", "x" * 125, "x" * 126, "x" * 127, "x" * 128, "é" * 63, "é" * 64,
    [], [""], ["x" * 123], ["x" * 124], ["x" * 125], ["x" * 126], ["x" * 127],
    ["a", 1, 2.5, True, ""], [0, 127, 128, -1], [[]], [["a"], "b"], [True, False],
]  # fmt: skip


def test_the_inline_shapes_at_their_boundaries_read_as_the_reference() -> None:
    """One-byte ints and bools, short strings and short arrays are decoded inline; at
    each length or value where the encoding changes, the reference's value and type."""
    for value in BOUNDARIES:
        reference, got = _read_both(_request([KeyValue(key="k", value=to_any_value(value))]))
        assert got == reference, value
        assert type(got["k"]) is type(reference["k"]), value
        if isinstance(value, list):
            assert [type(v) for v in got["k"]] == [type(v) for v in reference["k"]], value


def test_a_bool_with_another_varint_is_left_to_the_reference() -> None:
    """`bool_value: 2` on the wire: not the inline bool (the OTLP parse says true)."""
    pair = b"\x0a\x01k\x12\x02\x10\x02"  # key "k", value AnyValue{bool_value: varint 2}
    span_field = b"\x4a" + bytes([len(pair)]) + pair
    scope = b"\x12" + bytes([len(span_field)]) + span_field
    resource = b"\x12" + bytes([len(scope)]) + scope
    reference, got = _read_both(parse_protobuf(b"\x0a" + bytes([len(resource)]) + resource))
    assert reference == {"k": True}
    assert got in (reference, flat.Unread)


KEYS = ("a", "b", "c", "", "é", "missing")
ANY_LAYOUT = flat.Layout([(key, flat.ANY) for key in KEYS], [(key, flat.ANY) for key in KEYS])


def _pick_both(request: PB2ExportTraceServiceRequest) -> tuple[list[Any], Any]:
    """The reference's values of `KEYS` in the first span (None: absent) and the flat
    form's, as a layout of `KEYS` of kind any gives them (its events' too)."""
    span = request.resource_spans[0].scope_spans[0].spans[0]
    read = flat.spans(request, ANY_LAYOUT)
    assert read is not None
    spans, form = read
    flat_span = spans[0][0][0]
    try:
        got: Any = list(form.span(flat_span, ANY_LAYOUT)[0])
        assert list(form.event(flat_span.events[0], ANY_LAYOUT)) == got
    except flat.Unread:
        got = flat.Unread
    reference = attributes(span.attributes)
    return [reference.get(key) for key in KEYS], got


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "", "é", "other"]), VALUES), max_size=6))
def test_the_values_of_a_layout_are_the_reference_values(items: list[tuple[str, Any]]) -> None:
    """A layout's keys are read into their places: their reference values (None when
    absent, the last of a repeated key), of the same types; the others are the rest."""
    reference, got = _pick_both(
        _request([KeyValue(key=k, value=to_any_value(v)) for k, v in items])
    )
    assert got == reference
    for mine, value in zip(got, reference, strict=True):
        assert type(mine) is type(value)


def test_a_layout_leaves_other_shapes_to_the_reference() -> None:
    """In a layout's keys or a span's rest (its values not read: the span is the
    reference's); an event's attributes not in the layout are not read."""
    kvlist = to_any_value({"k": "v"})
    reference, got = _pick_both(_request([KeyValue(key="a", value=kvlist)]))
    assert got is flat.Unread and reference[0] is not None
    pairs = [KeyValue(key="other", value=kvlist), KeyValue(key="b", value=to_any_value(1.5))]
    layout = flat.Layout([("b", flat.NUMBER)], [("b", flat.NUMBER)])
    read = flat.spans(_request(pairs), layout)
    assert read is not None
    spans, form = read
    with pytest.raises(flat.Unread):
        form.span(spans[0][0][0], layout)
    assert form.event(spans[0][0][0].events[0], layout) == (1.5,)


KINDS = (flat.TEXT, flat.ANY, flat.BOOL, flat.INT, flat.NUMBER, flat.STRINGS)
KIND_KEYS = tuple(f"k{kind}" for kind in KINDS)
KIND_LAYOUT = flat.Layout(
    list(zip(KIND_KEYS, KINDS, strict=True)), list(zip(KIND_KEYS, KINDS, strict=True))
)
KIND_VALUES = st.one_of(
    VALUES, st.floats(), st.lists(st.text(max_size=3), max_size=3), st.just(None)
)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([*KIND_KEYS, "other"]), KIND_VALUES), max_size=7))
def test_each_kind_takes_its_values_as_fix_takes_the_references(
    items: list[tuple[str, Any]],
) -> None:
    """Every form gives a layout's values as `flat.fix` takes them from the reference's
    attributes (None: a key without a value), and of the same types, or leaves the span
    to the reference exactly where `fix` says a value is not of its kind; the other
    attributes are the `rest`, in the span's order for an ordered form."""
    pairs = [KeyValue(key=k, value=to_any_value(v)) if v is not None else KeyValue(key=k)
             for k, v in items]  # fmt: skip
    request = _request(pairs)
    reference = attributes(request.resource_spans[0].scope_spans[0].spans[0].attributes)
    fixed = flat.fix(reference, KIND_LAYOUT.span_keys, KIND_LAYOUT.span_kinds)
    read = flat.spans(request, KIND_LAYOUT)
    assert read is not None
    spans, form = read
    event = _event(form, spans[0][0][0].events[0], KIND_LAYOUT)
    assert event == (flat.Unread if fixed is None else fixed) or (
        event is flat.Unread and form is flat.PURE and None in reference.values()
    )  # the pure form leaves a key without a value to the reference
    try:
        values, rest = form.span(spans[0][0][0], KIND_LAYOUT)
    except flat.Unread:
        assert fixed is None or (form is flat.PURE and None in reference.values())
        return
    assert values == fixed
    assert [type(v) for v in values] == [type(v) for v in fixed]
    for value, kind in zip(values, KIND_LAYOUT.span_kinds, strict=True):
        if kind == flat.STRINGS:
            assert all(type(v) is str for v in value)
    expected = flat.rest(reference, KIND_LAYOUT.span_keys)
    assert rest == expected
    if form.ordered and rest is not None and expected is not None:
        assert list(rest) == list(expected)


def test_fix_takes_each_kind_as_the_hot_path_checks_it() -> None:
    """Absent ones as the rows have them; an int as a float for a number; a value of
    another kind, a non-finite number or a key of kind any without a value: None."""
    keys, kinds = KIND_LAYOUT.span_keys, KIND_LAYOUT.span_kinds
    assert flat.fix({}, keys, kinds) == ("", None, None, None, None, [])
    assert flat.fix({"kt": None, "ka": 0, "kn": 3, "ks": "x"}, keys, kinds) == (
        "", 0, None, None, 3.0, ["x"],
    )  # fmt: skip
    assert type(flat.fix({"kn": 3}, keys, kinds)[4]) is float  # type: ignore[index]
    for odd in ({"ka": None}, {"kt": 1}, {"kb": 1}, {"ki": True}, {"ki": 1.0},
                {"kn": float("nan")}, {"kn": "1"}, {"ks": ["a", 1]}, {"ks": 1}):  # fmt: skip
        assert flat.fix(odd, keys, kinds) is None, odd


def test_a_layout_is_distinct_keys_of_known_kinds() -> None:
    with pytest.raises(ValueError):
        flat.Layout([("a", flat.TEXT), ("a", flat.INT)], [])
    with pytest.raises(ValueError):
        flat.Layout([("a", "z")], [])


def test_an_int_in_a_longer_varint_than_it_needs_reads_as_the_reference() -> None:
    """Three bytes after the tag's: the inline two-byte int takes only a varint that
    ends there."""
    for varint, value in ((b"\xff\x00", 127), (b"\x80\x01", 128), (b"\xff\x7f", 16_383)):
        pair = b"\x0a\x01k\x12\x03\x18" + varint  # key "k", AnyValue{int_value: varint}
        span_field = b"\x4a" + bytes([len(pair)]) + pair
        scope = b"\x12" + bytes([len(span_field)]) + span_field
        resource = b"\x12" + bytes([len(scope)]) + scope
        reference, got = _read_both(parse_protobuf(b"\x0a" + bytes([len(resource)]) + resource))
        assert reference == {"k": value}
        assert got == reference


def _length(size: int) -> bytes:
    out = bytearray()
    while True:
        byte = size & 0x7F
        size >>= 7
        if size:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    return bytes([number << 3 | 2]) + _length(len(body)) + body


def _request_bytes(span: bytes) -> bytes:
    return _field(1, _field(2, _field(2, span)))


def _pair(key: bytes, value: bytes) -> bytes:
    """A `Span.attributes` field (9) holding KeyValue{key, value} as given."""
    return _field(9, _field(1, key) + _field(2, value))


ODD_VALUES = [
    (b"\x0a\x85\x00abcde", "abcde"),  # a string's length in two varint bytes
    (b"\x18\x80\x80\x00", 0),  # an int in three varint bytes
    (b"\x18" + b"\xff" * 9 + b"\x7f", -1),  # a tenth byte with bits past 64
    (b"\x18\xff\x00", 127),
    (b"\x0a\x01a\x18\x03", 3),  # two fields of the oneof: the last
    (b"\x18\x03\x0a\x01a", "a"),
    (b"\x10\x01\x10\x00", False),
    (b"\x2a\x05\x0a\x03\x0a\x01a" * 2, ["a", "a"]),  # two arrays: appended
    (b"\x2a\x07\x0a\x84\x00\x0a\x02ab", ["ab"]),  # an item's length in two bytes
    (b"\x21" + b"\x00" * 8, 0.0),
]


def test_the_requests_own_bytes_read_as_the_reference_reads_them() -> None:
    """Bytes as a client may send them (not as the OTLP classes serialize): every value
    read is the reference's, or left to it."""
    for value, expected in ODD_VALUES:
        wire = _request_bytes(_pair(b"k", value) + _pair(b"n", b"\x18\x05"))
        request = parse_protobuf(wire)
        reference, got = _read_both(request, wire)
        assert reference == {"k": expected, "n": 5}, value
        assert got in (reference, flat.Unread), value
        if got is not flat.Unread:
            assert all(type(got[k]) is type(v) for k, v in reference.items()), value


def test_a_request_sent_as_its_canonical_bytes_is_read_from_them() -> None:
    """The check `flat.parse` makes before reading the bytes as they are: canonical
    bytes pass it, a `KeyValue` with its value twice does not (among others)."""
    plain = _request_bytes(_pair(b"k", b"\x0a\x01a"))
    assert flat._Check.FromString(plain).ByteSize() == len(plain)
    twice = _request_bytes(_field(9, _field(1, b"k") + _field(2, b"\x0a\x01a") * 2))
    assert flat._Check.FromString(twice).ByteSize() < len(twice)
    request = parse_protobuf(twice)
    reference, got = _read_both(request, twice)
    assert got == reference == {"k": "a"}


def test_a_pair_with_a_field_besides_key_and_value_reads_as_the_reference(
    wire_form: flat.Form,
) -> None:
    """OTLP's `KeyValue.key_strindex` (3), or any unknown field, beside the key and the
    value: the reference reads the pair. upb drops such a map entry, so the pure form
    sends the request to the reference (`flat.parse`'s count of entries)."""
    for extra in (b"\x18\x01", b"\x21" + b"\x00" * 8):  # key_strindex: 1; a fixed64 field 4
        pair = _field(1, b"k") + _field(2, b"\x0a\x01a") + extra
        wire = _request_bytes(_field(9, pair) + _pair(b"n", b"\x18\x05"))
        request = parse_protobuf(wire)
        if wire_form is flat.PURE:  # the request is the reference's
            assert flat.spans(request, ANY_LAYOUT, wire) is None
            assert flat.spans(request, ANY_LAYOUT) is None
            continue
        reference, got = _read_both(request, wire)
        assert reference == {"k": "a", "n": 5}
        assert got == reference


def test_a_key_sent_twice_keeps_its_last_value_in_the_pure_form() -> None:
    """The pure form's count of map entries against `KeyValue`s: a repeat is not a loss;
    a pair upb dropped is, also where its key repeats (the last value is the dropped
    pair's)."""
    repeat = _pair(b"k", b"\x0a\x01a") + _pair(b"k", b"\x0a\x01b") + _pair(b"n", b"\x18\x05")
    request = parse_protobuf(_request_bytes(repeat))
    read = flat.spans(request, ANY_LAYOUT, form=flat.PURE)
    assert read is not None
    assert flat.PURE.span(read[0][0][0][0], ANY_LAYOUT) == ((None,) * 6, {"k": "b", "n": 5})
    dropped_last = _pair(b"k", b"\x0a\x01a") + _field(
        9, _field(1, b"k") + _field(2, b"\x0a\x01b") + b"\x18\x01"
    )
    wire = _request_bytes(dropped_last)
    assert flat.spans(parse_protobuf(wire), ANY_LAYOUT, wire, form=flat.PURE) is None


def test_the_environment_can_keep_the_pure_form() -> None:
    """`HOLONOGRAPH_WIRE_READER=pure`: the pure form even where the compiled one is
    built; otherwise the compiled one where it is."""
    code = "from ingest.export import flat; print(flat.FORM.name)"
    for setting, expected in (
        ("pure", "pure"),
        ("", "pure" if flat.COMPILED is None else "compiled"),
    ):
        env = {**os.environ, "HOLONOGRAPH_WIRE_READER": setting}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected


def test_a_reader_built_from_another_source_is_not_used(tmp_path: Path) -> None:
    """The digest `setup.py` compiles in against the source beside the module: a
    checkout pulled without a rebuild reads with the pure form, with a warning."""
    source = tmp_path / "_wire.c"
    source.write_bytes(b"/* one */")
    digest = hashlib.sha256(b"/* one */").hexdigest()[:16]
    assert flat._current(SimpleNamespace(SOURCE=digest), source)
    assert not flat._current(SimpleNamespace(SOURCE="0" * 16), source)
    assert not flat._current(SimpleNamespace(), source)
    assert flat._current(SimpleNamespace(), tmp_path / "absent.c")


@pytest.mark.skipif(flat.COMPILED is None, reason="the compiled reader is not built here")
def test_the_built_reader_is_the_source_beside_it() -> None:
    assert flat._current(flat._wire, Path(flat.__file__).with_name("_wire.c"))
