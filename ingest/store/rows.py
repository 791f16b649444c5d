"""Decoded models -> ClickHouse rows, in the column order `schemas.tables` gives.

Shared by the embedded writer and the Kafka sink so both paths store identical rows.
Every row carries the tenant of the batch it came from; event and dimension rows
carry `ingest_version`, which decides the version of an event id that wins (the
latest received: see `ingest_version`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

from schemas.events import EmissionRecord, EvaluationEvent, QuarantineRecord, ValidatedBatch
from schemas.overrides import stored_override
from schemas.placement import Placement, placed_hour
from schemas.store import Store
from schemas.tables import (
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    LESSON_OVERRIDES,
    QUARANTINE,
    Table,
)

if TYPE_CHECKING:
    from ingest.store.clickhouse import ClickHouseStore

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# (tenant, event id) -> the placement of its rows (`schemas.placement`).
Placements = dict[tuple[str, str], Placement]


def ticks_ns(value: dt.datetime) -> int:
    """DateTime64(9) ticks. Handing clickhouse-connect integers skips its per-value
    datetime conversion, a visible share of insert CPU. Exact integer arithmetic, so
    a time before 1970 with a fraction of a second keeps it (a float timestamp
    truncated toward zero would move it a second later); naive means UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1000


def time_of_ticks_ns(ticks: int) -> dt.datetime:
    """The aware UTC time of DateTime64(9) ticks (`ticks_ns`' inverse, to the
    microsecond a datetime holds)."""
    return _EPOCH + dt.timedelta(microseconds=ticks // 1000)


def ticks_ms(value: dt.datetime) -> int:
    """DateTime64(3) ticks."""
    return int(value.timestamp()) * 1000 + value.microsecond // 1000


def ingest_version(received_at: dt.datetime, order: int = 0) -> int:
    """The version ReplacingMergeTree keeps the highest of, per event id: the receipt
    time in nanoseconds plus `order`, the request's place in its group commit (the
    queue's arrival order), so of two versions received in one commit the later wins
    too. A later commit's receipt time is later by at least the previous commit's
    write, far more nanoseconds than it had requests, so its versions stay higher."""
    return ticks_ns(received_at) + order


def _json(value: Any) -> str:
    if not value:
        return "{}"  # most events carry no extras: skip the encoder
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def event_row(
    tenant_id: str,
    event: EvaluationEvent,
    ingested_at: int,
    version: int,
    resource_json: str | None = None,
) -> list[Any]:
    """`ingested_at` in DateTime64(3) ticks (see `ticks_ms`), `version` from
    `ingest_version`."""
    outcome = event.outcome
    return [
        tenant_id, event.event_id, event.surface_id, event.agent_id, event.correlation_id,
        event.run_mode, event.provenance, ticks_ns(event.timestamp), event.lens.version,
        event.light_source.id, event.light_source.requested, event.substrate.columns,
        list(outcome.cohort_tags), event.multiplex_role, event.lens.fixture_id,
        {name: list(values) for name, values in outcome.markers.items()},
        outcome.latency_ms, outcome.cost_usd, outcome.tokens_input, outcome.tokens_output,
        event.sdk_name, event.sdk_version, [d.dimension_id for d in outcome.dimensions],
        *_ordinal(event), event.trace_id,
        event.span_id, resource_json or _json(event.resource_attributes), _json(event.extras),
        ingested_at, version, event.contract_version_id, list(event.contract_findings),
    ]  # fmt: skip


def _ordinal(event: EvaluationEvent) -> tuple[str, int, bool]:
    """Stream, seq and final of an event's ordinal; ('', 0, False) for an event that
    arrived without one: an empty stream is never a stream's name (`schemas/WIRE.md`)."""
    emission = event.emission
    if emission is None:
        return "", 0, False
    return emission.stream, emission.seq, emission.final


def dimension_rows(
    tenant_id: str, event: EvaluationEvent, ingested_at: int, version: int
) -> list[list[Any]]:
    layers = [
        event.surface_id, event.agent_id, event.correlation_id, event.run_mode,
        event.provenance, ticks_ns(event.timestamp), event.lens.version, event.light_source.id,
        event.light_source.requested, event.substrate.columns, list(event.outcome.cohort_tags),
        event.stream, ingested_at, version,
    ]  # fmt: skip
    return [
        [tenant_id, event.event_id, d.dimension_id, d.passed, d.score, d.expected, d.actual,
         d.judge, *layers]
        for d in event.outcome.dimensions
    ]  # fmt: skip


def receipt_row(
    tenant_id: str, record: EmissionRecord, receipt_id: str, received_at: int
) -> list[Any]:
    s = record.sentinel
    return [
        tenant_id, record.stream, record.seq, receipt_id, record.kind, record.final,
        record.quarantined, record.event_id, record.surface_id, ticks_ns(record.event_time),
        received_at,
        s.interval_ms if s else None, s.offered if s else None, s.delivered if s else None,
        s.dropped if s else None, s.failed if s else None, s.window_start if s else None,
        s.window_end if s else None,
    ]  # fmt: skip


def quarantine_row(tenant_id: str, record: QuarantineRecord, received_at: int) -> list[Any]:
    return [
        tenant_id, record.quarantine_id, received_at, record.reason, record.span_name,
        record.trace_id, record.span_id, record.emission_stream, record.emission_seq,
        _json(record.attributes),
        _json(record.resource_attributes), record.span_proto, record.source,
    ]  # fmt: skip


@dataclass
class SharedRows:
    """One hot-path request's event and dimension rows as its batch built them, and the
    commit's columns every one of them ends with (`ingest.export.fast.FastBatch`): row
    `i` of the table is `events[i] + event_tail`. Written column by column, the tails
    are constant columns, so no row is copied to append them."""

    events: list[list[Any]]
    event_tail: list[Any]
    dimensions: list[list[Any]]
    dimension_tail: list[Any]


@dataclass
class TableRows:
    """Rows for every table from one or more batches, written receipts last. Event and
    dimension rows are `events` and `dimensions`, then those of `shared`, in this order
    (`expanded` gives them as rows)."""

    events: list[list[Any]] = field(default_factory=list)
    dimensions: list[list[Any]] = field(default_factory=list)
    receipts: list[list[Any]] = field(default_factory=list)
    quarantine: list[list[Any]] = field(default_factory=list)
    overrides: list[list[Any]] = field(default_factory=list)
    # (tenant, event id) -> the placement its rows are written under (`schemas.placement`):
    # the ownership check's (`ingest.store.owners.Checked.placements`); an id not in it
    # is placed by its own row's surface and hour, as on its first receipt.
    placements: Placements = field(default_factory=dict)
    shared: list[SharedRows] = field(default_factory=list)

    def add(
        self, batch: ValidatedBatch, receipt_id: str, received_at: dt.datetime, order: int = 0
    ) -> None:
        """`order`: the batch's place among the requests received at `received_at`
        (see `ingest_version`)."""
        received = ticks_ms(received_at)
        version = ingest_version(received_at, order)
        tenant = batch.tenant_id
        # A request's events share their resource: encode it once per distinct value
        # (comparing dicts is far cheaper than encoding them).
        resource: dict[str, Any] | None = None
        resource_json = ""
        for event in batch.events:
            if event.resource_attributes != resource:
                resource = event.resource_attributes
                resource_json = _json(resource)
            self.events.append(event_row(tenant, event, received, version, resource_json))
            self.dimensions.extend(dimension_rows(tenant, event, received, version))
        self.receipts.extend(receipt_row(tenant, r, receipt_id, received) for r in batch.emissions)
        self.quarantine.extend(quarantine_row(tenant, q, received) for q in batch.quarantined)
        self.overrides.extend(
            stored_override(o, tenant, "otlp", received_at).row() for o in batch.overrides
        )

    @property
    def row_count(self) -> int:
        return (
            len(self.events) + len(self.dimensions) + len(self.receipts) + len(self.quarantine)
            + len(self.overrides)
            + sum(len(part.events) + len(part.dimensions) for part in self.shared)
        )  # fmt: skip

    def expanded(self) -> TableRows:
        """These rows with every shared row as a row of `events` and `dimensions` (in
        the same order); `self` when nothing is shared."""
        if not self.shared:
            return self
        events, dimensions = list(self.events), list(self.dimensions)
        for part in self.shared:
            events += [row + part.event_tail for row in part.events]
            dimensions += [row + part.dimension_tail for row in part.dimensions]
        return TableRows(
            events, dimensions, self.receipts, self.quarantine, self.overrides, self.placements
        )

    def extend(self, other: TableRows) -> None:
        """Append `other`'s rows (and placements) to these, in order."""
        if self.shared and (other.events or other.dimensions):
            # rows after shared ones: expand these first, so the order stays
            whole = self.expanded()
            self.events, self.dimensions, self.shared = whole.events, whole.dimensions, []
        self.events.extend(other.events)
        self.dimensions.extend(other.dimensions)
        self.shared.extend(other.shared)
        self.receipts.extend(other.receipts)
        self.quarantine.extend(other.quarantine)
        self.overrides.extend(other.overrides)
        self.placements.update(other.placements)

    def table_columns(self, table: str) -> list[Sequence[Any]]:
        """The rows of `table` ("events" or "dimensions") column by column: the shared
        rows pivoted in one pass, their tails as constant columns."""
        rows: list[list[Any]] = getattr(self, table)
        if not self.shared:
            return list(zip(*rows, strict=True))
        if rows:  # rows built whole before the shared ones (a drain of both kinds)
            return list(zip(*getattr(self.expanded(), table), strict=True))
        parts = [
            (p.events, p.event_tail) if table == "events" else (p.dimensions, p.dimension_tail)
            for p in self.shared
        ]
        columns: list[Sequence[Any]] = list(
            zip(*chain.from_iterable(part for part, _ in parts), strict=True)
        )
        if not columns:
            return []
        width = len(parts[0][1])
        tails = [
            list(chain.from_iterable([tail[n]] * len(part) for part, tail in parts))
            for n in range(width)
        ]
        return [*columns, *tails]


# Where the row builders put what a row's own placement is read from.
EVENT_PLACE = (
    EVALUATION_EVENTS.columns.index("surface_id"),
    EVALUATION_EVENTS.columns.index("timestamp"),
)
DIMENSION_PLACE = (
    EVALUATION_DIMENSIONS.columns.index("surface_id"),
    EVALUATION_DIMENSIONS.columns.index("timestamp"),
)


def placed(rows: list[list[Any]], at: tuple[int, int], placements: Placements) -> list[list[Any]]:
    """`rows` (built up to the placement columns) with their placement appended: the
    commit's for their event, else their own."""
    surface, timestamp = at
    out = []
    for row in rows:
        place = placements.get((row[0], row[1])) if placements else None
        if place is None:
            place = (row[surface], placed_hour(row[timestamp]))
        out.append([*row, *place])
    return out


def placed_columns(
    columns: list[Sequence[Any]], at: tuple[int, int], placements: Placements
) -> list[Sequence[Any]]:
    """`placed(rows, ...)` of rows given column by column: their columns and the two of
    their placement, with no row copied."""
    surface, timestamp = at
    if not placements:
        return [*columns, columns[surface], [placed_hour(t) for t in columns[timestamp]]]
    get = placements.get
    surfaces: list[str] = []
    hours: list[int] = []
    for key, own_surface, time in zip(
        zip(columns[0], columns[1], strict=True), columns[surface], columns[timestamp], strict=True
    ):
        place = get(key)
        if place is None:
            surfaces.append(own_surface)
            hours.append(placed_hour(time))
        else:
            surfaces.append(place[0])
            hours.append(place[1])
    return [*columns, surfaces, hours]


def write_rows(store: Store, rows: TableRows) -> None:
    """Insert into every table, event and dimension rows under their placements.
    Receipts go last: a failure before them leaves no receipt, so the client's retry
    does not look like a duplicate delivery. Our own store takes the placed rows as
    Arrow tables (in-process chDB, `_write_arrow`) or column by column
    (`ClickHouseStore.insert_columns`); another, as rows."""
    from ingest.store.clickhouse import ClickHouseStore

    if isinstance(store, ClickHouseStore):
        if not _write_arrow(store, rows):
            for table, name, at in _PLACED:
                columns = rows.table_columns(name)
                if columns and columns[0]:
                    placed_cols = placed_columns(columns, at, rows.placements)
                    store.insert_columns(
                        table.qualified, placed_cols, table.columns, INSERT_SETTINGS
                    )
    else:
        rows = rows.expanded()
        for table, name, at in _PLACED:
            if getattr(rows, name):
                placed_rows = placed(getattr(rows, name), at, rows.placements)
                store.insert(table.qualified, placed_rows, table.columns, INSERT_SETTINGS)
    plan: Iterable[tuple[Table, list[list[Any]]]] = (
        (QUARANTINE, rows.quarantine),
        (LESSON_OVERRIDES, rows.overrides),
    )
    for table, table_rows in plan:
        if table_rows:
            store.insert(table.qualified, table_rows, table.columns, INSERT_SETTINGS)
    insert_many(store, EMISSION_RECEIPTS, rows.receipts, INSERT_SETTINGS)


def insert_many(
    store: Store, table: Table, rows: list[list[Any]], settings: dict[str, Any] | None = None
) -> None:
    """`rows` (many: a commit's receipts, a drain's claims) into `table`: as columns to
    our own store (`ClickHouseStore.insert_columns`: Arrow into in-process chDB), as rows
    to another."""
    from ingest.store.clickhouse import ClickHouseStore

    if not rows:
        return
    if isinstance(store, ClickHouseStore):
        columns = list(zip(*rows, strict=True))
        store.insert_columns(table.qualified, columns, table.columns, settings)
    else:
        store.insert(table.qualified, rows, table.columns, settings)


def _write_arrow(store: ClickHouseStore, rows: TableRows) -> bool:
    """The event and dimension rows into a store that takes Arrow tables, built by
    `ingest.store.arrow_rows` (each value they repeat read once); False, with nothing
    written, when the store takes none."""
    from ingest.store.arrow_rows import placed_tables

    schemas = [store.arrow_schema(t.qualified, t.columns) for t, _, _ in _PLACED]
    if schemas[0] is None or schemas[1] is None:
        return False
    tables = (table for table, _, _ in _PLACED)
    for table, data in zip(tables, placed_tables(rows, schemas[0], schemas[1]), strict=True):
        if data is not None:
            store.insert_arrow(table.qualified, data, INSERT_SETTINGS)
    return True


# The tables written under their events' placements: the rows' attribute, and where a
# row holds what its own placement is read from.
_PLACED: tuple[tuple[Table, str, tuple[int, int]], ...] = (
    (EVALUATION_EVENTS, "events", EVENT_PLACE),
    (EVALUATION_DIMENSIONS, "dimensions", DIMENSION_PLACE),
)

# The commit's inserts keep every row they carry: the versions of an event id written in
# one insert are collapsed by the table's merges, and by FINAL before them, as are those
# of separate inserts (ReplacingMergeTree, highest `ingest_version`), rather than by a
# merge of the block at insert time, a sort and pass over every row on the commit's path.
INSERT_SETTINGS = {"optimize_on_insert": 0}
