"""A store of any size for the scale benchmarks, generated inside ClickHouse.

Rows are produced server-side by `INSERT ... SELECT ... FROM numbers(...)`, in chunks,
from deterministic expressions of the row number and the seed (`cityHash64`), so a
50M-row store loads at ClickHouse's speed, never through Python, and the same spec
always gives the same rows. They go into the project's own tables after its
migrations (`schemas.tables`), so every analysis runs on them unchanged, through any
store URL (`chdb:///path` or `http://...`).

The traffic (`ScaleSpec`):

- `rows` dimension rows: `rows / dimensions` events, each graded on `dimensions`
  dimensions (`correctness` pass/fail, `helpfulness` scored, then `check-K` pass/fail);
- events evenly spaced over the `days` before `end`, in event-number order; event ids
  time-ordered ULIDs (`ids="ulid"`, 26 Crockford base-32 characters, the millisecond
  timestamp first) or random UUIDv4s (`ids="random"`), both seeded;
- multiplex calls of `vendors` consecutive events (one primary, the rest observers,
  sharing a correlation id), calls dealt round-robin to `surfaces` surfaces;
- a planted change: on every fourth surface the primary's correctness pass rate drops
  by 0.15 and the lens version changes at `shift_at` (the last 3 days, or the last
  quarter of a shorter range), so drift has something to find;
- `streams` emission streams (event `n` in stream `n % streams`): a sentinel after
  every 49 events of a stream, a final sentinel closing 90% of the streams, and on
  every tenth stream one ordinal in every 20th run of 49 left out (lost in transit),
  so completeness has gaps to count. `truth(spec)` gives the exact counts.

    python -m testkit.scalestore --store chdb:///tmp/scale --rows 10000000 --ids random

prints one JSON summary on stdout and its progress on stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

IdScheme = Literal["ulid", "random"]
ID_SCHEMES: tuple[IdScheme, ...] = ("ulid", "random")

VENDORS = ("anthropic/claude-sonnet-5", "openai/gpt-5", "google/gemini-2-pro")
BLOCK = 49  # events of a stream between two of its sentinels
LOSSY_STREAM_EVERY = 10  # stream s loses ordinals when s % 10 == 0
LOSSY_BLOCK_EVERY = 20  # ... one in block q when q % 20 == 19
UNFINISHED_STREAM = 5  # streams with s % 10 == 5 send no final sentinel
SHIFT = 0.15  # the planted drop of the primary's correctness pass rate
SHIFTED_SURFACE_EVERY = 4  # on surfaces 0, 4, 8, ...
DEFAULT_END = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
DEFAULT_CHUNK_ROWS = 2_000_000

Progress = Callable[[int, int, float], None]  # (dimension rows done, total, seconds)


@dataclass(frozen=True)
class ScaleSpec:
    rows: int  # dimension rows: events x dimensions
    days: int = 90
    surfaces: int = 20
    ids: IdScheme = "ulid"
    dimensions: int = 2
    vendors: int = 3
    streams: int = 1000
    end: dt.datetime = DEFAULT_END
    seed: int = 7
    tenant_id: str = DEFAULT_TENANT
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.dimensions <= 0 or self.rows % self.dimensions:
            raise ValueError(
                f"rows ({self.rows}) must be a positive multiple of dimensions"
                f" ({self.dimensions}): a store holds whole events"
            )
        if self.ids not in ID_SCHEMES:
            raise ValueError(f"ids must be one of {', '.join(ID_SCHEMES)}, not {self.ids!r}")
        if not 1 <= self.vendors <= len(VENDORS):
            raise ValueError(f"vendors must be 1..{len(VENDORS)}, not {self.vendors}")
        if min(self.days, self.surfaces, self.streams, self.chunk_rows) <= 0:
            raise ValueError("days, surfaces, streams and chunk_rows must be positive")
        if self.end.tzinfo is None:
            raise ValueError("end must be timezone-aware (UTC)")

    @property
    def events(self) -> int:
        return self.rows // self.dimensions

    @property
    def stream_count(self) -> int:
        return min(self.streams, self.events)

    @property
    def start(self) -> dt.datetime:
        return self.end - dt.timedelta(days=self.days)

    @property
    def shift_at(self) -> dt.datetime:
        return self.end - min(dt.timedelta(days=3), dt.timedelta(days=self.days) / 4)

    @property
    def dimension_ids(self) -> tuple[str, ...]:
        named = ("correctness", "helpfulness")
        return tuple(named[k] if k < 2 else f"check-{k}" for k in range(self.dimensions))

    @property
    def surface_ids(self) -> tuple[str, ...]:
        return tuple(f"surface-{k:02d}" for k in range(self.surfaces))


@dataclass(frozen=True)
class Truth:
    """What a store built from a spec holds, computed without ClickHouse."""

    events: int
    dimension_rows: int
    evaluation_receipts: int
    sentinels: int
    final_streams: int
    missing: int  # ordinals left out (lost in transit)


def truth(spec: ScaleSpec) -> Truth:
    """The exact counts of `spec`'s store (one pass over its streams, not its rows)."""
    k = spec.stream_count
    sentinels = finals = missing = 0
    for s in range(k):
        count = (spec.events - 1 - s) // k + 1
        sentinels += count // BLOCK
        if s % LOSSY_STREAM_EVERY != UNFINISHED_STREAM:
            finals += 1
        if s % LOSSY_STREAM_EVERY == 0:
            full, rest = divmod(count, BLOCK)
            # a lossy block's gap (before its event BLOCK // 2) shows once that event exists
            reached = full + (1 if rest > BLOCK // 2 else 0)
            missing += reached // LOSSY_BLOCK_EVERY
    return Truth(
        events=spec.events,
        dimension_rows=spec.rows,
        evaluation_receipts=spec.events,
        sentinels=sentinels + finals,
        final_streams=finals,
        missing=missing,
    )


# --- the generating expressions, shared by the three inserts (event `n` is the unit)

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base 32, as ULIDs use

_EVENT = """
    intDiv(n, {vendors:UInt64}) AS call,
    n % {vendors:UInt64} AS vendor,
    call % {surfaces:UInt64} AS surface,
    concat('surface-', leftPad(toString(surface), 2, '0')) AS surface_id,
    fromUnixTimestamp64Nano(toInt64({start_ns:Int64}
        + toInt64(intDiv(toUInt128(n) * {span_ns:UInt64}, {events:UInt64}))), 'UTC') AS ts,
    toUnixTimestamp64Milli(ts) AS ts_ms,
    cityHash64(n, {seed:UInt64}, 1) AS h1,
    cityHash64(n, {seed:UInt64}, 2) AS h2,
    if({random_ids:Bool},
       concat(substring(leftPad(lower(hex(h1)), 16, '0'), 1, 8), '-',
              substring(leftPad(lower(hex(h1)), 16, '0'), 9, 4), '-4',
              substring(leftPad(lower(hex(h1)), 16, '0'), 14, 3), '-',
              substring('89ab', toUInt8(h2 % 4) + 1, 1),
              substring(leftPad(lower(hex(h2)), 16, '0'), 2, 3), '-',
              substring(leftPad(lower(hex(h2)), 16, '0'), 5, 12)),
       concat(
           arrayStringConcat(arrayMap(j -> substring({alphabet:String},
               toUInt8(bitAnd(bitShiftRight(ts_ms, 5 * (9 - j)), 31)) + 1, 1), range(10))),
           arrayStringConcat(arrayMap(j -> substring({alphabet:String},
               toUInt8(bitAnd(bitShiftRight(if(j < 12, h1, h2), 5 * if(j < 12, 11 - j, 15 - j)),
                              31)) + 1, 1), range(16))))) AS eid,
    {vendor_ids:Array(String)}[vendor + 1] AS light_source,
    if(vendor = 0, 'primary', 'observer') AS role,
    surface % {shift_every:UInt64} = 0 AND ts >= {shift_at:DateTime64(9, 'UTC')} AS shifted,
    if(shifted, 'lv_2', 'lv_1') AS lens,
    concat('agent-', surface_id) AS agent,
    concat('call-', toString(call)) AS correlation,
    n % {streams:UInt64} AS s,
    intDiv(n, {streams:UInt64}) AS p,
    concat('scale/stream-', toString(s)) AS stream,
    addMilliseconds(toDateTime64(ts, 3, 'UTC'), 200 + h2 % 800) AS ingested
"""

# Where event `n` sits in its stream: block q of BLOCK events closed by a sentinel; on a
# lossy stream every LOSSY_BLOCK_EVERY-th block skips the ordinal before its event 24.
_ORDINAL = """
    intDiv(p, {block:UInt64}) AS q,
    p % {block:UInt64} AS i,
    s % {lossy_stream_every:UInt64} = 0 AS lossy_stream,
    lossy_stream AND q % {lossy_block_every:UInt64} = {lossy_block_every:UInt64} - 1
        AS lossy_block,
    q * ({block:UInt64} + 1) + if(lossy_stream, intDiv(q, {lossy_block_every:UInt64}), 0)
        + i + if(lossy_block AND i >= intDiv({block:UInt64}, 2), 1, 0) AS seq,
    p = intDiv({events:UInt64} - 1 - s, {streams:UInt64}) AS last_in_stream,
    last_in_stream AND s % {lossy_stream_every:UInt64} != {unfinished:UInt64} AS closes
"""

_EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "agent_id", "correlation_id", "run_mode",
    "provenance", "timestamp", "lens_version", "light_source_id", "light_source_requested",
    "substrate", "cohort_tags", "multiplex_role", "latency_ms", "cost_usd", "tokens_input",
    "tokens_output", "sdk_name", "sdk_version", "dimension_ids", "emission_stream",
    "emission_seq", "emission_final", "trace_id", "span_id", "resource_attributes", "extras",
    "ingested_at",
)  # fmt: skip

