"""A validated batch -> Kafka records that each fit the broker's message limit.

A request's events and emission records are grouped by emission stream (the
key, so one stream stays on one partition) and packed greedily into as few
records as fit under the limit. Events without emission ordinals (OpenTelemetry
GenAI evaluations) travel in records of no stream (version 5), keyed by their first
event id. A unit that cannot fit even alone (an event with
megabytes of markers) is quarantined by `screen` before anything is sent, so the
client hears about it in `partial_success` instead of it being dropped.

Every event and emission record is serialized once per request, by pydantic's
Rust serializer: `screen` (the Kafka hand-off's `prepare`, on the decode thread)
measures units from those bytes, and `pack` (its `submit`) joins them into records
under the envelope `schemas.records` lays out (the same bytes `schemas.records.encode`
gives for the record). `Screened` carries the bytes from one to the other.

A request the hot path took is written, by default, as version 7 records of its rows
instead (`screen_rows`): the `FastBatch`'s rows serialized as the record holds them,
no models' JSON made (`ingest.handoff.kafka.KafkaHandoff`'s `record_version`). At
version 8 (`screen_columns`), a request of one stream whose rows fit one record is
written as their columns: transposed at C speed, a column of one value written once
(the tenant's resource, the SDK, the lens...), so fewer bytes to serialize, compress
and parse; any other such request as version 7.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from ingest.export.fast import FastBatch
from ingest.handoff.protocol import Prepared
from schemas.events import (
    EVALUATION_SPAN,
    OVERRIDE_SPAN,
    SENTINEL_SPAN,
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
    ValidatedBatch,
)
from schemas.records import (
    COLUMNS_VERSION,
    DIMENSION_ROW,
    NO_ORDINALS_VERSION,
    NO_STREAM,
    OVERRIDE_VERSION,
    ROWS_VERSION,
    SCHEMA_VERSION,
    BatchRecord,
    QuarantinedLetter,
    Record,
    batch_envelope,
    batch_frame_size,
    batch_head,
    columns_head,
    empty_batch_size,
    empty_rows_size,
    encode,
    join_batch,
    record_agents,
    rows_head,
)

# Kafka's per-record framing, the key and our headers, generously bounded.
RECORD_OVERHEAD = 512
_EVENT_JSON = EvaluationEvent.__pydantic_serializer__.to_json
_EMISSION_JSON = EmissionRecord.__pydantic_serializer__.to_json
_OVERRIDE_JSON = OverrideEvent.__pydantic_serializer__.to_json
# What a record holding overrides (version 6) has besides a version 4 record's frame:
# `,"overrides":[` and `]`.
_OVERRIDES_FRAME = 16


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
    overrides: tuple[OverrideEvent, ...] = ()


@dataclass(frozen=True)
class Screened(Prepared):
    """A batch as the Kafka hand-off carries it from `prepare` to `submit`: screened,
    its units already serialized, per stream in order. `rows`: the units are a hot-path
    batch's rows (`screen_rows`), packed into version 7 records with these contract
    findings; None: models' JSON, packed into version 4 (5, 6) records."""

    streams: dict[str, list[_Unit]]
    rows: tuple[str, ...] | None = None
    # A version 8 record: the one stream's one unit holds its tables' JSON object.
    columns: bool = False


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


def _override_unit(override: OverrideEvent, emission: EmissionRecord) -> _Unit:
    """An override with its arrival: they travel together, in a version 6 record."""
    emission_json = _EMISSION_JSON(emission)
    size = len(_OVERRIDE_JSON(override)) + len(emission_json) + 2 + _OVERRIDES_FRAME
    return _Unit(emission.stream, (), (emission,), (), (emission_json,), size, (override,))


