"""Delivery completeness from `holonograph.emission_records` (wire contract section 3).

Every count is computed in ClickHouse: one window-function pass gives each received
(stream, seq) the size of the gap just below it (`gap_before`), and the stream
accounting, the missing ranges and the per-bucket windows are aggregates of that.
A gap is counted in the bucket of the record that follows it. Because everything is
derived from the stored receipts, the answer is exact after receiver restarts and
with several receivers writing, and a late arrival that fills a gap simply changes it.

Streams are per tenant: (tenant, stream) is the identity everywhere, so another
tenant's stream of the same name never fills, closes or counts in this one. A
`Selection` with a tenant reads that tenant only; without one, every tenant.

Two ways to read it:
- `read_report` computes the selection live (read-only, works through `serve`'s
  admin endpoint);
- `refresh_stream_status` / `recompute_completeness` / `refresh_completeness` write
  `stream_status` and `completeness_windows` for dashboards and later jobs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from processors.completeness.sql import (
    MARK_DEAD_WHERE,
    RECEIPT_STREAMS,
    RECORDS,
    SHARD_BOUNDS,
    STREAM_WINDOWS_SELECT,
    STREAMS_SELECT,
    SURFACE_CHUNK_DAYS,
    SURFACE_WINDOWS_SELECT,
    WITHOUT_ORDINALS,
    ZERO_STALE,
)
from processors.jobs import Job, JobError, JobRequest
from processors.series.refreshes import last_refresh
from schemas.completeness import (
    Bucket,
    CompletenessReport,
    CompletenessTotals,
    CompletenessWindow,
    GapRange,
    LossComparison,
    RefreshSummary,
    StreamAccounting,
    StreamState,
    SurfaceWithoutOrdinals,
)
from schemas.placement import placed_in
from schemas.retention import retention_reach
from schemas.store import Store
from schemas.tables import (
    COMPLETENESS_REFRESH_PROGRESS,
    COMPLETENESS_REFRESHES,
    COMPLETENESS_WINDOWS,
    STREAM_STATUS,
)
from schemas.times import Clock, from_store_time, to_store_time
from schemas.utctime import UtcTime


class CompletenessConfig(BaseModel):
    """Defaults in code; the CLI may override them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_sentinel_interval_ms: Annotated[int, Field(gt=0)] = 30_000
    dead_after_intervals: Annotated[float, Field(gt=0)] = 3.0
    materialized_buckets: tuple[Bucket, ...] = ("minute", "hour", "day")
    lookback: dt.timedelta = dt.timedelta(minutes=5)
    full_every: dt.timedelta = dt.timedelta(hours=1)
    # A full recompute's chunk: about this many receipts per (tenant, stream) range, and
    # about this many stream windows per bucket and time range of the surface step.
    rows_per_shard: Annotated[int, Field(gt=0)] = 1_000_000
    # The refresh statements' limits, as ClickHouse settings (`max_memory_usage`, ...;
    # 0: none); None: the writing connection's own. The job passes its read limits, so
    # `completeness --refresh` writes within what it may read.
    limits: dict[str, float] | None = None


@dataclass(frozen=True)
class Selection:
    """Which streams to account for (`tenant` None: every tenant's). Every clause
    binds its value as a parameter."""

    tenant: str | None = None
    stream: str | None = None
    surface: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    received_since: dt.datetime | None = None
    streams: Sequence[str] | None = field(default=None)

    def where(self) -> tuple[str, dict[str, Any]]:
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.tenant is not None:
            clauses.append("tenant_id = {sel_tenant:String}")
            params["sel_tenant"] = self.tenant
        if self.stream is not None:
            clauses.append("emission_stream = {sel_stream:String}")
            params["sel_stream"] = self.stream
        if self.streams is not None:
            clauses.append("emission_stream IN {sel_streams:Array(String)}")
            params["sel_streams"] = list(self.streams)
        if self.surface is not None:
            clauses.append(
                f"(tenant_id, emission_stream) IN ({RECEIPT_STREAMS}"
                " surface_id = {sel_surface:String})"
            )
            params["sel_surface"] = self.surface
        if self.since is not None or self.until is not None:
            clauses.append(
                f"(tenant_id, emission_stream) IN ({RECEIPT_STREAMS}"
                " event_time >= {sel_since:DateTime64(9, 'UTC')}"
                " AND event_time < {sel_until:DateTime64(9, 'UTC')})"
            )
            params["sel_since"] = to_store_time(self.since or _EPOCH)
            params["sel_until"] = to_store_time(self.until or _FAR_FUTURE)
        if self.received_since is not None:
            clauses.append(
                f"(tenant_id, emission_stream) IN ({RECEIPT_STREAMS}"
                " received_at >= {sel_received_since:DateTime64(3, 'UTC')})"
            )
            params["sel_received_since"] = to_store_time(self.received_since)
        return (" AND ".join(clauses) or "1"), params


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FAR_FUTURE = dt.datetime(2200, 1, 1, tzinfo=dt.UTC)


def floor_to_bucket(value: dt.datetime, bucket: Bucket) -> dt.datetime:
    value = from_store_time(value)
    if bucket == "minute":
        return value.replace(second=0, microsecond=0)
    if bucket == "hour":
        return value.replace(minute=0, second=0, microsecond=0)
    return value.replace(hour=0, minute=0, second=0, microsecond=0)