_INSERT_EVENTS = f"""
INSERT INTO {EVALUATION_EVENTS.qualified} ({", ".join(_EVENT_COLUMNS)})
WITH number AS n, {_EVENT}, {_ORDINAL}
SELECT
    {{tenant:String}}, eid, surface_id, agent, correlation, 'production', 'production-state',
    ts, lens, light_source, light_source,
    map('region', 'eu', 'prompt_hash', 'ph_1'), [concat('multiplex.role=', role)], role,
    round(400 + 300 * vendor + h1 % 900, 3), 0.001 * (vendor + 1),
    toInt64(200 + h1 % 200), toInt64(20 + h2 % 60),
    'holonograph-scalestore', '1', {{dimension_ids:Array(String)}}, stream, seq, false,
    concat(leftPad(lower(hex(h2)), 16, '0'), leftPad(lower(hex(h1)), 16, '0')),
    leftPad(lower(hex(cityHash64(n, {{seed:UInt64}}, 3))), 16, '0'),
    '{{}}', '{{}}', ingested
FROM numbers({{first:UInt64}}, {{count:UInt64}})
"""

_DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "score", "surface_id", "agent_id",
    "correlation_id", "run_mode", "provenance", "timestamp", "lens_version",
    "light_source_id", "light_source_requested", "substrate", "cohort_tags",
    "emission_stream", "ingested_at",
)  # fmt: skip