def _units(batch: ValidatedBatch) -> Iterator[_Unit]:
    by_key = {(e.stream, e.emission.seq, e.event_id): e for e in batch.events if e.emission}
    overrides = {(o.stream, o.emission.seq, o.event_id): o for o in batch.overrides if o.emission}
    for emission in batch.emissions:
        key = (emission.stream, emission.seq, emission.event_id)
        event = by_key.pop(key, None)
        override = overrides.pop(key, None) if event is None and overrides else None
        if event is not None and emission.kind == "evaluation" and not emission.quarantined:
            yield _pair(event, emission)
        elif override is not None and not emission.quarantined:
            yield _override_unit(override, emission)
        else:
            yield _unit(emission.stream, (), (emission,))
    for event in by_key.values():  # an event with ordinals has an emission; defensive only
        yield _unit(event.stream, (event,), ())
    for override in overrides.values():  # as for events: defensive only
        size = len(_OVERRIDE_JSON(override)) + 1 + _OVERRIDES_FRAME
        yield _Unit(override.stream, (), (), (), (), size, (override,))
    for event in batch.events:  # without ordinals: records of no stream (version 5)
        if event.emission is None:
            yield _unit(NO_STREAM, (event,), ())


def _by_stream(units: Iterator[_Unit]) -> dict[str, list[_Unit]]:
    streams: dict[str, list[_Unit]] = {}
    for unit in units:
        streams.setdefault(unit.stream, []).append(unit)
    return streams


def screen(batch: ValidatedBatch, max_message_bytes: int) -> Screened:
    """Quarantine every event or sentinel too large to travel in one message, keeping
    the serialized units for `pack`."""
    limit = payload_limit(max_message_bytes)
    streams = _by_stream(_units(batch))
    agents = record_agents(batch.agents)
    oversized: list[_Unit] = []
    for stream, units in streams.items():
        empty = empty_batch_size(batch.tenant_id, agents, stream)
        if empty + sum(u.size for u in units) > limit:
            oversized.extend(u for u in units if empty + u.size > limit)
    if not oversized:
        return Screened(batch, streams)
    drop_events = {id(e) for u in oversized for e in (*u.events, *u.overrides)}
    drop_emissions = {id(e) for u in oversized for e in u.emissions}
    quarantined, arrived = [], []
    for unit in oversized:
        reason = (
            f"record of {empty_batch_size(batch.tenant_id, agents, unit.stream) + unit.size}"
            " bytes"
            " exceeds the broker's"
            f" message limit of {max_message_bytes} bytes"
        )
        for emission in unit.emissions:
            event = unit.events[0] if unit.events else (unit.overrides or (None,))[0]
            quarantined.append(_too_large(emission, event, reason))
            arrived.append(emission.model_copy(update={"quarantined": True, "sentinel": None}))
    screened = ValidatedBatch(
        tenant_id=batch.tenant_id,
        agents=batch.agents,
        collapsed_spans=batch.collapsed_spans,
        events=tuple(e for e in batch.events if id(e) not in drop_events),
        emissions=tuple(e for e in batch.emissions if id(e) not in drop_emissions) + tuple(arrived),
        quarantined=batch.quarantined + tuple(quarantined),
        overrides=tuple(o for o in batch.overrides if id(o) not in drop_events),
        ignored_spans=batch.ignored_spans,
    )
    gone = {id(u) for u in oversized}
    kept = (u for units in streams.values() for u in units if id(u) not in gone)
    replaced = (_unit(e.stream, (), (e,)) for e in arrived)
    return Screened(screened, _by_stream(_chain(kept, replaced)))