def _job_params(now: dt.datetime, version: int, config: CompletenessConfig) -> dict[str, Any]:
    return {
        "now": to_store_time(now),
        "version": version,
        "default_interval_ms": config.default_sentinel_interval_ms,
        "dead_after_intervals": config.dead_after_intervals,
    }


def _with_records(where: str) -> str:
    return "WITH " + RECORDS.replace("{where}", where).strip()


# ---------------------------------------------------------------- live read


def account_streams(
    store: Store,
    now: dt.datetime,
    selection: Selection | None = None,
    config: CompletenessConfig | None = None,
) -> list[StreamAccounting]:
    """Per-stream accounting and status as of `now`, computed live (read-only)."""
    config = config or CompletenessConfig()
    where, params = (selection or Selection()).where()
    sql = f"{_with_records(where)}\n{STREAMS_SELECT}\nORDER BY tenant_id, emission_stream"
    result = store.query(sql, {**params, **_job_params(now, 0, config)})
    streams = [_stream_from_row(row) for row in result.dicts()]
    return sorted(streams, key=_stream_rank)


def account_windows(
    store: Store,
    bucket: Bucket,
    selection: Selection | None = None,
) -> list[CompletenessWindow]:
    """Stream and surface windows of one bucket size, computed live (read-only).
    With a time selection, only buckets overlapping [since, until) are returned;
    with a stream selection, only stream windows."""
    selection = selection or Selection()
    where, params = selection.where()
    surface_where = "1"
    if selection.surface is not None:
        surface_where = "s_surface = {sel_surface:String}"
    surfaces = SURFACE_WINDOWS_SELECT.format(
        windows="stream_windows", statuses="stream_surfaces", surface_where=surface_where
    )
    sql = f"""{_with_records(where)},
stream_windows AS ({STREAM_WINDOWS_SELECT}),
stream_surfaces AS (
    SELECT tenant AS tenant_id, stream AS emission_stream,
           groupUniqArrayIf(surface, surface != '') AS surfaces
    FROM records GROUP BY tenant, stream)
SELECT * FROM (
    SELECT * FROM stream_windows
    UNION ALL
    SELECT * FROM ({surfaces}) WHERE offered > 0 AND {{with_surfaces:Bool}}
)
WHERE bucket_start >= {{from_bucket:DateTime('UTC')}}
    AND bucket_start < {{to_bucket:DateTime('UTC')}}
ORDER BY tenant_id, scope, surface_id, emission_stream, bucket_start"""
    since = floor_to_bucket(selection.since, bucket) if selection.since else _EPOCH
    params.update(
        version=0,
        buckets=[bucket],
        # picking streams by name would make surface rows partial: leave them out
        with_surfaces=selection.stream is None and selection.streams is None,
        from_bucket=to_store_time(since),
        to_bucket=to_store_time(selection.until or _FAR_FUTURE),
    )
    rows = store.query(sql, params).rows
    return [
        _window_from_row(dict(zip(COMPLETENESS_WINDOWS.columns, row, strict=True))) for row in rows
    ]


def account_without_ordinals(
    store: Store, selection: Selection | None = None
) -> list[SurfaceWithoutOrdinals]:
    """The selection's surfaces with events that arrived without emission ordinals, and
    their share: their completeness is unknown, never complete. A selection of streams
    has none (such events are on no stream)."""
    selection = selection or Selection()
    if selection.stream is not None or selection.streams is not None:
        return []
    clauses: list[str] = ["1"]
    params: dict[str, Any] = {}
    if selection.tenant is not None:
        clauses.append("tenant_id = {sel_tenant:String}")
        params["sel_tenant"] = selection.tenant
    if selection.surface is not None:
        clauses.append("surface_id = {sel_surface:String}")
        params["sel_surface"] = selection.surface
    if selection.since is not None or selection.until is not None:
        clauses.append(
            "timestamp >= {sel_since:DateTime64(9, 'UTC')}"
            " AND timestamp < {sel_until:DateTime64(9, 'UTC')}"
        )
        clauses.append(
            placed_in(
                "{sel_tenant:String}" if selection.tenant is not None else "''",
                "{sel_surface:String}" if selection.surface is not None else None,
                "{sel_since:DateTime64(9, 'UTC')}",
                "{sel_until:DateTime64(9, 'UTC')}",
            )
        )
        params["sel_since"] = to_store_time(selection.since or _EPOCH)
        params["sel_until"] = to_store_time(selection.until or _FAR_FUTURE)
    sql = WITHOUT_ORDINALS.replace("{where}", " AND ".join(clauses))
    return [
        SurfaceWithoutOrdinals(
            tenant_id=row["tenant_id"],
            surface_id=row["surface_id"],
            events=row["events"],
            without_ordinals=row["without_ordinals"],
            share_without_ordinals=row["without_ordinals"] / row["events"],
        )
        for row in store.query(sql, params).dicts()
    ]


