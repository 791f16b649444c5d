"""A validated batch -> Kafka records that each fit the broker's message limit.

A request's events and emission records are grouped by emission stream (the
key, so one stream stays on one partition) and packed greedily into as few
records as fit under the limit. A unit that cannot fit even alone (an event with
megabytes of markers) is quarantined by `screen` before anything is sent, so the
client hears about it in `partial_success` instead of it being dropped.

Every event and emission record is serialized once per request, by pydantic's
Rust serializer: `screen` measures units from those bytes, and `pack` assembles a
record by joining them under the record's envelope (the same bytes
`schemas.records.encode` gives for the record). `Screened` carries the bytes from
one to the other; `pack` serializes itself when handed a plain batch.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic_core import to_json

from schemas.events import (
    EVALUATION_SPAN,
    SENTINEL_SPAN,
    DecodedBatch,
    EmissionRecord,
    EvaluationEvent,
    QuarantineRecord,
)
from schemas.records import BATCH_HEAD, BatchRecord, QuarantinedLetter, Record, encode

# Kafka's per-record framing, the key and our headers, generously bounded.
RECORD_OVERHEAD = 512
# Room for the envelope's receipt id and time when `screen` sizes a record before
# they are known (a 32-character receipt id and a time with microseconds need 81).
_ENVELOPE_ALLOWANCE = 128
_EVENT_JSON = EvaluationEvent.__pydantic_serializer__.to_json
_EMISSION_JSON = EmissionRecord.__pydantic_serializer__.to_json
_EMISSIONS = b'],"emissions":['
_TAIL = b"]}"


@dataclass(frozen=True)
class OutRecord:
    """One Kafka message ready to send: `dead_letter` picks the topic."""

    key: bytes
    value: bytes
    record: Record
    dead_letter: bool = False


@dataclass(frozen=True)
class _Unit:
    """What must travel together: an event with its emission record, or one emission,
    with their JSON. `size` counts a separating comma per model."""

    stream: str
    events: tuple[EvaluationEvent, ...]
    emissions: tuple[EmissionRecord, ...]
    event_json: tuple[bytes, ...]
    emission_json: tuple[bytes, ...]
    size: int


@dataclass(frozen=True)
class Screened:
    """A screened batch with its units already serialized, per stream in order."""

    batch: DecodedBatch
    streams: dict[str, list[_Unit]]


def payload_limit(max_message_bytes: int) -> int:
    return max_message_bytes - RECORD_OVERHEAD


def _unit(
    stream: str, events: tuple[EvaluationEvent, ...], emissions: tuple[EmissionRecord, ...]
) -> _Unit:
    event_json = tuple(_EVENT_JSON(e) for e in events)
    emission_json = tuple(_EMISSION_JSON(e) for e in emissions)
    size = sum(len(j) + 1 for j in event_json) + sum(len(j) + 1 for j in emission_json)
    return _Unit(stream, events, emissions, event_json, emission_json, size)


def _pair(event: EvaluationEvent, emission: EmissionRecord) -> _Unit:
    """The common unit, spelled out: this runs once per span."""
    event_json = _EVENT_JSON(event)
    emission_json = _EMISSION_JSON(emission)
    size = len(event_json) + len(emission_json) + 2
    return _Unit(emission.stream, (event,), (emission,), (event_json,), (emission_json,), size)


def _units(batch: DecodedBatch) -> Iterator[_Unit]:
    by_key = {(e.emission.stream, e.emission.seq, e.event_id): e for e in batch.events}
    for emission in batch.emissions:
        event = by_key.pop((emission.stream, emission.seq, emission.event_id), None)
        if event is not None and emission.kind == "evaluation" and not emission.quarantined:
            yield _pair(event, emission)
        else:
            yield _unit(emission.stream, (), (emission,))
    for event in by_key.values():  # an event always has an emission; defensive only
        yield _unit(event.emission.stream, (event,), ())


def _by_stream(units: Iterator[_Unit]) -> dict[str, list[_Unit]]:
    streams: dict[str, list[_Unit]] = {}
    for unit in units:
        streams.setdefault(unit.stream, []).append(unit)
    return streams


def _tenant_head(tenant_id: str) -> bytes:
    return BATCH_HEAD + to_json(tenant_id) + b',"receipt_id":'


def _envelope(tenant_id: str, receipt_id: str, received_at: dt.datetime) -> bytes:
    """The envelope up to the stream: shared by every batch record of a request."""
    return _tenant_head(tenant_id) + to_json(receipt_id) + b',"received_at":' + to_json(received_at)


def _stream_head(envelope: bytes, stream: str) -> bytes:
    return envelope + b',"stream":' + to_json(stream) + b',"events":['


def _empty_size(tenant_id: str, stream: str) -> int:
    """A record of `stream` with no units and the longest envelope `screen` allows for."""
    head = _stream_head(_tenant_head(tenant_id), stream)
    return len(head) + _ENVELOPE_ALLOWANCE + len(_EMISSIONS) + len(_TAIL)


def screen_serialized(batch: DecodedBatch, max_message_bytes: int) -> Screened:
    """Quarantine every event or sentinel too large to travel in one message, keeping
    the serialized units for `pack`."""
    limit = payload_limit(max_message_bytes)
    streams = _by_stream(_units(batch))
    oversized: list[_Unit] = []
    for stream, units in streams.items():
        empty = _empty_size(batch.tenant_id, stream)
        if empty + sum(u.size for u in units) > limit:
            oversized.extend(u for u in units if empty + u.size > limit)
    if not oversized:
        return Screened(batch, streams)
    drop_events = {id(e) for u in oversized for e in u.events}
    drop_emissions = {id(e) for u in oversized for e in u.emissions}
    quarantined, arrived = [], []
    for unit in oversized:
        reason = (
            f"record of {_empty_size(batch.tenant_id, unit.stream) + unit.size} bytes"
            " exceeds the broker's"
            f" message limit of {max_message_bytes} bytes"
        )
        for emission in unit.emissions:
            event = unit.events[0] if unit.events else None
            quarantined.append(_too_large(emission, event, reason))
            arrived.append(emission.model_copy(update={"quarantined": True, "sentinel": None}))
    screened = DecodedBatch(
        tenant_id=batch.tenant_id,
        collapsed_spans=batch.collapsed_spans,
        events=tuple(e for e in batch.events if id(e) not in drop_events),
        emissions=tuple(e for e in batch.emissions if id(e) not in drop_emissions) + tuple(arrived),
        quarantined=batch.quarantined + tuple(quarantined),
        ignored_spans=batch.ignored_spans,
    )
    gone = {id(u) for u in oversized}
    kept = (u for units in streams.values() for u in units if id(u) not in gone)
    replaced = (_unit(e.stream, (), (e,)) for e in arrived)
    return Screened(screened, _by_stream(_chain(kept, replaced)))


def _chain(*parts: Iterator[_Unit]) -> Iterator[_Unit]:
    for part in parts:
        yield from part


def screen(batch: DecodedBatch, max_message_bytes: int) -> DecodedBatch:
    """Quarantine every event or sentinel too large to travel in one message."""
    return screen_serialized(batch, max_message_bytes).batch


def _too_large(
    emission: EmissionRecord, event: EvaluationEvent | None, reason: str
) -> QuarantineRecord:
    ident = f"too-large\x00{emission.stream}\x00{emission.seq}\x00{emission.event_id}"
    return QuarantineRecord(
        quarantine_id=hashlib.sha256(ident.encode()).hexdigest(),
        reason=reason,
        span_name=EVALUATION_SPAN if emission.kind == "evaluation" else SENTINEL_SPAN,
        trace_id=event.trace_id if event else "",
        span_id=event.span_id if event else "",
        emission_stream=emission.stream,
        emission_seq=emission.seq,
        attributes={"holonograph.event.id": emission.event_id} if emission.event_id else {},
    )


def pack(
    batch: DecodedBatch | Screened,
    receipt_id: str,
    received_at: dt.datetime,
    max_message_bytes: int,
) -> list[OutRecord]:
    """Records for one screened batch: per-stream batch records, then dead letters."""
    screened = batch if isinstance(batch, Screened) else Screened(batch, _by_stream(_units(batch)))
    limit = payload_limit(max_message_bytes)
    tenant_id = screened.batch.tenant_id
    envelope = _envelope(tenant_id, receipt_id, received_at)
    out: list[OutRecord] = []
    for stream, units in screened.streams.items():
        head = _stream_head(envelope, stream)
        for chunk in _chunks(units, len(head) + len(_EMISSIONS) + len(_TAIL), limit):
            out.append(_batch_record(head, tenant_id, stream, chunk, receipt_id, received_at))
    for span in screened.batch.quarantined:
        letter = _fit_letter(
            QuarantinedLetter(
                tenant_id=tenant_id, receipt_id=receipt_id, received_at=received_at, span=span
            ),
            limit,
        )
        key = span.emission_stream or span.quarantine_id
        out.append(OutRecord(key.encode(), encode(letter), letter, dead_letter=True))
    return out


def _chunks(units: list[_Unit], empty: int, limit: int) -> Iterator[list[_Unit]]:
    """Greedy, exact up to the commas counted per model: a chunk never exceeds `limit`
    unless one unit alone does (which `screen` quarantines)."""
    chunk: list[_Unit] = []
    size = empty
    for unit in units:
        if chunk and size + unit.size > limit:
            yield chunk
            chunk, size = [], empty
        chunk.append(unit)
        size += unit.size
    if chunk:
        yield chunk


def _batch_record(
    head: bytes,
    tenant_id: str,
    stream: str,
    chunk: list[_Unit],
    receipt_id: str,
    received_at: dt.datetime,
) -> OutRecord:
    value = b"".join(
        (
            head,
            b",".join(j for u in chunk for j in u.event_json),
            _EMISSIONS,
            b",".join(j for u in chunk for j in u.emission_json),
            _TAIL,
        )
    )
    record = BatchRecord.model_construct(
        tenant_id=tenant_id,
        receipt_id=receipt_id,
        received_at=received_at,
        stream=stream,
        events=tuple(e for u in chunk for e in u.events),
        emissions=tuple(e for u in chunk for e in u.emissions),
    )
    return OutRecord(stream.encode(), value, record)


def _fit_letter(letter: QuarantinedLetter, limit: int) -> QuarantinedLetter:
    """Keep as much of a rejected span as fits; drop the bulky parts if it does not."""
    if len(encode(letter)) <= limit:
        return letter
    span = letter.span
    size = len(encode(letter))
    span = span.model_copy(
        update={
            "span_proto": b"",
            "attributes": {},
            "reason": f"{span.reason} (original span of about {size} bytes not kept:"
            " over the broker's message limit)",
        }
    )
    letter = letter.model_copy(update={"span": span})
    if len(encode(letter)) > limit:
        letter = letter.model_copy(
            update={"span": span.model_copy(update={"resource_attributes": {}})}
        )
    return letter


class ScreenedBatches:
    """`Screened` work kept from `screen` (decode thread) to `submit` (event loop),
    found by the batch object itself. Only a weak reference to the batch is held: an
    entry goes when its batch is freed, so a request abandoned between the two leaks
    nothing."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[weakref.ref[DecodedBatch], dict[str, list[_Unit]]]] = {}
        self._lock = threading.Lock()

    def keep(self, screened: Screened) -> DecodedBatch:
        batch = screened.batch
        key = id(batch)
        with self._lock:
            self._held[key] = (weakref.ref(batch), screened.streams)
        weakref.finalize(batch, self._forget, key)
        return batch

    def take(self, batch: DecodedBatch) -> DecodedBatch | Screened:
        with self._lock:
            held = self._held.pop(id(batch), None)
        if held is None or held[0]() is not batch:
            return batch
        return Screened(batch, held[1])

    def _forget(self, key: int) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[0]() is None:
                del self._held[key]

    def __len__(self) -> int:
        return len(self._held)