def screen_fast(batch: FastBatch, max_message_bytes: int) -> Screened | None:
    """`screen` of a hot-path batch, from the JSON it carries (`fast_batch(with_json=
    True)`): the same units, per stream in order. None when a unit is too large to
    travel alone: `screen` quarantines it, on the batch's models."""
    limit = payload_limit(max_message_bytes)
    streams: dict[str, list[_Unit]] = {}
    events = iter(batch.event_json)
    for receipt, emission_json in zip(batch.receipts, batch.receipt_json, strict=True):
        stream = receipt[1]
        if receipt[4] == "evaluation":  # its event precedes it: the pair travels together
            event_json = next(events)
            size = len(event_json) + len(emission_json) + 2
            unit = _Unit(stream, (), (), (event_json,), (emission_json,), size)
        else:
            unit = _Unit(stream, (), (), (), (emission_json,), len(emission_json) + 1)
        streams.setdefault(stream, []).append(unit)
    agents = record_agents(batch.agents)
    for stream, units in streams.items():
        empty = empty_batch_size(batch.tenant_id, agents, stream)
        if empty + sum(u.size for u in units) > limit and any(
            empty + u.size > limit for u in units
        ):
            return None
    return Screened(batch, streams)


def screen_rows(batch: FastBatch, max_message_bytes: int) -> Screened | None:
    """`screen_fast` for version 7 records: the units are the batch's rows as a version 7
    record holds them (`schemas.records.EVENT_ROW`, `EMISSION_ROW`), serialized here, so
    the batch needs no models' JSON. A stream whose rows fit one record is serialized in
    one piece (one unit); a larger one row by row (an event with its arrival per unit).
    None when a unit is too large to travel alone."""
    limit = payload_limit(max_message_bytes)
    findings = tuple(batch.contract_findings)
    agents = record_agents(batch.agents)
    by_stream: dict[str, tuple[list[list[Any]], list[list[Any]]]] = {}
    events = iter(batch.events)
    layered = batch.layers
    dimensions = batch.dimensions if layered else batch.dimension_values
    at = 0
    for receipt in batch.receipts:
        stream = receipt[1]
        rows = by_stream.get(stream) or by_stream.setdefault(stream, ([], []))
        rows[1].append([receipt[2], *receipt[4:10], *receipt[11:]])
        if receipt[4] == "evaluation":  # its event precedes it: the pair travels together
            row = next(events)
            end = at + len(row[22])
            dims = [d[2:8] for d in dimensions[at:end]] if layered else dimensions[at:end]
            rows[0].append([*row[1:22], *row[24:30], dims])
            at = end
    streams: dict[str, list[_Unit]] = {}
    for stream, (event_rows, emission_rows) in by_stream.items():
        empty = empty_rows_size(batch.tenant_id, agents, stream, findings)
        event_json, emission_json = to_json(event_rows)[1:-1], to_json(emission_rows)[1:-1]
        size = len(event_json) + len(emission_json) + 2
        if empty + size <= limit:
            streams[stream] = [_Unit(stream, (), (), (event_json,), (emission_json,), size)]
            continue
        units = streams[stream] = []
        rest = iter(event_rows)
        for emission in emission_rows:
            emission_json = to_json(emission)
            if emission[1] == "evaluation":
                event_json = to_json(next(rest))
                size = len(event_json) + len(emission_json) + 2
                units.append(_Unit(stream, (), (), (event_json,), (emission_json,), size))
            else:
                size = len(emission_json) + 1
                units.append(_Unit(stream, (), (), (), (emission_json,), size))
            if empty + size > limit:
                return None
    return Screened(batch, streams, findings)


# An event row's values as a version 7 (8) record holds them: the FastBatch row's, less
# the tenant (0), the dimension ids (22) and the stream (23); then its dimensions.
_EVENT_COLUMNS = (*range(1, 22), *range(24, 30))
# An emission row's: the receipt row's, less the tenant, stream, receipt id and time.
_EMISSION_COLUMNS = (2, *range(4, 10), *range(11, 18))


def screen_columns(batch: FastBatch, max_message_bytes: int) -> Screened | None:
    """`screen_rows` for a version 8 record (`schemas.records.rows_of_columns`): the
    batch's rows as columns, when they are of one stream and fit one record, and each
    event is its evaluation's, in order, with its dimensions in order (as `screen_rows`
    pairs them). None otherwise: `screen_rows` writes them."""
    if not batch.receipts:
        return None
    try:
        return _columns(batch, max_message_bytes)
    except ValueError:  # rows of unequal lengths (never written): as version 7
        return None