def read_report(
    store: Store,
    now: dt.datetime,
    selection: Selection | None = None,
    bucket: Bucket = "hour",
    config: CompletenessConfig | None = None,
) -> CompletenessReport:
    """Everything `holonograph completeness` shows for one selection."""
    selection = selection or Selection()
    streams = account_streams(store, now, selection, config)
    windows = account_windows(store, bucket, selection)
    by_status: dict[str, int] = {}
    for stream in streams:
        by_status[stream.status] = by_status.get(stream.status, 0) + 1
    in_range: dict[str, int] | None = None
    if selection.since is not None or selection.until is not None:
        # gaps counted in the selected buckets: "lost yesterday", not over the stream's life
        in_range = {s.stream: 0 for s in streams}
        for w in windows:
            if w.scope == "stream" and w.stream in in_range:
                in_range[w.stream] += w.missing
    totals = CompletenessTotals(
        streams=len(streams),
        by_status=by_status,
        expected=sum(s.expected for s in streams),
        delivered=sum(s.delivered for s in streams),
        missing=sum(s.missing for s in streams),
        missing_in_range=None if in_range is None else sum(in_range.values()),
        duplicates=sum(s.duplicates for s in streams),
        biased_windows=sum(1 for w in windows if w.bias_flag),
        biased_surface_windows=sum(1 for w in windows if w.bias_flag and w.scope == "surface"),
    )
    return CompletenessReport(
        tenant=selection.tenant,
        missing_in_range=in_range,
        as_of=from_store_time(now),
        since=selection.since,
        until=selection.until,
        bucket=bucket,
        totals=totals,
        streams=streams,
        windows=windows,
        surfaces_without_ordinals=account_without_ordinals(store, selection),
    )


_RANK = {"dead": 0, "all-quarantined": 1, "closed-lossy": 2, "open": 3, "closed-complete": 4}


def _status(row: dict[str, Any]) -> StreamState:
    """The stored or computed status, except that a closed stream that delivered every
    evaluation, each of them rejected, is `all-quarantined`: nothing of it reached the
    analyses, so it is not complete. The SQL says so too (migration 0015 added the value
    to the stored enum); this keeps rows stored before it saying the same."""
    status: StreamState = row["status"]
    evaluations = row["delivered"] - row["sentinels"]
    if status == "closed-complete" and evaluations > 0 and row["quarantined"] >= evaluations:
        return "all-quarantined"
    return status


def _stream_rank(stream: StreamAccounting) -> tuple[int, int, int, str, str]:
    """Lossy and dead streams first, then open ones with gaps, then the rest."""
    rank = _RANK[stream.status]
    return (rank, 0 if stream.missing else 1, -stream.missing, stream.stream, stream.tenant_id)


def _ranges(value: Any) -> list[GapRange]:
    out = []
    for item in value or []:
        lo, hi = (item["seq_from"], item["seq_to"]) if isinstance(item, dict) else item
        out.append(GapRange.model_validate({"from": int(lo), "to": int(hi)}))
    return out


def _stream_from_row(row: dict[str, Any]) -> StreamAccounting:
    loss = LossComparison(
        reported_windows=row["reported_windows"],
        reported_offered=row["reported_offered"],
        reported_delivered=row["reported_delivered"],
        reported_dropped=row["reported_dropped"],
        reported_failed=row["reported_failed"],
        observed_missing=row["missing"],
        lost_after_client=row["lost_after_client"],
        mismatch=bool(row["loss_mismatch"]),
    )
    return StreamAccounting(
        tenant_id=row["tenant_id"],
        stream=row["emission_stream"],
        status=_status(row),
        first_seq=row["first_seq"],
        last_seq=row["last_seq"],
        final_seq=row["final_seq"],
        expected=row["expected"],
        delivered=row["delivered"],
        missing=row["missing"],
        duplicates=row["duplicates"],
        quarantined=row["quarantined"],
        sentinels=row["sentinels"],
        missing_ranges=_ranges(row["missing_ranges"]),
        final_seen=bool(row["final_seen"]),
        first_seen_at=from_store_time(row["first_seen_at"]),
        last_seen_at=from_store_time(row["last_seen_at"]),
        first_event_time=from_store_time(row["first_event_time"]),
        last_event_time=from_store_time(row["last_event_time"]),
        sentinel_interval_ms=row["sentinel_interval_ms"],
        interval_reported=bool(row["interval_reported"]),
        dead_after_ms=row["dead_after_ms"],
        surfaces=sorted(row["surfaces"]),
        loss=loss,
        status_as_of=from_store_time(row["status_as_of"]),
    )


def _window_from_row(row: dict[str, Any]) -> CompletenessWindow:
    return CompletenessWindow(
        tenant_id=row["tenant_id"],
        bucket=row["bucket"],
        scope=row["scope"],
        surface_id=row["surface_id"],
        stream=row["emission_stream"],
        bucket_start=from_store_time(row["bucket_start"]),
        offered=row["offered"],
        delivered=row["delivered"],
        missing=row["missing"],
        quarantined=row["quarantined"],
        duplicates=row["duplicates"],
        completeness_lower_bound=row["completeness_lower_bound"],
        bias_flag=bool(row["bias_flag"]),
        streams=row["streams"],
        lossy_streams=row["lossy_streams"],
    )


# ---------------------------------------------------------------- materialized tables


