"""Span attributes read without a Python object per attribute, for the hot path.

Reading `span.attributes` of the OTLP classes costs a `KeyValue` and an `AnyValue`
wrapper per attribute, and two calls on each: more than half of the hot path's CPU.
A `KeyValue` is encoded exactly like an entry of a protobuf map (`key` = 1, `value` =
2), so the same request bytes parse, under the messages below, into spans whose
`attributes` are `map<string, bytes>`: upb builds the whole map in C, and each value
is left as its `AnyValue` encoding, which `read` decodes for the shapes nearly every
attribute has (a string, an int, a double, a bool, an array of those).

What the map form cannot say, `read` does not guess: it raises `Unread` and the
caller reads that span the ordinary way (`ingest.export.decode.attributes`, the
reference). So: an `AnyValue` of another shape (a key-value list, bytes, several
fields); and the order of the attributes, which a map does not keep, so a caller
that needs it (substrate columns, markers and extras keep the span's order) reads the
span the ordinary way when it has more than one such attribute. The bytes parsed are
the request's own (`parse(request, wire)`) when they hold no `KeyValue` with its value
sent twice, else its serialization after the OTLP classes parsed it: a value sent
twice in one `KeyValue` was merged by that parse, as the reference reads it. A
repeated key keeps its last value in both (`attributes` keeps the first position,
which only order-keeping callers see). An `AnyValue` as it arrived (a varint longer
than it needs, fields in any order or twice) is read by its structure: one field,
nothing after it, or `Unread`.

A caller reads them with a `Layout`: the keys it takes, each of a kind (a string, a
bool, an int, a number, strings, any), given as a tuple of values in a fixed order
(`fix`: the same from the reference's attributes), with the span's other attributes
as a dict (`rest`): no dict of its attributes to look each key up in, and the kinds'
checks made where the value is read. A value of another kind is the reference's to
judge (the caller reads that span the ordinary way).

That is the pure form (`PURE`): the map read, then `fix`. Where the compiled reader
`ingest.export._wire` was built (`setup.py`, decision 0018), `spans` reads the
request's bytes with it instead (`COMPILED`): one walk in C, each span's and event's
values placed and checked as they are read, `rest` in the span's order (so no caller
reads a span again for its order), each value as `_value` reads it; a request it does
not read exactly as the OTLP parse does (a `KeyValue` with its value twice, a known
field with another wire type, ...) is read by the pure form.
`HOLONOGRAPH_WIRE_READER=pure` (or `FORM = PURE`) keeps the pure form where the
compiled one is built.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import struct
import warnings
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

_PACKAGE = "holonograph.flat"
_FIELD = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _FIELD.LABEL_OPTIONAL, _FIELD.LABEL_REPEATED


def _message(
    file: descriptor_pb2.FileDescriptorProto,
    name: str,
    fields: list[tuple[str, int, int, int, str]],
    attributes_at: int = 0,
) -> None:
    message = file.message_type.add(name=name)
    for field_name, number, kind, label, type_name in fields:
        field = message.field.add(name=field_name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = f".{file.package}.{type_name}"
    if attributes_at:  # attributes as map<string, bytes>: KeyValue's own encoding
        entry = message.nested_type.add(name="AttributesEntry")
        entry.field.add(name="key", number=1, type=_FIELD.TYPE_STRING, label=_ONE)
        entry.field.add(name="value", number=2, type=_FIELD.TYPE_BYTES, label=_ONE)
        entry.options.map_entry = True
        message.field.add(
            name="attributes",
            number=attributes_at,
            type=_FIELD.TYPE_MESSAGE,
            label=_MANY,
            type_name=f".{file.package}.{name}.AttributesEntry",
        )


def _built(file: descriptor_pb2.FileDescriptorProto) -> type[Message]:
    """The class of `file`'s `Request`, from a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    built: type[Message] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{file.package}.Request")
    )
    return built