def _columns(batch: FastBatch, max_message_bytes: int) -> Screened | None:
    receipts, events = batch.receipts, batch.events
    receipt_columns = list(zip(*receipts, strict=True))
    streams = receipt_columns[1]
    stream = streams[0]
    if streams.count(stream) != len(streams) or type(stream) is not str:
        return None
    if receipt_columns[4].count("evaluation") != len(events):
        return None
    dimension_values = (
        [d[2:8] for d in batch.dimensions] if batch.layers else batch.dimension_values
    )
    if events:
        event_columns = list(zip(*events, strict=True))
        counts = [len(ids) for ids in event_columns[22]]
        if sum(counts) != len(dimension_values):
            return None
        values = [_column(event_columns[i]) for i in _EVENT_COLUMNS]
        values.append(_column(counts))
    else:
        values = [[] for _ in range(len(_EVENT_COLUMNS) + 1)]
    width = len(DIMENSION_ROW)
    dimension_columns = (
        [_column(c) for c in zip(*dimension_values, strict=True)]
        if dimension_values
        else [[] for _ in range(width)]
    )
    if len(dimension_columns) != width:
        return None
    tables = to_json(
        {
            "events": {"rows": len(events), "columns": values},
            "dimensions": {"rows": len(dimension_values), "columns": dimension_columns},
            "emissions": {
                "rows": len(receipts),
                "columns": [_column(receipt_columns[i]) for i in _EMISSION_COLUMNS],
            },
        }
    )
    findings = tuple(batch.contract_findings)
    empty = empty_rows_size(batch.tenant_id, record_agents(batch.agents), stream, findings)
    if empty + len(tables) > payload_limit(max_message_bytes):
        return None
    unit = _Unit(stream, (), (), (tables,), (), len(tables))
    return Screened(batch, {stream: [unit]}, findings, columns=True)


def _column(values: Sequence[Any]) -> Sequence[Any]:
    """`values`, or the one value they all are (written once) when that is certain to
    read back as each of them: a text, null, an array of texts, an empty object (equal
    numbers or objects may be written differently: 1 and 1.0, keys in another order)."""
    first = values[0]
    if values[-1] is not first and values[-1] != first:  # most columns: values apart
        return values
    if not (
        first is None
        or type(first) is str
        or (type(first) is list and all(type(v) is str for v in first))
        or (type(first) is dict and not first)
    ):
        return values
    return (first,) if values.count(first) == len(values) else values


def _chain(*parts: Iterator[_Unit]) -> Iterator[_Unit]:
    for part in parts:
        yield from part


def _too_large(
    emission: EmissionRecord, event: EvaluationEvent | OverrideEvent | None, reason: str
) -> QuarantineRecord:
    ident = f"too-large\x00{emission.stream}\x00{emission.seq}\x00{emission.event_id}"
    name = EVALUATION_SPAN if emission.kind == "evaluation" else SENTINEL_SPAN
    return QuarantineRecord(
        quarantine_id=hashlib.sha256(ident.encode()).hexdigest(),
        reason=reason,
        span_name=OVERRIDE_SPAN if isinstance(event, OverrideEvent) else name,
        trace_id=event.trace_id if event else "",
        span_id=event.span_id if event else "",
        emission_stream=emission.stream,
        emission_seq=emission.seq,
        attributes={"holonograph.event.id": emission.event_id} if emission.event_id else {},
    )