def _settings(config: CompletenessConfig) -> str:
    """The refresh statements' `SETTINGS` clause: the limits that bound a statement's
    time, memory and rows read (rows returned mean nothing to an INSERT ... SELECT)."""
    if not config.limits:
        return ""
    pairs = []
    for name in ("max_execution_time", "max_memory_usage", "max_rows_to_read"):
        if name in config.limits:
            value = float(config.limits[name])
            pairs.append(f"{name} = {int(value) if value.is_integer() else value!r}")
    return ("\nSETTINGS " + ", ".join(pairs)) if pairs else ""


def _insert_streams(store: Store, where: str, params: dict[str, Any], settings: str) -> None:
    store.command(
        f"INSERT INTO {STREAM_STATUS.qualified} ({STREAM_STATUS.column_list()})\n"
        f"{_with_records(where)}\nSELECT {STREAM_STATUS.column_list()} FROM ({STREAMS_SELECT})"
        f"{settings}",
        params,
    )


def _insert_stream_windows(store: Store, where: str, params: dict[str, Any], settings: str) -> None:
    store.command(
        f"INSERT INTO {COMPLETENESS_WINDOWS.qualified} ({COMPLETENESS_WINDOWS.column_list()})\n"
        f"{_with_records(where)}\n{STREAM_WINDOWS_SELECT}{settings}",
        params,
    )


def _zero_stale(store: Store, shard: str, params: dict[str, Any], settings: str) -> None:
    sql = ZERO_STALE.format(
        columns=COMPLETENESS_WINDOWS.column_list(),
        windows_table=COMPLETENESS_WINDOWS.qualified,
        status_table=STREAM_STATUS.qualified,
        shard=shard,
    )
    store.command(sql + settings, params)


def _insert_surface_windows(
    store: Store, full: bool, params: dict[str, Any], settings: str, chunk: str = "1"
) -> None:
    """Surface rows from the stored stream rows, for the buckets and surfaces this
    refresh touched (all of them on a full recompute, `chunk`'s bucket and time range
    at a time: each surface bucket sums every stream's row of that bucket)."""
    windows = (
        f"(SELECT * FROM {COMPLETENESS_WINDOWS.qualified} FINAL WHERE scope = 'stream' AND {chunk}"
    )
    surface_where = "has({buckets:Array(String)}, toString(w.bucket))"
    if not full:
        windows += (
            " AND (tenant_id, bucket, bucket_start) IN (SELECT tenant_id, bucket, bucket_start"
            f" FROM {COMPLETENESS_WINDOWS.qualified}"
            " WHERE scope = 'stream' AND version = {version:UInt64})"
        )
        surface_where += (
            " AND (w.tenant_id, s_surface) IN (SELECT tenant_id, arrayJoin(surfaces)"
            f" FROM {STREAM_STATUS.qualified} WHERE version = {{version:UInt64}})"
        )
    select = SURFACE_WINDOWS_SELECT.format(
        windows=windows + ")",
        statuses=f"(SELECT tenant_id, emission_stream, surfaces"
        f" FROM {STREAM_STATUS.qualified} FINAL)",
        surface_where=surface_where,
    )
    store.command(
        f"INSERT INTO {COMPLETENESS_WINDOWS.qualified}"
        f" ({COMPLETENESS_WINDOWS.column_list()})\n{select}{settings}",
        params,
    )


def mark_dead_streams(store: Store, now: dt.datetime, version: int | None = None) -> int:
    """Stored `open` streams silent past their dead-after time become `dead` as of
    `now`; returns how many. Needs no new receipts, so a periodic call finds them.
    (The filter sits in a subquery: the REPLACE alias `status` would shadow it.)"""
    params = {"now": to_store_time(now), "version": version or time.time_ns()}
    count = int(store.query(f"SELECT count() {MARK_DEAD_WHERE}", params).scalar() or 0)
    if count:
        store.command(
            f"INSERT INTO {STREAM_STATUS.qualified} ({STREAM_STATUS.column_list()})\n"
            f"SELECT * REPLACE ('dead' AS status, {{now:DateTime64(3, 'UTC')}} AS status_as_of,"
            f" {{version:UInt64}} AS version, now64(3, 'UTC') AS computed_at)"
            f" FROM (SELECT * {MARK_DEAD_WHERE})",
            params,
        )
    return count


def _shard_bounds(store: Store, config: CompletenessConfig) -> list[list[str]]:
    """The lower (tenant, stream) of contiguous ranges of about `rows_per_shard`
    receipts each: a range of the sorting key's prefix, so each reads only its granules."""
    rows = store.query(SHARD_BOUNDS, {"rows_per_shard": config.rows_per_shard}).rows
    return [[str(row[0][0]), str(row[0][1])] for row in rows]


