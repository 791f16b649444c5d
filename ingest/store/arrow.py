"""Columns as an Arrow stream, for chDB's streaming insert (`ArrowStream`).

clickhouse-connect writes a Native block value by value (its String writer encodes
each text alone, its Array and Map writers walk every container in Python) into a
temporary file chDB then reads: about half of the drain's insert CPU at batch 512
(bench/RESULTS.md, "Ninth round"). `pyarrow.array` builds a column from the same
Python list in one C loop, the stream is its buffers copied once, and chDB parses it
without the GIL and without a file.

Only the types of the event, dimension and receipt tables are mapped, each to the
Arrow type chDB's conversion gives back as the same ClickHouse value: texts as
`binary` (ClickHouse's String is bytes; `string` would check UTF-8 again), times as
ticks (`timestamp` of the column's scale: our rows hold DateTime64 ticks and
DateTime seconds), an Enum by its name. `arrow_schema` answers None for a table with
any other type, which is then inserted as before. The differential tests
(`tests/ingest/store/test_arrow.py`) insert the same rows both ways and compare.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported at the first insert: a command that never inserts skips it
    import pyarrow as pa

__all__ = [
    "ArrowStreamer",
    "ArrowValueError",
    "arrow_array",
    "arrow_schema",
    "arrow_stream",
    "arrow_table",
]

_CALL = re.compile(r"^(\w+)\((.*)\)$", re.DOTALL)
_TICKS = {0: "s", 3: "ms", 6: "us", 9: "ns"}
_PLAIN = {
    "String": "binary", "Bool": "bool_", "Float64": "float64", "Float32": "float32",
    "UInt8": "uint8", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
    "Int8": "int8", "Int16": "int16", "Int32": "int32", "Int64": "int64",
}  # fmt: skip


class ArrowValueError(ValueError):
    """A value Arrow cannot hold in its column's type: the rows are refused for good,
    as clickhouse-connect's serializer refuses them (`ValueError`, permanent)."""


def _split_pair(args: str) -> tuple[str, str] | None:
    depth = 0
    for at, char in enumerate(args):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            return args[:at].strip(), args[at + 1 :].strip()
    return None


def arrow_type(kind: str) -> pa.DataType | None:
    """The Arrow type a column of ClickHouse type `kind` is sent as; None when not
    mapped here."""
    import pyarrow as pa

    kind = kind.strip()
    plain = _PLAIN.get(kind)
    if plain is not None:
        made: pa.DataType = getattr(pa, plain)()
        return made
    call = _CALL.match(kind)
    if call is None:
        return pa.timestamp("s", "UTC") if kind == "DateTime" else None
    name, args = call[1], call[2]
    if name in ("LowCardinality", "Nullable"):
        return arrow_type(args)
    if name in ("Enum8", "Enum16"):
        return pa.binary()  # by name: ClickHouse converts the text to its value
    if name == "DateTime":
        return pa.timestamp("s", "UTC")
    if name == "DateTime64":
        unit = _TICKS.get(int(args.split(",")[0]))
        return None if unit is None else pa.timestamp(unit, "UTC")
    if name == "Array":
        inner = arrow_type(args)
        return None if inner is None else pa.list_(inner)
    if name == "Map":
        pair = _split_pair(args)
        if pair is None:
            return None
        key, value = arrow_type(pair[0]), arrow_type(pair[1])
        return None if key is None or value is None else pa.map_(key, value)
    return None


def arrow_schema(names: Sequence[str], types: Mapping[str, str]) -> pa.Schema | None:
    """The schema of a block of `names` (`types`: each column's ClickHouse type);
    None when a column's type is not mapped (or unknown)."""
    import pyarrow as pa

    fields = []
    for name in names:
        kind = types.get(name)
        found = None if kind is None else arrow_type(kind)
        if found is None:
            return None
        fields.append(pa.field(name, found))
    return pa.schema(fields)


def arrow_array(field: pa.Field, column: Sequence[Any]) -> pa.Array:
    """`column` as an array of `field`'s type, its buffers from the C allocator (see
    `arrow_stream`); raises `ArrowValueError` naming the column when a value does not
    fit its type."""
    import pyarrow as pa

    try:
        return pa.array(column, type=field.type, memory_pool=pa.system_memory_pool())
    except pa.ArrowMemoryError:
        raise  # out of memory: retryable, not a value the column cannot hold
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:
        raise ArrowValueError(f"column {field.name}: {err}") from err


def arrow_table(schema: pa.Schema, columns: Sequence[Sequence[Any]]) -> pa.Table:
    """`columns` (one list per field of `schema`, in order) as an Arrow table; raises
    `ArrowValueError` naming the column when a value does not fit its type."""
    import pyarrow as pa

    arrays = [arrow_array(field, column) for field, column in zip(schema, columns, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


PIECE_BYTES = 1 << 20
KEPT_BYTES = 32 << 20


class ArrowStreamer:
    """Tables in Arrow's IPC stream format (ClickHouse's `ArrowStream`), each written
    into one buffer kept from one insert to the next (up to `KEPT_BYTES`) and handed
    over in pieces of `PIECE_BYTES`: chDB's streaming insert reads the pieces as one
    byte stream (one record batch, one part). A drain's stream (~12 MiB), written into
    fresh memory and copied into one `bytes`, cost 5-6k page faults and ~1.5 us a span
    of the drain thread; pieces that small are recycled by the allocator (bench/
    RESULTS.md, "Tenth round"). Buffers come from the C allocator, which gives them
    back when freed; pyarrow's default pool (jemalloc) kept ~60 MiB more resident in
    `serve`. Not thread-safe: one per connection, used under its lock."""

    def __init__(self) -> None:
        self._kept: pa.Buffer | None = None

    def pieces(self, table: pa.Table) -> Iterator[bytes]:
        import pyarrow as pa

        pool = pa.system_memory_pool()
        counted = pa.MockOutputStream()
        _write(counted, table)
        size = counted.size()
        buffer = self._kept
        if buffer is None or buffer.size < size:
            buffer = pa.allocate_buffer(size, memory_pool=pool)
            self._kept = buffer if size <= KEPT_BYTES else self._kept
        _write(pa.FixedSizeBufferWriter(buffer), table)
        view = memoryview(buffer)[:size]
        step = PIECE_BYTES
        for start in range(0, size, step):
            yield bytes(view[start : start + step])


def arrow_stream(table: pa.Table) -> bytes:
    """`table` in Arrow's IPC stream format, whole (`ArrowStreamer` is the inserts')."""
    return b"".join(ArrowStreamer().pieces(table))


def _write(sink: Any, table: pa.Table) -> None:
    import pyarrow as pa

    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