def _request_class() -> type[Message]:
    """The OTLP trace request's messages, with the fields the hot path reads (field
    numbers of opentelemetry-proto's trace.proto; the others stay unknown fields)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="holonograph_flat_trace.proto", package=_PACKAGE, syntax="proto3"
    )
    m = _FIELD.TYPE_MESSAGE
    _message(file, "Event", [("name", 2, _FIELD.TYPE_STRING, _ONE, "")], attributes_at=3)
    _message(
        file,
        "Span",
        [
            ("trace_id", 1, _FIELD.TYPE_BYTES, _ONE, ""),
            ("span_id", 2, _FIELD.TYPE_BYTES, _ONE, ""),
            ("name", 5, _FIELD.TYPE_STRING, _ONE, ""),
            ("end_time_unix_nano", 8, _FIELD.TYPE_FIXED64, _ONE, ""),
            ("events", 11, m, _MANY, "Event"),
        ],
        attributes_at=9,
    )
    _message(file, "ScopeSpans", [("spans", 2, m, _MANY, "Span")])
    _message(file, "ResourceSpans", [("scope_spans", 2, m, _MANY, "ScopeSpans")])
    _message(file, "Request", [("resource_spans", 1, m, _MANY, "ResourceSpans")])
    return _built(file)


FlatRequest = _request_class()


def _check_class() -> type[Message]:
    """The request's messages down to the attributes, each `KeyValue` a message of two
    bytes fields (the value's `AnyValue` left as its bytes), everything else unknown
    fields: what tells whether a request arrived without a field sent twice where the
    OTLP parse merges (`parse`)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="holonograph_flat_check.proto", package=f"{_PACKAGE}.check", syntax="proto3"
    )
    b, m = _FIELD.TYPE_BYTES, _FIELD.TYPE_MESSAGE
    _message(file, "KeyValue", [("key", 1, b, _ONE, ""), ("value", 2, b, _ONE, "")])
    _message(file, "Event", [("attributes", 3, m, _MANY, "KeyValue")])
    _message(
        file,
        "Span",
        [("attributes", 9, m, _MANY, "KeyValue"), ("events", 11, m, _MANY, "Event")],
    )
    _message(file, "ScopeSpans", [("spans", 2, m, _MANY, "Span")])
    _message(file, "ResourceSpans", [("scope_spans", 2, m, _MANY, "ScopeSpans")])
    _message(file, "Request", [("resource_spans", 1, m, _MANY, "ResourceSpans")])
    return _built(file)


_Check = _check_class()


class Unread(Exception):
    """This attribute value (or this span's attribute order) is for the reference reader."""


def parse(request: PB2ExportTraceServiceRequest, wire: bytes | None = None) -> Any | None:
    """`request` under the flat messages (its spans in the same places), or None: the
    request is for the reference path.

    `wire`: the bytes `request` was parsed from, parsed as they are when they hold
    no field twice where the OTLP parse would merge the two: a `KeyValue`'s `value`
    (two arrays append), which the map keeps the last of. The check: under `_Check`
    (no enums, no maps, the rest unknown fields kept as they are) the bytes are as
    long as their canonical encoding. A canonical encoding is never longer than the
    bytes it was parsed from (a field sent twice keeps the last bytes: shorter), so
    equal lengths mean no `value` twice. Otherwise the request is serialized again
    (as the OTLP classes left it). A `KeyValue` with a field besides its key and value
    (OTLP's `key_strindex`, an unknown field) is a map entry upb drops: a request whose
    maps hold fewer entries than it has `KeyValue`s (that, or a key sent twice) is for
    the reference (`_whole`)."""
    check: Any = None
    data = wire
    if wire is not None:
        try:
            check = _Check.FromString(wire)
        except DecodeError:
            check = None
        if check is not None and check.ByteSize() != len(wire):
            check = None
    try:
        if check is None:
            data = request.SerializeToString()
            check = _Check.FromString(data)
        parsed = FlatRequest.FromString(data)
    except DecodeError:
        return None
    return parsed if _whole(check, parsed) else None


def _whole(check: Any, parsed: Any) -> bool:
    """Every `KeyValue` of `check` (the request under `_Check`) is in `parsed`'s maps
    (the same request under `FlatRequest`), as the reference reads them."""
    for check_rs, parsed_rs in zip(check.resource_spans, parsed.resource_spans, strict=True):
        for check_ss, parsed_ss in zip(check_rs.scope_spans, parsed_rs.scope_spans, strict=True):
            for check_span, span in zip(check_ss.spans, parsed_ss.spans, strict=True):
                if not _same(check_span.attributes, span.attributes):
                    return False
                for check_event, event in zip(check_span.events, span.events, strict=True):
                    if not _same(check_event.attributes, event.attributes):
                        return False
    return True