def _shard_clause(bounds: Sequence[Sequence[str]], i: int) -> tuple[str, dict[str, Any]]:
    """Range `i` of `bounds` as a clause on (tenant_id, emission_stream) and its values
    (the first range open below, the last open above: every stream is in one). Written
    as comparisons of each column, which the primary key prunes by (a tuple comparison
    it does not: each range would read every receipt)."""
    clauses = ["1"]
    params: dict[str, Any] = {}
    if i > 0:
        clauses.append(
            "(tenant_id > {shard_lower_tenant:String} OR (tenant_id = {shard_lower_tenant:String}"
            " AND emission_stream >= {shard_lower:String}))"
        )
        params.update(shard_lower_tenant=bounds[i][0], shard_lower=bounds[i][1])
    if i + 1 < len(bounds):
        clauses.append(
            "(tenant_id < {shard_upper_tenant:String} OR (tenant_id = {shard_upper_tenant:String}"
            " AND emission_stream < {shard_upper:String}))"
        )
        params.update(shard_upper_tenant=bounds[i + 1][0], shard_upper=bounds[i + 1][1])
    return " AND ".join(clauses), params


def _surface_chunks(store: Store, config: CompletenessConfig) -> list[list[str]]:
    """[bucket, from, until) ranges of about `rows_per_shard` stream windows each, by
    whole days (the windows' day counts, before FINAL: a bound, not an exact size)."""
    rows = store.query(SURFACE_CHUNK_DAYS, {"buckets": list(config.materialized_buckets)}).rows
    days: dict[str, list[tuple[dt.datetime, int]]] = {b: [] for b in config.materialized_buckets}
    for bucket, day, count in rows:
        days[str(bucket)].append((from_store_time(day), int(count)))
    chunks: list[list[str]] = []
    for bucket, counts in days.items():
        starts = [_EPOCH]
        held = 0
        for day, count in counts:
            if held and held + count > config.rows_per_shard:
                starts.append(day)
                held = 0
            held += count
        ends = [*starts[1:], _FAR_FUTURE]
        chunks += [
            [bucket, a.isoformat(), b.isoformat()] for a, b in zip(starts, ends, strict=True)
        ]
    return chunks


def _surface_clause(chunk: Sequence[str]) -> tuple[str, dict[str, Any]]:
    return (
        "bucket = {chunk_bucket:String} AND bucket_start >= {chunk_from:DateTime('UTC')}"
        " AND bucket_start < {chunk_until:DateTime('UTC')}",
        {
            "chunk_bucket": chunk[0],
            "chunk_from": to_store_time(dt.datetime.fromisoformat(chunk[1])),
            "chunk_until": to_store_time(dt.datetime.fromisoformat(chunk[2])),
        },
    )


def _next_version(store: Store) -> int:
    """Wall-clock nanoseconds, but always above the last refresh's versions (it used
    `version` and `version + 1`) and any interrupted recompute's, so a clock step back
    cannot let old rows win."""
    last = store.query(
        f"SELECT greatest((SELECT max(version) FROM {COMPLETENESS_REFRESHES.qualified}),"
        f" (SELECT max(version) FROM {COMPLETENESS_REFRESH_PROGRESS.qualified}))"
    ).scalar()
    return max(time.time_ns(), int(last or 0) + 2)


@dataclass
class _Progress:
    """A full recompute's recorded plan and chunks done (`completeness_refresh_progress`):
    the one to resume is the newest not marked done whose version no finished refresh
    has passed (a refresh finished since would be overwritten by resuming an older one)."""

    store: Store
    version: int
    now: dt.datetime
    done: dict[tuple[str, int], str]
    resumed: bool

    @classmethod
    def open(cls, store: Store, now: dt.datetime) -> _Progress:
        table = COMPLETENESS_REFRESH_PROGRESS.qualified
        pending = store.query(
            f"SELECT version, now FROM {table} WHERE step = 'plan' AND version >"
            f" (SELECT max(version) FROM {COMPLETENESS_REFRESHES.qualified})"
            f" AND version NOT IN (SELECT version FROM {table} WHERE step = 'done')"
            " ORDER BY version DESC LIMIT 1"
        ).rows
        if not pending:
            return cls(store, _next_version(store), from_store_time(now), {}, False)
        version, then = int(pending[0][0]), from_store_time(pending[0][1])
        rows = store.query(
            f"SELECT step, chunk, detail FROM {table} FINAL WHERE version = {{v:UInt64}}",
            {"v": version},
        ).rows
        done = {(str(step), int(chunk)): str(detail) for step, chunk, detail in rows}
        return cls(store, version, then, done, True)

    def plan(self, step: str, make: Callable[[], list[list[str]]]) -> list[list[str]]:
        """The chunks of `step`'s plan: recorded by the interrupted run, else made now."""
        if (step, 0) in self.done:
            chunks: list[list[str]] = json.loads(self.done[(step, 0)])
            return chunks
        chunks = make()
        self.mark(step, 0, json.dumps(chunks))
        return chunks

    def mark(self, step: str, chunk: int, detail: str = "") -> None:
        self.store.insert(
            COMPLETENESS_REFRESH_PROGRESS.qualified,
            [[self.version, to_store_time(self.now), step, chunk, detail,
              to_store_time(dt.datetime.now(dt.UTC))]],
            COMPLETENESS_REFRESH_PROGRESS.columns,
        )  # fmt: skip
        self.done[(step, chunk)] = detail


ChunkHook = Callable[[str], None]  # called with "step[i]" after each chunk is recorded