# Pass rates: 0.70 + 0.05 per vendor, minus SHIFT for the shifted primary; scores on
# `helpfulness` ~ 2 + 2u + 0.3 per vendor.
_INSERT_DIMENSIONS = f"""
INSERT INTO {EVALUATION_DIMENSIONS.qualified} ({", ".join(_DIMENSION_COLUMNS)})
WITH intDiv(number, {{dimensions:UInt64}}) AS n, number % {{dimensions:UInt64}} AS d,
    {_EVENT}, {_ORDINAL},
    cityHash64(n, d, {{seed:UInt64}}, 4) % 1000000 AS u,
    0.70 + 0.05 * vendor - if(shifted AND vendor = 0, {{shift:Float64}}, 0) AS rate
SELECT
    {{tenant:String}}, eid, {{dimension_ids:Array(String)}}[d + 1],
    if(d = 1, NULL, toNullable(u < rate * 1000000)),
    if(d = 1, toNullable(round(2 + 2 * u / 1000000 + 0.3 * vendor, 4)), NULL),
    surface_id, agent, correlation, 'production', 'production-state', ts, lens,
    light_source, light_source, map('region', 'eu', 'prompt_hash', 'ph_1'),
    [concat('multiplex.role=', role)], stream, ingested
FROM numbers({{first:UInt64}}, {{count:UInt64}})
"""

_RECEIPT_COLUMNS = EMISSION_RECEIPTS.pick(
    "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
    "quarantined", "event_id", "surface_id", "event_time", "received_at",
    "sentinel_interval_ms", "completeness_dropped",
)  # fmt: skip

# Per event its receipt (k 0), the sentinel closing its block (k 1) and the stream's
# final sentinel (k 2), each at the next ordinal.
_INSERT_RECEIPTS = f"""
INSERT INTO {EMISSION_RECEIPTS.qualified} ({", ".join(_RECEIPT_COLUMNS)})
WITH number AS n, {_EVENT}, {_ORDINAL}
SELECT
    {{tenant:String}}, stream,
    seq + if(k = 0, 0, if(k = 1, 1, 1 + (i = {{block:UInt64}} - 1))),
    concat('r', toString(n), '.', toString(k)),
    if(k = 0, 'evaluation', 'sentinel'), k = 2, false, if(k = 0, eid, ''),
    if(k = 0, surface_id, ''), ts + toIntervalMillisecond(k),
    ingested + toIntervalMillisecond(k),
    if(k = 0, NULL, toNullable(toUInt64({{sentinel_interval_ms:UInt64}}))),
    if(k = 0, NULL, toNullable(toInt64(0)))
FROM numbers({{first:UInt64}}, {{count:UInt64}})
ARRAY JOIN arrayConcat([toUInt8(0)],
    if(i = {{block:UInt64}} - 1, [toUInt8(1)], emptyArrayUInt8()),
    if(closes, [toUInt8(2)], emptyArrayUInt8())) AS k
"""