def _same(pairs: Any, entries: Any) -> bool:
    """The map `entries` holds each of `pairs`' keys with its last value: one entry per
    pair (nearly always), or else compared key by key (a key sent twice keeps its last
    value in both; an entry upb dropped is missing, or an earlier value of its key)."""
    if len(pairs) == len(entries):
        return True
    try:
        last = {pair.key.decode(): pair.value for pair in pairs}
    except UnicodeDecodeError:
        return False
    return last == dict(entries)


_double = struct.Struct("<d").unpack_from
_TWO_64 = 1 << 64
_INT64_SIGN = 1 << 63


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `at`."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise Unread


def _value(data: bytes, at: int, end: int) -> Any:
    """The `AnyValue` encoded in data[at:end], as `decode.any_value` reads it."""
    if at == end:
        return None  # no value set
    tag = data[at]
    if tag == 0x0A:  # string_value
        size = data[at + 1]
        start = at + 2
        if size >= 0x80:
            size, start = _varint(data, at + 1)
        if start + size != end:
            raise Unread
        try:
            return data[start:end].decode()
        except UnicodeDecodeError:
            raise Unread from None
    if tag == 0x18:  # int_value
        number, after = _varint(data, at + 1)
        if after != end:
            raise Unread
        number &= _TWO_64 - 1  # a tenth byte's bits past 64 (the bytes as they arrived)
        return number - _TWO_64 if number >= _INT64_SIGN else number
    if tag == 0x21:  # double_value
        if at + 9 != end:
            raise Unread
        return _double(data, at + 1)[0]
    if tag == 0x10:  # bool_value
        if at + 2 != end or data[at + 1] > 1:
            raise Unread
        return data[at + 1] == 1
    if tag == 0x2A:  # array_value: ArrayValue { repeated AnyValue values = 1 }
        size, start = _varint(data, at + 1)
        if start + size != end:
            raise Unread
        values = []
        while start < end:
            if data[start] != 0x0A:
                raise Unread
            size, item = _varint(data, start + 1)
            start = item + size
            if start > end:
                raise Unread
            values.append(_value(data, item, start))
        return values
    raise Unread  # kvlist_value, bytes_value, several fields, unknown fields


def read(attributes: Any) -> dict[str, Any]:
    """A flat span's or event's attributes as `decode.attributes` reads them (in
    another order); `Unread` for a value it does not decode."""
    out: dict[str, Any] = {}
    try:
        for key in attributes:  # (the map's `items` is a Python-level view: slower)
            data = attributes[key]
            size = len(data)
            tag = data[0]
            # The shapes nearly every value has, inline (one field, nothing after it):
            if tag == 0x0A and size < 130 and data[1] == size - 2:  # a short string
                out[key] = data[2:].decode()
            elif size == 2 and data[1] < 0x80 and (tag == 0x18 or (tag == 0x10 and data[1] < 2)):
                out[key] = data[1] if tag == 0x18 else data[1] == 1  # int 0-127, bool
            elif size == 9 and tag == 0x21:
                out[key] = _double(data, 1)[0]
            elif size == 3 and tag == 0x18 and data[1] >= 0x80 and data[2] < 0x80:
                out[key] = (data[1] & 0x7F) | (data[2] << 7)  # int 128-16383 (a seq)
            elif tag == 0x2A and size < 130 and data[1] == size - 2:  # a short array
                out[key] = _strings(data, size)
            else:
                out[key] = _value(data, 0, size)
    except (IndexError, UnicodeDecodeError):  # not from a parsed request (or empty)
        raise Unread from None
    return out


def pick(attributes: Any, keys: tuple[str, ...]) -> list[Any]:
    """The values of `keys` in a flat span's or event's attributes, as `read` reads them
    (None for a key it does not have), without reading the others: `Unread` for a value
    it does not decode."""
    out: list[Any] = []
    get = attributes.get
    try:
        for key in keys:
            data = get(key)
            if data is None:
                out.append(None)
                continue
            size = len(data)
            tag = data[0]
            if tag == 0x0A and size < 130 and data[1] == size - 2:  # a short string
                out.append(data[2:].decode())
            elif size == 2 and tag == 0x10 and data[1] < 2:
                out.append(data[1] == 1)
            elif size == 9 and tag == 0x21:
                out.append(_double(data, 1)[0])
            else:
                out.append(_value(data, 0, size))
    except (IndexError, UnicodeDecodeError):  # not from a parsed request (or empty)
        raise Unread from None
    return out