# ClickHouse's error codes of the limits a refresh statement carries (`_settings`).
_LIMIT_CODES = {"159": "max_execution_time", "241": "max_memory_usage", "158": "max_rows_to_read"}
_CODE = re.compile(r"\bCode: (\d+)\b")


class RefreshOverLimit(JobError):
    """A refresh statement stopped at one of its limits: the request's to change (the
    CLI exits 2), and the chunks done are kept for the next refresh to resume after."""

    def __init__(self, step: str, limit: str) -> None:
        flag = "--" + limit.replace("_", "-")
        super().__init__(
            f"completeness refresh: {step} stopped at its limit ({limit}); the chunks done"
            " are kept and the next refresh resumes after them",
            "read_limit_exceeded",
            details={"limit": limit, "step": step},
            hint=f"raise the command's {flag} (0: none), or lower the chunk size (rows_per_shard)",
        )
        self.limit = limit


def _bounded(name: str, run: Callable[[], object]) -> None:
    """`run`, a refresh statement; one stopped at a limit says which chunk and that the
    chunks done are kept (the next full refresh resumes after them)."""
    try:
        run()
    except Exception as err:
        said = getattr(err, "limit", None)
        found = _CODE.search(str(err))
        limit = said if isinstance(said, str) else _LIMIT_CODES.get(found[1]) if found else None
        if limit is None:
            raise
        raise RefreshOverLimit(name, limit) from None


def _full_refresh(
    store: Store, now: dt.datetime, config: CompletenessConfig, on_chunk: ChunkHook | None
) -> RefreshSummary:
    """Every stream, in chunks that each stay within `config.limits`: per range of
    (tenant, stream) its status, windows and stale rows, then the surface windows per
    bucket and time range, each recorded when done; an interrupted recompute resumes
    with its version and `now`, skipping what it recorded, and answers as one run."""
    started = time.perf_counter()
    progress = _Progress.open(store, now)
    version, now = progress.version, progress.now
    params = _job_params(now, version, config)
    params["buckets"] = list(config.materialized_buckets)
    settings = _settings(config)
    steps: dict[str, float] = {}
    counts = {"chunks": 0, "resumed": 0}

    def chunk(step: str, i: int, run: Callable[..., object], *args: Any) -> None:
        counts["chunks"] += 1
        name = f"{step}[{i}]"
        if (step, i) in progress.done:
            counts["resumed"] += 1
            return
        begun = time.perf_counter()
        _bounded(name, lambda: run(store, *args))
        steps[name] = round((time.perf_counter() - begun) * 1000, 3)
        progress.mark(step, i)
        if on_chunk is not None:
            on_chunk(name)

    shards = progress.plan("plan", lambda: _shard_bounds(store, config)) or [["", ""]]
    for i in range(len(shards)):
        clause, bounds = _shard_clause(shards, i)
        where, shard_params = f"1 AND {clause}", {**params, **bounds}
        chunk("streams", i, _insert_streams, where, shard_params, settings)
        chunk("stream_windows", i, _insert_stream_windows, where, shard_params, settings)
        chunk("zero_stale", i, _zero_stale, clause, shard_params, settings)
    surfaces = progress.plan("surface_plan", lambda: _surface_chunks(store, config))
    for i, bucket_range in enumerate(surfaces):
        clause, bounds = _surface_clause(bucket_range)
        chunk_params = {**params, **bounds}
        chunk("surface_windows", i, _insert_surface_windows, True, chunk_params, settings, clause)
    summary = _finish(
        store, now, None, "full", version, steps, started,
        chunks=counts["chunks"], resumed=counts["resumed"],
    )  # fmt: skip
    progress.mark("done", 0)
    return summary


def _finish(
    store: Store,
    now: dt.datetime,
    since: dt.datetime | None,
    mode: str,
    version: int,
    steps: dict[str, float],
    started: float,
    chunks: int = 0,
    resumed: int = 0,
) -> RefreshSummary:
    """Mark silent open streams dead, then record the refresh (which finishes it)."""
    streams = int(
        store.query(
            f"SELECT count() FROM {STREAM_STATUS.qualified} WHERE version = {{version:UInt64}}",
            {"version": version},
        ).scalar()
        or 0
    )
    begun = time.perf_counter()
    marked = mark_dead_streams(store, now, version + 1)
    dead = store.query(
        f"SELECT count() FROM {STREAM_STATUS.qualified} FINAL WHERE status = 'dead'"
    ).scalar()
    steps["mark_dead"] = round((time.perf_counter() - begun) * 1000, 3)
    duration_ms = (time.perf_counter() - started) * 1000
    summary = RefreshSummary(
        mode="full" if mode == "full" else "incremental",
        now=from_store_time(now),
        since=since,
        version=version,
        streams=streams,
        marked_dead=marked,
        dead=int(dead or 0),
        duration_ms=round(duration_ms, 3),
        step_ms=steps,
        chunks=chunks,
        resumed_chunks=resumed,
    )
    store.insert(
        COMPLETENESS_REFRESHES.qualified,
        [
            [
                version,
                summary.mode,
                to_store_time(now),
                to_store_time(since) if since else None,
                streams,
                marked,
                duration_ms,
                to_store_time(dt.datetime.now(dt.UTC)),
            ]
        ],
        COMPLETENESS_REFRESHES.columns,
    )
    return summary