def pack(
    screened: Screened,
    receipt_id: str,
    received_at: dt.datetime,
    max_message_bytes: int,
) -> list[OutRecord]:
    """Records for one screened batch: per-stream batch records, then dead letters. A
    hot-path batch's records carry their bytes only: their `record` is the envelope,
    without the events' models (which were never built)."""
    limit = payload_limit(max_message_bytes)
    tenant_id = screened.batch.tenant_id
    agents = record_agents(screened.batch.agents)
    rows = screened.rows
    version = SCHEMA_VERSION if rows is None else ROWS_VERSION
    out: list[OutRecord] = []
    if screened.columns:
        assert rows is not None
        out.append(_columns_record(screened, rows, receipt_id, received_at))
    envelope = batch_envelope(tenant_id, agents, receipt_id, received_at, version)
    for stream, units in () if screened.columns else screened.streams.items():
        if rows is not None:
            head = rows_head(envelope, stream, rows)
        elif stream == NO_STREAM:
            no_ordinals = batch_envelope(
                tenant_id, agents, receipt_id, received_at, NO_ORDINALS_VERSION
            )
            head = batch_head(no_ordinals, stream)
        else:
            head = batch_head(envelope, stream)
        for chunk in _chunks(units, batch_frame_size(head), limit):
            out.append(
                _batch_record(
                    head,
                    tenant_id,
                    agents,
                    stream,
                    chunk,
                    receipt_id,
                    received_at,
                    rows is not None,
                )
            )
    for span in screened.batch.quarantined:
        letter = _fit_letter(
            QuarantinedLetter(
                tenant_id=tenant_id,
                agents=agents,
                receipt_id=receipt_id,
                received_at=received_at,
                span=span,
            ),
            limit,
        )
        key = span.emission_stream or span.quarantine_id
        out.append(OutRecord(key.encode(), encode(letter), letter, dead_letter=True))
    return out


def _columns_record(
    screened: Screened, findings: tuple[str, ...], receipt_id: str, received_at: dt.datetime
) -> OutRecord:
    """The version 8 record of `screen_columns`' one unit (its `record`: the envelope)."""
    tenant_id = screened.batch.tenant_id
    agents = record_agents(screened.batch.agents)
    envelope = batch_envelope(tenant_id, agents, receipt_id, received_at, COLUMNS_VERSION)
    ((stream, (unit,)),) = screened.streams.items()
    head = columns_head(envelope, stream, findings)
    value = b"".join((head, memoryview(unit.event_json[0])[1:]))
    record = BatchRecord.model_construct(
        schema_version=COLUMNS_VERSION,
        tenant_id=tenant_id,
        agents=agents,
        receipt_id=receipt_id,
        received_at=received_at,
        stream=stream,
        events=(),
        emissions=(),
    )
    return OutRecord(stream.encode(), value, record)


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
    agents: tuple[str, ...] | None,
    stream: str,
    chunk: list[_Unit],
    receipt_id: str,
    received_at: dt.datetime,
    rows: bool = False,
) -> OutRecord:
    """`rows`: a version 7 record (its `record`: the envelope, without rows)."""
    fields: dict[str, Any] = {
        "tenant_id": tenant_id,
        "agents": agents,
        "receipt_id": receipt_id,
        "received_at": received_at,
        "stream": stream,
        "events": tuple(e for u in chunk for e in u.events),
        "emissions": tuple(e for u in chunk for e in u.emissions),
    }
    if any(u.overrides for u in chunk):  # version 6, written by the model (rare)
        overrides = tuple(o for u in chunk for o in u.overrides)
        full = BatchRecord(schema_version=OVERRIDE_VERSION, overrides=overrides, **fields)
        return OutRecord(stream.encode(), encode(full), full)
    value = join_batch(
        head,
        (j for u in chunk for j in u.event_json),
        (j for u in chunk for j in u.emission_json),
    )
    version = NO_ORDINALS_VERSION if stream == NO_STREAM else SCHEMA_VERSION
    version = ROWS_VERSION if rows else version
    record = BatchRecord.model_construct(schema_version=version, **fields)
    key = stream if stream != NO_STREAM else f"{tenant_id}/{record.events[0].event_id}"
    return OutRecord(key.encode(), value, record)


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
