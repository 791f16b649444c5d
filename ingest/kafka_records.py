"""A validated batch -> Kafka records that each fit the broker's message limit.

A request's events and emission records are grouped by emission stream (the
key, so one stream stays on one partition) and packed greedily into as few
records as fit under the limit. A unit that cannot fit even alone (an event with
megabytes of markers) is quarantined by `screen` before anything is sent, so the
client hears about it in `partial_success` instead of it being dropped.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from schemas.events import (
    EVALUATION_SPAN,
    SENTINEL_SPAN,
    DecodedBatch,
    EmissionRecord,
    EvaluationEvent,
    QuarantineRecord,
)
from schemas.records import BatchRecord, QuarantinedLetter, Record, encode, json_text

# Kafka's per-record framing, the key and our headers, generously bounded.
RECORD_OVERHEAD = 512
_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class OutRecord:
    """One Kafka message ready to send: `dead_letter` picks the topic."""

    key: bytes
    value: bytes
    record: Record
    dead_letter: bool = False


@dataclass(frozen=True)
class _Unit:
    """What must travel together: an event with its emission record, or one emission."""

    stream: str
    events: tuple[EvaluationEvent, ...]
    emissions: tuple[EmissionRecord, ...]


def payload_limit(max_message_bytes: int) -> int:
    return max_message_bytes - RECORD_OVERHEAD


def _units(batch: DecodedBatch) -> Iterator[_Unit]:
    by_key = {(e.emission.stream, e.emission.seq, e.event_id): e for e in batch.events}
    for emission in batch.emissions:
        event = by_key.pop((emission.stream, emission.seq, emission.event_id), None)
        if event is not None and emission.kind == "evaluation" and not emission.quarantined:
            yield _Unit(emission.stream, (event,), (emission,))
        else:
            yield _Unit(emission.stream, (), (emission,))
    for event in by_key.values():  # an event always has an emission; defensive only
        yield _Unit(event.emission.stream, (event,), ())


def _record(stream: str, units: list[_Unit], receipt_id: str, at: dt.datetime) -> BatchRecord:
    return BatchRecord(
        receipt_id=receipt_id,
        received_at=at,
        stream=stream,
        events=tuple(e for u in units for e in u.events),
        emissions=tuple(e for u in units for e in u.emissions),
    )


def _unit_size(unit: _Unit) -> int:
    """Bytes the unit adds to a record: its models' JSON plus separating commas."""
    parts = [*unit.events, *unit.emissions]
    return sum(len(json_text(part).encode()) + 1 for part in parts)


def _by_stream(batch: DecodedBatch) -> dict[str, list[_Unit]]:
    streams: dict[str, list[_Unit]] = {}
    for unit in _units(batch):
        streams.setdefault(unit.stream, []).append(unit)
    return streams


def _fits_whole(stream: str, units: list[_Unit], limit: int) -> bool:
    """The common case, one encode per stream: the stream's units fit one record."""
    return len(encode(_record(stream, units, "r" * 32, _EPOCH))) + 64 <= limit


def screen(batch: DecodedBatch, max_message_bytes: int) -> DecodedBatch:
    """Quarantine every event or sentinel too large to travel in one message."""
    limit = payload_limit(max_message_bytes)
    oversized = [
        unit
        for stream, units in _by_stream(batch).items()
        if not _fits_whole(stream, units, limit)
        for unit in units
        if _unit_size(unit) + 256 > limit
    ]
    if not oversized:
        return batch
    drop_events = {id(e) for u in oversized for e in u.events}
    drop_emissions = {id(e) for u in oversized for e in u.emissions}
    quarantined, arrived = [], []
    for unit in oversized:
        size = _unit_size(unit)
        reason = (
            f"record of {size} bytes exceeds the broker's message limit"
            f" of {max_message_bytes} bytes"
        )
        for emission in unit.emissions:
            event = unit.events[0] if unit.events else None
            quarantined.append(_too_large(emission, event, reason))
            arrived.append(emission.model_copy(update={"quarantined": True, "sentinel": None}))
    return DecodedBatch(
        events=tuple(e for e in batch.events if id(e) not in drop_events),
        emissions=tuple(e for e in batch.emissions if id(e) not in drop_emissions) + tuple(arrived),
        quarantined=batch.quarantined + tuple(quarantined),
        ignored_spans=batch.ignored_spans,
    )


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
    batch: DecodedBatch, receipt_id: str, received_at: dt.datetime, max_message_bytes: int
) -> list[OutRecord]:
    """Records for one screened batch: per-stream batch records, then dead letters."""
    limit = payload_limit(max_message_bytes)
    out: list[OutRecord] = []
    for stream, units in _by_stream(batch).items():
        whole = _record(stream, units, receipt_id, received_at)
        value = encode(whole)
        if len(value) <= limit:
            out.append(OutRecord(stream.encode(), value, whole))
            continue
        for chunk in _chunks(stream, units, limit):
            record = _record(stream, chunk, receipt_id, received_at)
            out.extend(_fitted(record, stream, chunk, limit, receipt_id, received_at))
    for span in batch.quarantined:
        letter = _fit_letter(
            QuarantinedLetter(receipt_id=receipt_id, received_at=received_at, span=span), limit
        )
        key = span.emission_stream or span.quarantine_id
        out.append(OutRecord(key.encode(), encode(letter), letter, dead_letter=True))
    return out


def _chunks(stream: str, units: list[_Unit], limit: int) -> Iterator[list[_Unit]]:
    empty = len(encode(_record(stream, [], "r" * 32, _EPOCH))) + 64
    chunk: list[_Unit] = []
    size = empty
    for unit in units:
        unit_size = _unit_size(unit)
        if chunk and size + unit_size > limit:
            yield chunk
            chunk, size = [], empty
        chunk.append(unit)
        size += unit_size
    if chunk:
        yield chunk


def _fitted(
    record: BatchRecord,
    stream: str,
    chunk: list[_Unit],
    limit: int,
    receipt_id: str,
    received_at: dt.datetime,
) -> list[OutRecord]:
    """The estimate is conservative; if it ever is not, halve until it fits."""
    value = encode(record)
    if len(value) <= limit or len(chunk) == 1:
        return [OutRecord(stream.encode(), value, record)]
    half = len(chunk) // 2
    out: list[OutRecord] = []
    for part in (chunk[:half], chunk[half:]):
        sub = _record(stream, part, receipt_id, received_at)
        out.extend(_fitted(sub, stream, part, limit, receipt_id, received_at))
    return out


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