def _incremental_refresh(
    store: Store, now: dt.datetime, since: dt.datetime, config: CompletenessConfig
) -> RefreshSummary:
    """The streams that received anything since `since`, in one statement per step
    (a period's receipts: as bounded as the period)."""
    started = time.perf_counter()
    version = _next_version(store)
    where, params = Selection(received_since=since).where()
    params.update(_job_params(now, version, config), buckets=list(config.materialized_buckets))
    settings = _settings(config)
    steps: dict[str, float] = {}

    def step(name: str, run: Callable[[], object]) -> None:
        begun = time.perf_counter()
        _bounded(name, run)
        steps[name] = round((time.perf_counter() - begun) * 1000, 3)

    step("streams[0]", lambda: _insert_streams(store, where, params, settings))
    step("stream_windows[0]", lambda: _insert_stream_windows(store, where, params, settings))
    step("zero_stale", lambda: _zero_stale(store, "1", params, settings))
    step("surface_windows", lambda: _insert_surface_windows(store, False, params, settings))
    return _finish(store, now, since, "incremental", version, steps, started)


def recompute_completeness(
    store: Store,
    now: dt.datetime,
    config: CompletenessConfig | None = None,
    on_chunk: ChunkHook | None = None,
) -> RefreshSummary:
    """Rewrite `stream_status` and `completeness_windows` for every stream, in chunks
    (`rows_per_shard`), resuming an interrupted recompute (`on_chunk`: a test's seam)."""
    return _full_refresh(store, now, config or CompletenessConfig(), on_chunk)


def refresh_completeness(
    store: Store,
    now: dt.datetime,
    since: dt.datetime,
    config: CompletenessConfig | None = None,
) -> RefreshSummary:
    """Recompute only the streams that received anything since `since` (received_at),
    plus the surface buckets they touch, then mark silent open streams dead."""
    return _incremental_refresh(store, now, since, config or CompletenessConfig())


def refresh_stream_status(
    store: Store, now: dt.datetime, config: CompletenessConfig | None = None
) -> RefreshSummary:
    """The periodic entry point `serve` schedules: incremental from the last refresh
    (minus `lookback`, for receipts written late), or a full recompute when there was
    none or the last full one is older than `full_every`."""
    config = config or CompletenessConfig()
    now = from_store_time(now)
    row = store.query(
        "SELECT max(now), maxIf(now, mode = 'full'), count()"
        f" FROM {COMPLETENESS_REFRESHES.qualified}"
    ).rows[0]
    last, last_full, runs = row
    if not runs or now - from_store_time(last_full) >= config.full_every:
        return recompute_completeness(store, now, config)
    since = min(from_store_time(last), from_store_time(now)) - config.lookback
    return refresh_completeness(store, now, since, config)


# ---------------------------------------------------------------- stored reads


def stored_streams(
    store: Store, stream: str | None = None, tenant: str | None = None
) -> list[StreamAccounting]:
    """`stream_status` as last refreshed (lossy and dead first), of one tenant or all."""
    sql = f"SELECT * FROM {STREAM_STATUS.qualified} FINAL WHERE 1"
    params: dict[str, Any] = {}
    if tenant is not None:
        sql += " AND tenant_id = {tenant:String}"
        params["tenant"] = tenant
    if stream is not None:
        sql += " AND emission_stream = {stream:String}"
        params["stream"] = stream
    rows = store.query(sql, params).dicts()
    return sorted((_stream_from_row(row) for row in rows), key=_stream_rank)


def stored_windows(
    store: Store,
    bucket: Bucket,
    scope: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    tenant: str | None = None,
) -> list[CompletenessWindow]:
    """`completeness_windows` as last refreshed (of one tenant, or all), for later jobs
    that weigh their samples: rows with `offered = 0` (zeroed or empty) are left out."""
    rows = store.query(
        f"SELECT * FROM {COMPLETENESS_WINDOWS.qualified} FINAL"
        " WHERE bucket = {bucket:String} AND offered > 0"
        " AND ({tenant:String} = '' OR tenant_id = {tenant:String})"
        " AND ({scope:String} = '' OR scope = {scope:String})"
        " AND bucket_start >= {since:DateTime('UTC')} AND bucket_start < {until:DateTime('UTC')}"
        " ORDER BY tenant_id, scope, surface_id, emission_stream, bucket_start",
        {
            "tenant": tenant or "",
            "bucket": bucket,
            "scope": scope or "",
            "since": to_store_time(floor_to_bucket(since, bucket) if since else _EPOCH),
            "until": to_store_time(until or _FAR_FUTURE),
        },
    ).dicts()
    return [_window_from_row(row) for row in rows]


# ---------------------------------------------------------------- the job (processors.jobs)