def _parameters(spec: ScaleSpec) -> dict[str, Any]:
    span_ns = spec.days * 86_400 * 10**9
    start_ns = int(spec.start.timestamp()) * 10**9
    return {
        "tenant": spec.tenant_id,
        "seed": spec.seed,
        "vendors": spec.vendors,
        "vendor_ids": list(VENDORS[: spec.vendors]),
        "surfaces": spec.surfaces,
        "events": spec.events,
        "dimensions": spec.dimensions,
        "dimension_ids": list(spec.dimension_ids),
        "start_ns": start_ns,
        "span_ns": span_ns,
        "random_ids": spec.ids == "random",
        "alphabet": _ALPHABET,
        "shift": SHIFT,
        "shift_every": SHIFTED_SURFACE_EVERY,
        "shift_at": spec.shift_at.replace(tzinfo=None),
        "streams": spec.stream_count,
        "block": BLOCK,
        "lossy_stream_every": LOSSY_STREAM_EVERY,
        "lossy_block_every": LOSSY_BLOCK_EVERY,
        "unfinished": UNFINISHED_STREAM,
        # one stream's sentinels are BLOCK of its events apart
        "sentinel_interval_ms": span_ns // 10**6 * spec.stream_count * BLOCK // spec.events,
    }


def build(store: Store, spec: ScaleSpec, progress: Progress | None = None) -> float:
    """Load `spec`'s rows into a migrated store, chunk by chunk; returns the seconds it
    took. `progress` hears after every chunk (dimension rows done, total, seconds)."""
    params = _parameters(spec)
    per_chunk = max(1, spec.chunk_rows // spec.dimensions)  # events per chunk
    started = time.perf_counter()
    for first in range(0, spec.events, per_chunk):
        count = min(per_chunk, spec.events - first)
        events = {**params, "first": first, "count": count}
        store.command(_INSERT_EVENTS, events)
        store.command(_INSERT_RECEIPTS, events)
        rows = {**params, "first": first * spec.dimensions, "count": count * spec.dimensions}
        store.command(_INSERT_DIMENSIONS, rows)
        if progress is not None:
            progress((first + count) * spec.dimensions, spec.rows, time.perf_counter() - started)
    return time.perf_counter() - started


def print_progress(done: int, total: int, seconds: float) -> None:
    """One line per chunk on stderr: rows so far, share, rate."""
    rate = done / seconds if seconds > 0 else 0.0
    print(
        f"scalestore: {done:,} / {total:,} dimension rows ({done / total:.0%}),"
        f" {seconds:.1f} s, {rate:,.0f} rows/s",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="chdb:///path or http(s)://host:8123")
    parser.add_argument("--rows", type=int, required=True, help="dimension rows")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--surfaces", type=int, default=20)
    parser.add_argument("--ids", choices=ID_SCHEMES, default="ulid")
    parser.add_argument("--dimensions", type=int, default=2)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--end", default=DEFAULT_END.isoformat(), help="RFC 3339 UTC")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS)
    args = parser.parse_args(argv)
    try:
        spec = ScaleSpec(
            rows=args.rows, days=args.days, surfaces=args.surfaces, ids=args.ids,
            dimensions=args.dimensions, streams=args.streams,
            end=dt.datetime.fromisoformat(args.end).astimezone(dt.UTC), seed=args.seed,
            chunk_rows=args.chunk_rows,
        )  # fmt: skip
    except ValueError as err:
        parser.error(str(err))
    # imported here: `truth` and the spec need no ClickHouse client
    from ingest.store.clickhouse import open_store
    from schemas.migrations import apply_migrations

    store = open_store(args.store)
    try:
        apply_migrations(store)
        seconds = build(store, spec, print_progress)
    finally:
        store.close()
    summary = {
        "rows": spec.rows,
        "events": spec.events,
        "ids": spec.ids,
        "days": spec.days,
        "surfaces": spec.surfaces,
        "start": spec.start.isoformat().replace("+00:00", "Z"),
        "end": spec.end.isoformat().replace("+00:00", "Z"),
        "load_seconds": round(seconds, 2),
        "rows_per_second": round(spec.rows / seconds) if seconds > 0 else None,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