def _strings(data: bytes, end: int) -> list[Any]:
    """The values of the short `array_value` of data[0:end]: short strings inline, any
    other shape through `_value`."""
    values: list[Any] = []
    start = 2
    while start < end:
        if data[start] != 0x0A:
            raise Unread
        size = data[start + 1]
        item = start + 2
        start = item + size  # a short array's items are shorter than 128 bytes
        if start > end:
            raise Unread
        if size and data[item] == 0x0A and data[item + 1] == size - 2:
            values.append(data[item + 2 : start].decode())
        else:
            values.append(_value(data, item, start))
    return values


# The kinds a layout's value may be of (`Layout`), each a letter as `_wire` takes them.
TEXT = "t"  # a string; absent (or without a value): empty
ANY = "a"  # as read; a key without a value is for the reference (presence is compared)
BOOL = "b"  # a bool, or None
INT = "i"  # an int, or None
NUMBER = "n"  # a finite float or an int, as a float; or None
STRINGS = "s"  # a list of strings (a string: a list of one; absent: empty)
_KINDS = frozenset(TEXT + ANY + BOOL + INT + NUMBER + STRINGS)


class Layout:
    """Which attributes a caller reads as values in a fixed order, and of what kind:
    `spans` gives each span's and event's values of `span` and `event` keys as a
    tuple in their order, as `fix` takes them (None where a value is not of its kind),
    and a span's other attributes as a dict (`rest`); an event's others are not read.
    `wire`: what the compiled reader takes (the same object every call)."""

    __slots__ = ("event_keys", "event_kinds", "span_keys", "span_kinds", "span_set", "wire")

    def __init__(self, span: Sequence[tuple[str, str]], event: Sequence[tuple[str, str]]) -> None:
        self.span_keys = tuple(key for key, _ in span)
        self.span_set = frozenset(self.span_keys)
        self.span_kinds = "".join(kind for _, kind in span)
        self.event_keys = tuple(key for key, _ in event)
        self.event_kinds = "".join(kind for _, kind in event)
        keys = (self.span_keys, self.event_keys)
        if not set(self.span_kinds + self.event_kinds) <= _KINDS or any(
            len(set(k)) != len(k) for k in keys
        ):
            raise ValueError("a layout's keys are distinct, of the kinds flat names")
        self.wire = (
            self.span_keys,
            self.span_kinds.encode(),
            self.event_keys,
            self.event_kinds.encode(),
        )


@functools.cache
def _places(kinds: str) -> tuple[tuple[int, ...], ...]:
    """The places of each kind in `kinds`: text, any, bool, int, number, strings."""
    order = (TEXT, ANY, BOOL, INT, NUMBER, STRINGS)
    return tuple(tuple(i for i, k in enumerate(kinds) if k == kind) for kind in order)


def _taken(values: list[Any], kinds: str) -> tuple[Any, ...] | None:
    """`values` (None: absent) as their `kinds` take them, or None: one is not of its
    kind. Kind by kind, in one call: the pure form does this for every span."""
    text, _, flags, ints, numbers, strings = _places(kinds)
    for i in text:
        value = values[i]
        if value is None:
            values[i] = ""
        elif type(value) is not str:
            return None
    for i in flags:
        if values[i] is not None and type(values[i]) is not bool:
            return None
    for i in ints:
        if values[i] is not None and type(values[i]) is not int:
            return None
    for i in numbers:
        value = values[i]
        if type(value) is int:
            values[i] = float(value)
        elif value is not None and (type(value) is not float or not math.isfinite(value)):
            return None
    for i in strings:
        value = values[i]
        if value is None:
            values[i] = []
        elif type(value) is str:
            values[i] = [value]
        elif type(value) is list:
            for item in value:
                if type(item) is not str:
                    return None
            values[i] = list(value)
        else:
            return None
    return tuple(values)


def fix(attrs: dict[str, Any], keys: tuple[str, ...], kinds: str) -> tuple[Any, ...] | None:
    """The values of `keys` in `attrs` (the reference's attributes), as their `kinds`
    take them: what the compiled reader gives, in Python; None where one is not of its
    kind, or a key of kind `ANY` is there without a value."""
    values = list(map(attrs.get, keys))
    for i in _places(kinds)[1]:
        if values[i] is None and keys[i] in attrs:
            return None
    return _taken(values, kinds)


def rest(attrs: dict[str, Any], keys: Container[str]) -> dict[str, Any] | None:
    """`attrs` but `keys` (`Layout.span_set`), in their order; None for none."""
    out = {key: value for key, value in attrs.items() if key not in keys}
    return out or None


