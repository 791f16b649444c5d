"""A drain's placed event and dimension rows as Arrow tables, each value the tables
repeat read from the rows once.

`pyarrow.array` reads every value of a column, and at a drain's size most of its time
is fetching the rows' objects from memory (bench/RESULTS.md, "Tenth round"). So:
- a dimension row holds its event's key and layers (`ingest.store.rows.dimension_rows`,
  `ingest.export.fast.FastBatch.layer`): each column of the dimension table that the
  event table has by the same name and type is the event's array taken at every
  dimension's event (the event's `dimension_ids` say where: one dimension row per id,
  in order). Only the dimension's own values and its key are read from its rows, and
  the key (tenant, event id, dimension id) must be the events' at every row; rows not
  laid out so are built column by column, as `placed_columns` gives them;
- the commit's columns of shared rows (`SharedRows.event_tail`) are one value per
  request, repeated in Arrow;
- the placement columns are the surface array itself and the hour computed on the
  timestamp's buffer, but for the events the commit placed (`TableRows.placements`).
The stored rows are `placed_columns`' (`tests/ingest/store/test_arrow.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ingest.store.arrow import ArrowValueError, arrow_array, arrow_table
from ingest.store.rows import DIMENSION_PLACE, EVENT_PLACE, Placements, TableRows, placed_columns
from schemas.placement import HOUR_SECONDS, Placement, placed_hour

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["placed_tables"]

_HOUR_TICKS = HOUR_SECONDS * 1_000_000_000  # DateTime64(9) ticks in an hour
# The hours `placed_hour` clamps to (DateTime's range), as it gives them.
_FIRST_HOUR, _LAST_HOUR = placed_hour(-(2**63)), placed_hour(2**63 - 1)
_KEY = ("tenant_id", "event_id")


def placed_tables(
    rows: TableRows, events: pa.Schema, dimensions: pa.Schema
) -> tuple[pa.Table | None, pa.Table | None]:
    """The event and dimension tables of `rows` under their placements, in the schemas
    `events` and `dimensions` (every column of each table, in order); None for a table
    without rows. Raises `ArrowValueError` for a value its column cannot hold."""
    import pyarrow as pa

    if rows.shared and (rows.events or rows.dimensions):
        rows = rows.expanded()  # rows built whole before the shared ones
    arrays = _event_arrays(rows, events)
    event_table = None if arrays is None else pa.Table.from_arrays(arrays, schema=events)
    dimension_rows: Sequence[list[Any]] = (
        list(chain.from_iterable(part.dimensions for part in rows.shared))
        if rows.shared
        else rows.dimensions
    )
    if not dimension_rows:
        return event_table, None
    taken = None if arrays is None else _taken(events, arrays, dimension_rows, dimensions)
    if taken is None:
        columns = placed_columns(rows.table_columns("dimensions"), DIMENSION_PLACE, rows.placements)
        taken = arrow_table(dimensions, columns)
    return event_table, taken


def _event_arrays(rows: TableRows, schema: pa.Schema) -> list[pa.Array] | None:
    """Every column of the event table, placed; None without event rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [part for part in rows.shared if part.events]
    events = chain.from_iterable(part.events for part in parts) if parts else rows.events
    columns = list(zip(*events, strict=True))
    if not columns:
        return None
    arrays = [arrow_array(field, column) for field, column in zip(schema, columns, strict=False)]
    if parts:  # the commit's columns: a value per request, repeated in Arrow
        counts = np.fromiter((len(part.events) for part in parts), np.int64, len(parts))
        request = pa.array(np.repeat(np.arange(len(parts), dtype=np.int64), counts))
        for n in range(len(parts[0].event_tail)):
            values = arrow_array(schema.field(len(arrays)), [part.event_tail[n] for part in parts])
            arrays.append(pc.take(values, request, memory_pool=pa.system_memory_pool()))
    if len(arrays) != len(schema) - 2:  # the rows' columns, then the two of the placement
        raise ValueError(f"event rows of {len(arrays)} columns for {len(schema) - 2}")
    surface, timestamp = EVENT_PLACE
    place_surface, hours = arrays[surface], _hours(arrays[timestamp])
    surface_field, hour_field = schema.field(len(arrays)), schema.field(len(arrays) + 1)
    moved = _moved(columns, arrays[1], rows.placements) if rows.placements else []
    if moved:
        surfaces, hours = list(columns[surface]), hours.copy()
        for n, (placed_surface, hour) in moved:
            surfaces[n], hours[n] = placed_surface, hour
        place_surface = arrow_array(surface_field, surfaces)
    hour_array = pa.array(hours, type=hour_field.type, memory_pool=pa.system_memory_pool())
    return [*arrays, place_surface, hour_array]


def _hours(timestamps: pa.Array) -> np.ndarray[Any, Any]:
    """`placed_hour` of every DateTime64(9) tick of `timestamps`, in epoch seconds:
    one floor division, then its clamp."""
    import numpy as np
    import pyarrow as pa

    if timestamps.null_count:  # a column that is not Nullable: refused
        raise ArrowValueError("column timestamp: a null")
    ticks = timestamps.view(pa.int64()).to_numpy()
    hours: np.ndarray[Any, Any] = np.floor_divide(ticks, _HOUR_TICKS) * HOUR_SECONDS
    np.clip(hours, _FIRST_HOUR, _LAST_HOUR, out=hours)
    return hours


def _moved(
    columns: Sequence[Sequence[Any]], ids: pa.Array, placements: Placements
) -> list[tuple[int, Placement]]:
    """(row, placement) of each event row the commit placed (`columns`: the rows'
    columns, `ids` their event ids' array), found in Arrow: most drains place few."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    tenants, event_ids = columns[0], columns[1]
    known = pa.array(list({event for _, event in placements}), type=ids.type)
    listed = pc.is_in(ids, value_set=known).to_numpy(zero_copy_only=False)
    return [
        (n, place)
        for n in np.flatnonzero(listed).tolist()
        if (place := placements.get((tenants[n], event_ids[n]))) is not None
    ]


def _taken(
    events: pa.Schema, arrays: Sequence[pa.Array], rows: Sequence[list[Any]], schema: pa.Schema
) -> pa.Table | None:
    """The dimension table of `rows`: their own columns read, every other the events'
    (`arrays`, in `events`' schema) taken at each dimension's event; None when the rows'
    keys are not the events' dimensions in order, or their layout is not the table's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    by_name = dict(zip(events.names, arrays, strict=True))
    taken = [
        name
        for name in schema.names
        if name not in _KEY and name in by_name and by_name[name].type == schema.field(name).type
    ]
    own = [n for n, name in enumerate(schema.names) if name not in taken]
    names = [schema.names[n] for n in own]
    if "dimension_id" not in names or "dimension_ids" not in by_name or max(own) >= len(rows[0]):
        return None
    columns = zip(*map(itemgetter(*own), rows), strict=True)
    built = {n: arrow_array(schema.field(n), c) for n, c in zip(names, columns, strict=True)}
    pool = pa.system_memory_pool()
    ids = by_name["dimension_ids"]
    at = pc.list_parent_indices(ids, memory_pool=pool)
    if len(at) != len(rows) or not built["dimension_id"].equals(pc.list_flatten(ids)):
        return None
    for name in _KEY:
        if not built[name].equals(pc.take(by_name[name], at, memory_pool=pool)):
            return None
    for name in taken:
        built[name] = pc.take(by_name[name], at, memory_pool=pool)
    return pa.Table.from_arrays([built[name] for name in schema.names], schema=schema)
