"""Completeness accounting against a ground-truth model of random client streams.

Each hypothesis example builds a few streams whose client records seqs 0..n-1
(evaluations on a few surfaces, interleaved sentinels), then drops some, retries
some (new receipt ids: countable duplicates), replays some receipts (same id:
collapse), quarantines some (arrived, not gaps), ends gracefully (final) or crashes,
and delivers the receipts shuffled over several inserts. The live read and the
materialized tables must both equal the model exactly.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.store.clickhouse import open_store
from processors.completeness import job
from schemas.completeness import CompletenessWindow, StreamAccounting
from schemas.migrations import apply_migrations
from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS, STREAM_STATUS

pytestmark = pytest.mark.clickhouse

T0 = dt.datetime(2026, 7, 1, 9, 0, tzinfo=dt.UTC)
SURFACES = ("classify-intent", "draft-reply", "route")
DEFAULT_INTERVAL_MS = 30_000
RECEIPT_COLUMNS = EMISSION_RECEIPTS.pick(
    "emission_stream",
    "emission_seq",
    "receipt_id",
    "kind",
    "final",
    "quarantined",
    "event_id",
    "surface_id",
    "event_time",
    "received_at",
    "sentinel_interval_ms",
    "completeness_offered",
    "completeness_delivered",
    "completeness_dropped",
    "completeness_failed",
    "completeness_window_start",
    "completeness_window_end",
)
TABLES = ("emission_receipts", "stream_status", "completeness_windows", "completeness_refreshes")


class StoreHolder:
    """One chDB directory for the module (hypothesis runs many examples); it can be
    closed and reopened to simulate a restart."""

    def __init__(self, path: Path) -> None:
        self.url = f"chdb://{path}"
        self.store: Store = self._open()

    def _open(self) -> Store:
        store = open_store(self.url)
        apply_migrations(store)
        return store

    def restart(self) -> Store:
        self.store.close()
        self.store = self._open()
        return self.store

    def reset(self) -> Store:
        for table in TABLES:
            self.store.command(f"TRUNCATE TABLE holonograph.{table}")
        return self.store


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreHolder]:
    h = StoreHolder(tmp_path_factory.mktemp("completeness"))
    yield h
    h.store.close()


# ---------------------------------------------------------------- the model


@dataclass
class Record:
    seq: int
    kind: str
    surface: str
    final: bool
    event_time: dt.datetime
    interval_ms: int | None = None
    window: tuple[dt.datetime, dt.datetime, int] | None = None  # start, end, dropped


@dataclass
class StreamPlan:
    name: str
    records: list[Record]
    dropped: set[int]
    quarantined: set[int]
    retries: dict[int, int]
    replays: set[int]
    receipts: list[list[Any]] = field(default_factory=list)

    @property
    def received(self) -> list[Record]:
        return [r for r in self.records if r.seq not in self.dropped]


@st.composite
def stream_plans(draw: st.DrawFn, name: str) -> StreamPlan:
    n = draw(st.integers(1, 40))
    graceful = draw(st.booleans())
    step_s = draw(st.sampled_from([1, 45, 400, 1500]))
    start = T0 + dt.timedelta(seconds=draw(st.integers(0, 7200)))
    records = []
    for seq in range(n):
        is_last = seq == n - 1
        sentinel = draw(st.integers(0, 4)) == 0 or (is_last and graceful and draw(st.booleans()))
        jitter = draw(st.integers(-2, 2)) if step_s > 5 else 0
        event_time = start + dt.timedelta(seconds=seq * step_s + jitter, microseconds=seq)
        record = Record(
            seq=seq,
            kind="sentinel" if sentinel else "evaluation",
            surface="" if sentinel else draw(st.sampled_from(SURFACES)),
            final=is_last and graceful,
            event_time=event_time,
        )
        if sentinel:
            record.interval_ms = draw(st.sampled_from([None, 5_000, 60_000]))
            if draw(st.booleans()):
                record.window = (
                    event_time - dt.timedelta(seconds=10),
                    event_time,
                    draw(st.integers(0, 3)),
                )
        records.append(record)
    seqs = st.sets(st.integers(0, n - 1), max_size=n)
    dropped = draw(seqs)
    kept = [s for s in range(n) if s not in dropped]
    subset = st.sets(st.sampled_from(kept), max_size=len(kept)) if kept else st.just(set[int]())
    quarantined = draw(subset)
    retries = {s: draw(st.integers(1, 2)) for s in draw(subset)}
    replays = draw(subset)
    return StreamPlan(name, records, dropped, quarantined, retries, replays)


@dataclass
class Scenario:
    streams: list[StreamPlan]
    batches: int
    shuffle_seed: int
    silence_s: int


scenarios = st.builds(
    Scenario,
    streams=st.integers(1, 4).flatmap(
        lambda k: st.tuples(*[stream_plans(f"stream-{i}") for i in range(k)]).map(list)
    ),
    batches=st.integers(1, 4),
    shuffle_seed=st.integers(0, 2**16),
    silence_s=st.sampled_from([0, 20, 100, 400]),
)


def build_receipts(plan: StreamPlan, rng: random.Random) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for rec in plan.received:
        for attempt in range(1 + plan.retries.get(rec.seq, 0)):
            delay = dt.timedelta(milliseconds=rng.randint(0, 3000) + 1000 * attempt)
            window = rec.window
            row = [
                plan.name,
                rec.seq,
                f"{plan.name}-{rec.seq}-{attempt}",
                rec.kind,
                rec.final,
                rec.seq in plan.quarantined,
                "" if rec.kind == "sentinel" else f"evt_{plan.name}_{rec.seq}",
                rec.surface,
                rec.event_time,
                rec.event_time + delay,
                rec.interval_ms,
                None,
                None,
                window[2] if window else None,
                0 if window else None,
                window[0] if window else None,
                window[1] if window else None,
            ]
            rows.append(row)
            if rec.seq in plan.replays and attempt == 0:
                rows.append(list(row))  # pipeline replay: same receipt id
    return rows


def ranges(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in seqs:
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def expected_stream(plan: StreamPlan, now: dt.datetime) -> dict[str, Any] | None:
    received = plan.received
    if not received:
        return None
    got = {r.seq for r in received}
    last = max(got)
    missing = [s for s in range(last + 1) if s not in got]
    last_seen = max(row[9] for row in plan.receipts)
    intervals = [r for r in received if r.interval_ms is not None]
    interval = max(intervals, key=lambda r: r.seq).interval_ms if intervals else None
    interval_ms = interval or DEFAULT_INTERVAL_MS
    final_seen = any(r.final for r in received)
    evaluations = sum(1 for r in received if r.kind == "evaluation")
    rejected = sum(1 for r in received if r.seq in plan.quarantined)
    if final_seen and not missing and evaluations and rejected >= evaluations:
        status = "all-quarantined"  # nothing of it reached the analyses
    elif final_seen:
        status = "closed-lossy" if missing else "closed-complete"
    elif (now - last_seen) > dt.timedelta(milliseconds=3 * interval_ms):
        status = "dead"
    else:
        status = "open"
    windows = {(r.window[0], r.window[1]): r.window[2] for r in received if r.window}
    reported = sum(windows.values())
    return {
        "status": status,
        "expected": last + 1,
        "delivered": len(got),
        "missing": len(missing),
        "missing_ranges": ranges(missing),
        "duplicates": sum(plan.retries.values()),
        "quarantined": len(plan.quarantined),
        "final_seen": final_seen,
        "final_seq": last if final_seen else None,
        "sentinel_interval_ms": interval_ms,
        "surfaces": sorted({r.surface for r in received if r.surface}),
        "reported_dropped": reported,
        "lost_after_client": len(missing) - reported,
    }


def actual_stream(acc: StreamAccounting) -> dict[str, Any]:
    return {
        "status": acc.status,
        "expected": acc.expected,
        "delivered": acc.delivered,
        "missing": acc.missing,
        "missing_ranges": [(g.seq_from, g.seq_to) for g in acc.missing_ranges],
        "duplicates": acc.duplicates,
        "quarantined": acc.quarantined,
        "final_seen": acc.final_seen,
        "final_seq": acc.final_seq,
        "sentinel_interval_ms": acc.sentinel_interval_ms,
        "surfaces": acc.surfaces,
        "reported_dropped": acc.loss.reported_dropped,
        "lost_after_client": acc.loss.lost_after_client,
    }


def bucket_of(t: dt.datetime, bucket: str) -> dt.datetime:
    return job.floor_to_bucket(t, bucket)  # type: ignore[arg-type]


WindowKey = tuple[str, str, dt.datetime]  # scope key, name, bucket start


def expected_windows(plans: list[StreamPlan], bucket: str) -> dict[WindowKey, tuple[int, ...]]:
    """(offered, delivered, missing, quarantined) per stream and per surface bucket;
    a gap counts in the bucket of the next received record."""
    per_stream: dict[tuple[str, dt.datetime], list[int]] = {}
    per_surface_delivered: dict[tuple[str, dt.datetime], list[int]] = {}
    carried: dict[str, set[str]] = {}
    for plan in plans:
        prev = -1
        carried[plan.name] = {r.surface for r in plan.received if r.surface}
        for rec in plan.received:
            b = bucket_of(rec.event_time, bucket)
            cell = per_stream.setdefault((plan.name, b), [0, 0, 0])
            cell[0] += 1
            cell[1] += rec.seq - prev - 1
            cell[2] += rec.seq in plan.quarantined
            prev = rec.seq
            if rec.surface:
                sc = per_surface_delivered.setdefault((rec.surface, b), [0, 0])
                sc[0] += 1
                sc[1] += rec.seq in plan.quarantined
    out: dict[WindowKey, tuple[int, ...]] = {}
    for (name, b), (delivered, missing, quarantined) in per_stream.items():
        out[("stream", name, b)] = (delivered + missing, delivered, missing, quarantined)
    surface_cells: dict[tuple[str, dt.datetime], list[int]] = {}
    for (name, b), (_, missing, _) in per_stream.items():
        for surface in carried[name]:
            surface_cells.setdefault((surface, b), [0, 0])[0] += missing
    for key in per_surface_delivered:
        surface_cells.setdefault(key, [0, 0])
    for (surface, b), (missing, _) in surface_cells.items():
        delivered, quarantined = per_surface_delivered.get((surface, b), [0, 0])
        if delivered + missing:
            out[("surface", surface, b)] = (delivered + missing, delivered, missing, quarantined)
    return out


def actual_windows(windows: list[CompletenessWindow]) -> dict[WindowKey, tuple[int, ...]]:
    out: dict[WindowKey, tuple[int, ...]] = {}
    for w in windows:
        if w.offered == 0:
            continue
        name = w.stream if w.scope == "stream" else w.surface_id
        assert (w.scope, name, w.bucket_start) not in out
        out[(w.scope, name, w.bucket_start)] = (w.offered, w.delivered, w.missing, w.quarantined)
        assert w.bias_flag == (w.missing > 0)
        assert w.completeness_lower_bound == pytest.approx(w.delivered / w.offered)
    return out


def deliver(store: Store, scenario: Scenario) -> None:
    rng = random.Random(scenario.shuffle_seed)
    rows: list[list[Any]] = []
    for plan in scenario.streams:
        plan.receipts = build_receipts(plan, rng)
        rows += plan.receipts
    rng.shuffle(rows)
    size = max(1, -(-len(rows) // scenario.batches))
    for i in range(0, len(rows), size):
        store.insert(EMISSION_RECEIPTS.qualified, rows[i : i + size], RECEIPT_COLUMNS)


def scenario_now(scenario: Scenario) -> dt.datetime:
    last = max((row[9] for p in scenario.streams for row in p.receipts), default=T0)
    return last + dt.timedelta(seconds=scenario.silence_s)  # type: ignore[no-any-return]


def read_tables(store: Store, bucket: str) -> tuple[dict[str, dict[str, Any]], list[Any]]:
    streams = {a.stream: actual_stream(a) for a in job.stored_streams(store)}
    return streams, job.stored_windows(store, bucket)  # type: ignore[arg-type]


# ---------------------------------------------------------------- properties

PROPERTY = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@PROPERTY
@given(scenario=scenarios, bucket=st.sampled_from(["minute", "hour", "day"]))
def test_live_accounting_equals_ground_truth(
    holder: StoreHolder, scenario: Scenario, bucket: str
) -> None:
    store = holder.reset()
    deliver(store, scenario)
    now = scenario_now(scenario)
    truth = {p.name: e for p in scenario.streams if (e := expected_stream(p, now)) is not None}

    got = {a.stream: actual_stream(a) for a in job.account_streams(store, now)}
    assert got == truth

    windows = job.account_windows(store, bucket)  # type: ignore[arg-type]
    assert actual_windows(windows) == expected_windows(scenario.streams, bucket)


@PROPERTY
@given(scenario=scenarios, rows_per_shard=st.sampled_from([1_000_000, 7]))
def test_tables_after_full_recompute_equal_ground_truth(
    holder: StoreHolder, scenario: Scenario, rows_per_shard: int
) -> None:
    """Also run shard by shard (a few receipts per shard): the same tables."""
    store = holder.reset()
    deliver(store, scenario)
    now = scenario_now(scenario)
    truth = {p.name: e for p in scenario.streams if (e := expected_stream(p, now)) is not None}
    config = job.CompletenessConfig(rows_per_shard=rows_per_shard)
    summary = job.recompute_completeness(store, now, config)
    assert summary.mode == "full" and summary.streams == len(truth)

    streams, windows = read_tables(store, "hour")
    assert streams == truth
    assert actual_windows(windows) == expected_windows(scenario.streams, "hour")


@settings(PROPERTY, max_examples=10)
@given(scenario=scenarios, late_fraction=st.sampled_from([0.0, 0.5, 1.0]))
def test_incremental_refresh_across_restart_with_late_arrivals(
    holder: StoreHolder, scenario: Scenario, late_fraction: float
) -> None:
    """Half the receipts, a full recompute, a restart, the rest plus late arrivals that
    fill gaps, an incremental refresh: the tables equal the ground truth of the whole."""
    store = holder.reset()
    rng = random.Random(scenario.shuffle_seed)
    for plan in scenario.streams:
        plan.receipts = build_receipts(plan, rng)
    rows = [row for plan in scenario.streams for row in plan.receipts]
    cut = sorted(row[9] for row in rows)[len(rows) // 2] if rows else T0
    early = [row for row in rows if row[9] < cut]
    store.insert(EMISSION_RECEIPTS.qualified, early, RECEIPT_COLUMNS)
    job.recompute_completeness(store, cut)

    store = holder.restart()
    late_rows: list[list[Any]] = []
    for plan in scenario.streams:
        late = {s for s in sorted(plan.dropped) if rng.random() < late_fraction}
        plan.dropped -= late
        extra = build_receipts(
            StreamPlan(
                plan.name, [r for r in plan.records if r.seq in late], set(), set(), {}, set()
            ),
            rng,
        )
        for row in extra:
            row[2] += "-late"
            row[9] = max(row[9], cut) + dt.timedelta(seconds=5)
        plan.receipts += extra
        late_rows += extra
    rest = [row for row in rows if row[9] >= cut] + late_rows
    rng.shuffle(rest)
    store.insert(EMISSION_RECEIPTS.qualified, rest, RECEIPT_COLUMNS)
    now = scenario_now(scenario)
    summary = job.refresh_completeness(store, now, since=cut - dt.timedelta(seconds=1))
    assert summary.mode == "incremental"

    truth = {p.name: e for p in scenario.streams if (e := expected_stream(p, now)) is not None}
    streams, windows = read_tables(store, "hour")
    # Streams untouched since the cut keep the status computed then, except that
    # silent open ones are marked dead as of `now`.
    assert streams == truth
    assert actual_windows(windows) == expected_windows(scenario.streams, "hour")
    assert {a.stream: actual_stream(a) for a in job.account_streams(store, now)} == truth


# ---------------------------------------------------------------- examples


def receipt(
    stream: str,
    seq: int,
    at: dt.datetime,
    *,
    kind: str = "evaluation",
    final: bool = False,
    interval_ms: int | None = None,
    dropped: int | None = None,
    receipt_id: str | None = None,
    surface: str = "classify-intent",
    quarantined: bool = False,
) -> list[Any]:
    window = (at - dt.timedelta(seconds=10), at) if dropped is not None else (None, None)
    return [
        stream,
        seq,
        receipt_id or f"{stream}-{seq}-{at.isoformat()}",
        kind,
        final,
        quarantined,
        "" if kind == "sentinel" else f"evt_{stream}_{seq}",
        "" if kind == "sentinel" else surface,
        at,
        at,
        interval_ms,
        None if dropped is None else dropped + 10,
        None if dropped is None else 10,
        dropped,
        None if dropped is None else 0,
        *window,
    ]


def statuses(store: Store) -> dict[str, str]:
    rows = store.query("SELECT emission_stream, status FROM holonograph.stream_status FINAL")
    return dict(rows.rows)


def test_dead_detection_with_injected_clock(holder: StoreHolder) -> None:
    store = holder.reset()
    t = T0
    store.insert(
        EMISSION_RECEIPTS.qualified,
        [
            receipt("a", 0, t),
            receipt("a", 1, t + dt.timedelta(seconds=1), kind="sentinel", interval_ms=10_000),
            receipt("b", 0, t),
        ],
        RECEIPT_COLUMNS,
    )
    first = job.refresh_stream_status(store, t + dt.timedelta(seconds=20))
    assert first.mode == "full" and first.streams == 2
    assert statuses(store) == {"a": "open", "b": "open"}

    # a: 3 x 10 s after its last receipt; b: default 30 s interval, so 90 s.
    later = job.refresh_stream_status(store, t + dt.timedelta(seconds=32))
    assert later.mode == "incremental" and later.dead == 1
    assert statuses(store) == {"a": "dead", "b": "open"}
    # Nothing new arrived (past the lookback): the silent open stream is marked dead.
    config = job.CompletenessConfig(lookback=dt.timedelta(seconds=5))
    quiet = job.refresh_stream_status(store, t + dt.timedelta(seconds=91), config)
    assert (quiet.streams, quiet.marked_dead, quiet.dead) == (0, 1, 2)
    assert statuses(store) == {"a": "dead", "b": "dead"}

    # A dead stream that speaks again is open again; a final closes it.
    resume = t + dt.timedelta(seconds=100)
    store.insert(EMISSION_RECEIPTS.qualified, [receipt("a", 2, resume)], RECEIPT_COLUMNS)
    job.refresh_stream_status(store, resume + dt.timedelta(seconds=1))
    assert statuses(store) == {"a": "open", "b": "dead"}
    end = resume + dt.timedelta(seconds=2)
    store.insert(
        EMISSION_RECEIPTS.qualified,
        [receipt("a", 3, end, kind="sentinel", final=True)],
        RECEIPT_COLUMNS,
    )
    job.refresh_stream_status(store, end + dt.timedelta(hours=1))
    assert statuses(store) == {"a": "closed-complete", "b": "dead"}


def test_refresh_goes_full_when_the_last_full_is_old(holder: StoreHolder) -> None:
    store = holder.reset()
    store.insert(EMISSION_RECEIPTS.qualified, [receipt("a", 0, T0)], RECEIPT_COLUMNS)
    config = job.CompletenessConfig(full_every=dt.timedelta(minutes=30))
    modes = [
        job.refresh_stream_status(store, T0 + dt.timedelta(minutes=m), config).mode
        for m in (1, 2, 20, 31, 32)
    ]
    assert modes == ["full", "incremental", "incremental", "full", "incremental"]


def test_reported_drops_beside_observed_loss(holder: StoreHolder) -> None:
    store = holder.reset()
    t = T0
    rows = [
        # client says it dropped 2 (seqs 1-2); seq 4 was lost after it left the client
        receipt("honest", 0, t),
        receipt("honest", 3, t + dt.timedelta(seconds=3), kind="sentinel", dropped=2),
        receipt("honest", 5, t + dt.timedelta(seconds=5)),
        # client claims 4 drops but only 1 seq is missing: a finding of its own
        receipt("claims-more", 0, t),
        receipt("claims-more", 2, t + dt.timedelta(seconds=2), kind="sentinel", dropped=4),
    ]
    # the same sentinel retried counts its window once
    rows.append(list(rows[1]))
    rows[-1][2] = "retry"
    store.insert(EMISSION_RECEIPTS.qualified, rows, RECEIPT_COLUMNS)
    accs = {a.stream: a for a in job.account_streams(store, t + dt.timedelta(seconds=6))}

    honest = accs["honest"].loss
    assert (honest.reported_windows, honest.reported_dropped, honest.observed_missing) == (1, 2, 3)
    assert honest.lost_after_client == 1 and not honest.mismatch
    assert accs["honest"].duplicates == 1
    assert [(g.seq_from, g.seq_to) for g in accs["honest"].missing_ranges] == [(1, 2), (4, 4)]
    claims = accs["claims-more"].loss
    assert claims.lost_after_client == -3 and claims.mismatch
    # lossy and dead streams are listed first
    assert [a.stream for a in job.account_streams(store, t)] == ["honest", "claims-more"]


def test_selection_filters_streams_and_windows(holder: StoreHolder) -> None:
    store = holder.reset()
    day1, day2 = T0, T0 + dt.timedelta(days=1)
    store.insert(
        EMISSION_RECEIPTS.qualified,
        [
            receipt("yesterday", 0, day1),
            receipt("yesterday", 2, day1 + dt.timedelta(minutes=70)),
            receipt("today", 0, day2, surface="route"),
            receipt("today", 1, day2 + dt.timedelta(minutes=1), surface="route"),
        ],
        RECEIPT_COLUMNS,
    )
    since, until = day1.replace(hour=0), day2.replace(hour=0)
    sel = job.Selection(since=since, until=until)
    report = job.read_report(store, day2, sel, bucket="hour")
    assert [s.stream for s in report.streams] == ["yesterday"]
    biased = [(w.scope, w.stream or w.surface_id, w.bucket_start.hour) for w in report.windows]
    assert ("stream", "yesterday", 10) in biased and ("surface", "classify-intent", 10) in biased
    assert all(since <= w.bucket_start < until for w in report.windows)
    assert report.totals.missing == 1 and report.totals.biased_windows == 2
    assert report.missing_in_range == {"yesterday": 1} and report.totals.missing_in_range == 1
    assert job.read_report(store, day2).missing_in_range is None

    job.recompute_completeness(store, day2)
    stored = job.stored_windows(store, "hour", scope="surface", since=since, until=until)
    assert stored == [w for w in report.windows if w.scope == "surface"]
    assert [s.stream for s in job.stored_streams(store, "today")] == ["today"]

    only = job.account_streams(store, day2, job.Selection(surface="route"))
    assert [s.stream for s in only] == ["today"]
    one = job.account_windows(store, "day", job.Selection(stream="yesterday"))
    assert [(w.scope, w.offered, w.missing) for w in one] == [("stream", 3, 1)]


def test_a_closed_stream_whose_every_evaluation_was_rejected_is_all_quarantined(
    holder: StoreHolder,
) -> None:
    store = holder.reset()
    t = T0
    rows = [
        receipt("rejected", 0, t, quarantined=True),
        receipt("rejected", 1, t, quarantined=True),
        receipt("rejected", 2, t, kind="sentinel", final=True),
        receipt("half", 0, t, quarantined=True),
        receipt("half", 1, t),
        receipt("half", 2, t, kind="sentinel", final=True),
    ]
    store.insert(EMISSION_RECEIPTS.qualified, rows, RECEIPT_COLUMNS)
    now = t + dt.timedelta(minutes=5)
    live = job.read_report(store, now)
    assert {s.stream: s.status for s in live.streams} == {
        "rejected": "all-quarantined",
        "half": "closed-complete",
    }
    assert live.streams[0].stream == "rejected"  # ranked before the complete ones
    assert live.totals.by_status == {"all-quarantined": 1, "closed-complete": 1}
    request = job.Request(as_of=now)
    assert job.finding(job.run(store, request, lambda: now))  # a gate fails on it
    job.refresh_stream_status(store, now)
    assert {s.stream: s.status for s in job.stored_streams(store)} == {
        "rejected": "all-quarantined",
        "half": "closed-complete",
    }
    # The stored row says it too: a dashboard reading the table agrees (migration 0015).
    stored = store.query(
        f"SELECT emission_stream, toString(status) FROM {STREAM_STATUS.qualified} FINAL"
        " ORDER BY emission_stream"
    ).rows
    assert [tuple(row) for row in stored] == [
        ("half", "closed-complete"),
        ("rejected", "all-quarantined"),
    ]