class Form(NamedTuple):
    """How the hot path reads the spans `spans` gives, with a `Layout`: `span(item,
    layout)` a span's values and its other attributes (`rest`), `event(item, layout)`
    an event's values; `Unread` where a value is not of its shape or kind (the caller
    reads that span or event the ordinary way). `ordered`: `rest` is in the span's
    order (the reference's: a repeated key keeps its first position)."""

    name: str
    span: Callable[[Any, Layout], tuple[tuple[Any, ...], dict[str, Any] | None]]
    event: Callable[[Any, Layout], tuple[Any, ...]]
    ordered: bool


def _map_span(item: Any, layout: Layout) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    attrs = read(item.attributes)
    values = fix(attrs, layout.span_keys, layout.span_kinds)
    if values is None:
        raise Unread
    return values, rest(attrs, layout.span_set)


def _map_event(item: Any, layout: Layout) -> tuple[Any, ...]:
    keys, kinds = layout.event_keys, layout.event_kinds
    if ANY in kinds:  # a key without a value is told from an absent one by the dict
        values = fix(read(item.attributes), keys, kinds)
    else:
        values = _taken(pick(item.attributes, keys), kinds)
    if values is None:
        raise Unread
    return values


PURE = Form("pure", _map_span, _map_event, ordered=False)


def _compiled_span(item: Any, layout: Layout) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    if item.values is None:
        raise Unread
    return item.values, item.rest


def _compiled_event(item: Any, layout: Layout) -> tuple[Any, ...]:
    if item.values is None:
        raise Unread
    values: tuple[Any, ...] = item.values
    return values


def _current(module: Any, source: Path) -> bool:
    """`module` (the compiled reader) was built from `source`: the digest `setup.py`
    compiles into it is the source's (a source not there: a build of its own kind,
    taken as it is)."""
    try:
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    except OSError:
        return True
    return getattr(module, "SOURCE", None) == digest


try:
    from ingest.export import _wire
except ImportError:  # not built (no compiler at install): the pure form only
    _wire = None  # type: ignore[assignment]
if _wire is not None and not _current(_wire, Path(__file__).with_name("_wire.c")):
    warnings.warn(
        "ingest.export._wire was built from another _wire.c than the one beside it:"
        " reading with the pure form; `pip install -e .` builds it again",
        RuntimeWarning,
        stacklevel=1,
    )
    _wire = None  # type: ignore[assignment]

COMPILED: Form | None = (
    None if _wire is None else Form("compiled", _compiled_span, _compiled_event, ordered=True)
)
# The form `spans` reads with: the compiled one where it was built, unless told not to.
FORM: Form = (
    COMPILED
    if COMPILED is not None and os.environ.get("HOLONOGRAPH_WIRE_READER", "") != "pure"
    else PURE
)

Spans = Sequence[Sequence[Sequence[Any]]]


def _kept(rows: list[list[Any]]) -> None:
    """Without the compiled reader, rows stay where the garbage collector walks them."""


# `untrack(rows)`: the garbage collector no longer walks these rows, nor their lists of
# strings (plain values, which nothing in them refers back to: no cycle passes through
# them). A batch's rows live until their commit, and were most of what each young
# collection walked: the collection that comes every 100k allocations
# (`ingest.service.gctune`) fell from ~2 to ~0.7 us a span on the decode thread (the
# bench payload, in process), and comes less often.
untrack: Callable[[list[list[Any]]], None] = _kept if _wire is None else _wire.untrack


def spans(
    request: PB2ExportTraceServiceRequest,
    layout: Layout,
    wire: bytes | None = None,
    form: Form | None = None,
) -> tuple[Spans, Form] | None:
    """The spans of `request` (per resource spans, per scope spans: in the request's
    places), each with `name`, `trace_id`, `span_id`, `end_time_unix_nano` and
    `events` (each with `name`), and the form that reads their attributes with
    `layout`; None: the request is for the reference path. `wire`: the bytes `request`
    was parsed from (`parse`); `form`: `FORM` unless given."""
    form = FORM if form is None else form
    if form is COMPILED:
        got = _wire.spans(request.SerializeToString() if wire is None else wire, layout.wire)
        if got is not None:
            return got, form
    parsed = parse(request, wire)
    if parsed is None:
        return None
    return [[scope.spans for scope in rs.scope_spans] for rs in parsed.resource_spans], PURE