class CompletenessRequest(JobRequest):
    """`holonograph completeness` and `POST /holonograph/completeness`: which streams to
    account for, and as of when."""

    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface", "stream": "stream"}

    since: UtcTime | None = Field(None, description="Streams with events at or after T.")
    until: UtcTime | None = Field(None, description="... and before T.")
    stream: str | None = Field(None, min_length=1, description="Only this emission stream.")
    surface_id: str | None = Field(
        None, min_length=1, description="Only streams that carried this surface, and its windows."
    )
    bucket: Bucket = Field("hour", description="Window size of the biased windows.")
    as_of: UtcTime | None = Field(None, description="Evaluate status at T (default: now).")
    sentinel_interval_ms: int = Field(
        30_000, gt=0, description="Interval assumed for streams that never reported one."
    )
    dead_after: float = Field(
        3.0, gt=0, description="A stream without final, silent this many intervals, is dead."
    )
    refresh: bool = Field(False, description="Also rewrite stream_status/completeness_windows.")
    limit: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="List this many streams (lossy and dead first) from `offset`, with"
        " their windows; the totals, the finding and `streamsListed` cover every stream."
        " Default: every stream (a table of 10k streams asks a page at a time).",
    )
    offset: int = Field(0, ge=0, description="Skip this many streams before listing.")
    refresh_interval_seconds: float = Field(
        60.0,
        gt=0,
        description="Seconds between the tables' refreshes by serve/sink; older than twice: warn.",
    )

    @model_validator(mode="after")
    def _window(self) -> CompletenessRequest:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self

    def persists(self) -> bool:
        return self.refresh


Request = CompletenessRequest


@dataclass(frozen=True)
class Report:
    """The completeness read, and what its refresh needs (`persist`) and did."""

    completeness: CompletenessReport
    config: CompletenessConfig
    refresh_interval_seconds: float
    refreshed: RefreshSummary | None = None
    page: tuple[int, int] | None = None  # (offset, limit) of the streams listed

    def to_json(self) -> dict[str, Any]:
        if self.page is None:
            return self.completeness.model_dump(by_alias=True)
        offset, limit = self.page
        data = page_of(self.completeness, offset, limit).model_dump(by_alias=True)
        data["page"] = {
            "offset": offset,
            "limit": limit,
            "streams": self.completeness.totals.streams,
        }
        return data


def page_of(report: CompletenessReport, offset: int, limit: int) -> CompletenessReport:
    """The report listing only streams `offset` to `offset + limit` (in the report's
    order: lossy and dead first), their stream windows and their in-range gaps; the
    totals and the surface windows are the whole selection's. The page answers in size
    of the page, whatever the number of streams (the web UI's streams table)."""
    streams = report.streams[offset : offset + limit]
    listed = {(s.tenant_id, s.stream) for s in streams}
    names = {s.stream for s in streams}
    windows = [
        w for w in report.windows if w.scope != "stream" or (w.tenant_id, w.stream) in listed
    ]
    in_range = report.missing_in_range
    if in_range is not None:
        in_range = {k: v for k, v in in_range.items() if k in names}
    return report.model_copy(
        update={"streams": streams, "windows": windows, "missing_in_range": in_range}
    )


def with_refresh_age(
    report: CompletenessReport, refreshed_at: dt.datetime | None, refresh_seconds: float
) -> CompletenessReport:
    """The report with when its stored tables were refreshed, stale past two periods."""
    stale = refreshed_at is None or (
        report.as_of - from_store_time(refreshed_at)
    ).total_seconds() > (2 * refresh_seconds)
    return report.model_copy(update={"tables_refreshed_at": refreshed_at, "tables_stale": stale})


def _limits_of(store: Store) -> dict[str, float] | None:
    """The read limits of the job's connection (`ReadLimits`), for its refresh."""
    settings = getattr(getattr(store, "limits", None), "settings", None)
    if not callable(settings):
        return None
    return {name: float(value) for name, value in settings().items()}


def run(store: Store, request: Request, clock: Clock) -> Report:
    """Per-stream accounting and windows of the selection, read live (read-only)."""
    now = request.as_of or clock()
    config = CompletenessConfig(
        default_sentinel_interval_ms=request.sentinel_interval_ms,
        dead_after_intervals=request.dead_after,
        limits=_limits_of(store),
    )
    selection = Selection(
        tenant=request.tenant,
        stream=request.stream,
        surface=request.surface_id,
        since=request.since,
        until=request.until,
    )
    read = read_report(store, now, selection, request.bucket, config)
    read = with_refresh_age(read, last_refresh(store), request.refresh_interval_seconds)
    reach = retention_reach(store, request.tenant, request.since, now)
    if reach is not None:
        read = read.model_copy(update={"retention": reach})
    page = None if request.limit is None else (request.offset, request.limit)
    return Report(read, config, request.refresh_interval_seconds, page=page)


def persist(store: Store, report: Report) -> Report:
    """The refresh: rewrite `stream_status` and `completeness_windows` (every stream, as
    of the report's time), then say so in the report."""
    summary = recompute_completeness(store, report.completeness.as_of, report.config)
    read = with_refresh_age(
        report.completeness, last_refresh(store), report.refresh_interval_seconds
    )
    return dataclasses.replace(report, completeness=read, refreshed=summary)


def finding(report: Report) -> bool:
    """Loss, a dead stream, a stream whose every evaluation was rejected, or a client
    reporting more drops than gaps."""
    return any(
        s.missing or s.status in ("dead", "all-quarantined") or s.loss.mismatch
        for s in report.completeness.streams
    )


JOB = Job("completeness", Request, CompletenessReport, run, persist, finding)
