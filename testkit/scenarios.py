"""Seeded synthetic traffic with known truth, for testing and benchmarking drift and variance.

A `SurfaceSpec` describes one surface: buckets (30 days hourly by default), events per
bucket drawn uniformly from `events`, a base pass rate, hour-to-hour overdispersion
`tau` (each bucket's rate is base + N(0, tau^2); with `rho` > 0 those deviations are an
AR(1) wander with lag-one correlation `rho` and marginal spread `tau`), an optional
seasonal swing (`seasonal`: amplitude of a daily cycle in hour buckets, a weekly one in
day buckets), and `Change`s. A change moves the pass
rate by `delta` from bucket `at` on and is tied to the layers it names:

- `lens`, `light source`, `substrate`: the lens version / served model id / the
  `prompt_hash` substrate column switches to a new value at the change, so the change is
  recorded on the events (with `rollout` > 0 the new value phases in over that many
  buckets and only events carrying it are affected, so old and new overlap in time);
- `silent`: nothing recorded changes (the vendor changed the model behind a stable
  alias: give several surfaces the same alias and the same silent change);
- `cohort-mix`: rates inside the two cohorts (`tier=enterprise` at base + gap,
  `tier=free` at base - gap) stay put, the share of enterprise traffic moves instead.

`loss` windows drop a fraction of the *failed* events (loss correlated with outcome),
leaving gaps in the emission ordinals as a lossy client would.

Generation yields *cells* (bucket x layer values x cohort with offered, delivered and
passing counts); `write_cells` expands them into `evaluation_events`,
`evaluation_dimensions` and `emission_receipts` rows inside ClickHouse
(`INSERT ... SELECT ... ARRAY JOIN range(n)`), so a 100-surface month loads in seconds.
The store must be migrated: the core tables are the migrations', written in the column
order `schemas.tables` gives; the cells pass through a staging table of this module's
own, kept out of the `holonograph` database so that database holds only what the
migrations create.
Event ids, timestamps and ordinals are deterministic functions of the cell; all
randomness comes from the seed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field

import numpy as np

from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

LAYER_KINDS = ("lens", "light source", "substrate", "silent", "cohort-mix")
_WIDTH = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}


@dataclass(frozen=True)
class Change:
    at: int
    delta: float
    layers: tuple[str, ...]
    rollout: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.layers) - set(LAYER_KINDS)
        if unknown or not self.layers:
            raise ValueError(f"layers must be a non-empty subset of {LAYER_KINDS}")

    @property
    def expected(self) -> str:
        """The label a correct analysis gives: a source, 'confounded' or 'cohort-mix'."""
        recorded = {x for x in self.layers if x in ("lens", "light source", "substrate")}
        if len(recorded) > 1:
            return "confounded"
        if recorded:
            return recorded.pop()
        return "light source" if "silent" in self.layers else "cohort-mix"


@dataclass(frozen=True)
class SurfaceSpec:
    surface_id: str
    start: dt.datetime = dt.datetime(2026, 6, 1)
    buckets: int = 720
    bucket: str = "hour"
    events: tuple[int, int] = (50, 500)
    base: float = 0.8
    tau: float = 0.0
    rho: float = 0.0  # lag-one correlation of the deviations per bucket (AR(1) wander)
    seasonal: float = 0.0  # amplitude of the daily (hour buckets) / weekly (day) cycle
    changes: tuple[Change, ...] = ()
    alias: str = "acme/fast"
    served: str = "acme/fast-2026-05-01"
    loss: tuple[tuple[int, int, float], ...] = ()
    cohort_gap: float = 0.1
    dimension_id: str = "correctness"
    run_mode: str = "production"
    scored: bool = False  # record a score (3 + 2 * passed) instead of passed


@dataclass(frozen=True)
class CellRow:
    surface_id: str
    dimension_id: str
    bucket_start: dt.datetime
    lens_version: str
    light_source_id: str
    light_source_requested: str
    substrate: dict[str, str]
    run_mode: str
    provenance: str
    cohort: tuple[str, ...]
    offered: int
    passes: int
    dropped: int  # failed events lost before delivery
    scored: bool = False

    @property
    def delivered(self) -> int:
        return self.offered - self.dropped


@dataclass
class _Group:
    n: int
    versions: dict[str, int] = field(default_factory=dict)
    shift: float = 0.0


def _progress(change: Change, t: int) -> float:
    if t < change.at:
        return 0.0
    if t >= change.at + change.rollout:
        return 1.0
    return (t - change.at + 1) / (change.rollout + 1)


def generate(spec: SurfaceSpec, seed: int) -> list[CellRow]:
    """Cells of one surface; the same (spec, seed) always gives the same cells."""
    rng = np.random.default_rng(_seed(spec.surface_id, seed))
    width = _WIDTH[spec.bucket]
    lo, hi = spec.events
    cells: list[CellRow] = []
    period = 24 if spec.bucket == "hour" else 7
    noise = 0.0
    for t in range(spec.buckets):
        if spec.tau > 0:
            fresh = spec.tau * rng.standard_normal()
            noise = fresh if t == 0 else spec.rho * noise + np.sqrt(1 - spec.rho**2) * fresh
        season = spec.seasonal * float(np.sin(2 * np.pi * (t % period) / period))
        groups = [_Group(int(rng.integers(lo, hi + 1)), {k: 0 for k in LAYER_KINDS[:3]})]
        enterprise = 0.5
        for change in spec.changes:
            q = _progress(change, t)
            if "cohort-mix" in change.layers:
                enterprise += q * change.delta / (2 * spec.cohort_gap)
                continue
            groups = [g for grp in groups for g in _split(grp, change, q, rng)]
        loss = max((f for a, b, f in spec.loss if a <= t < b), default=0.0)
        for g in groups:
            share = min(max(enterprise, 0.0), 1.0)
            n_ent = int(rng.binomial(g.n, share))
            for tier, n, offset in (
                ("enterprise", n_ent, spec.cohort_gap),
                ("free", g.n - n_ent, -spec.cohort_gap),
            ):
                if n <= 0:
                    continue
                p = min(max(spec.base + offset + g.shift + noise + season, 0.0), 1.0)
                passes = int(rng.binomial(n, p))
                dropped = int(rng.binomial(n - passes, loss)) if loss > 0 else 0
                cells.append(_cell(spec, spec.start + t * width, g, tier, n, passes, dropped))
    return cells


def _split(group: _Group, change: Change, q: float, rng: np.random.Generator) -> list[_Group]:
    """Events carrying the change's new layer values get its shift."""
    if q <= 0.0:
        return [group]
    n_new = group.n if q >= 1.0 else int(rng.binomial(group.n, q))
    new = _Group(n_new, dict(group.versions), group.shift + change.delta)
    for kind in change.layers:
        if kind in new.versions:
            new.versions[kind] += 1
    old = _Group(group.n - n_new, dict(group.versions), group.shift)
    return [g for g in (new, old) if g.n > 0]


def _cell(
    spec: SurfaceSpec, bucket: dt.datetime, g: _Group, tier: str, n: int, passes: int, dropped: int
) -> CellRow:
    served = (
        spec.served
        if g.versions["light source"] == 0
        else f"{spec.served}-r{g.versions['light source']}"
    )
    return CellRow(
        surface_id=spec.surface_id,
        dimension_id=spec.dimension_id,
        bucket_start=bucket,
        lens_version=f"lv_{g.versions['lens']}",
        light_source_id=served,
        light_source_requested=spec.alias,
        substrate={"prompt_hash": f"ph_{g.versions['substrate']}", "region": "eu"},
        run_mode=spec.run_mode,
        provenance="production-state" if spec.run_mode == "production" else "exploratory-state",
        cohort=(f"tier={tier}",),
        offered=n,
        passes=passes,
        dropped=dropped,
        scored=spec.scored,
    )


def _seed(surface_id: str, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}:{surface_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


STAGING_DATABASE = "testkit_scenarios"
STAGING = f"{STAGING_DATABASE}.cells"
_STAGING_COLUMNS = [
    "cell_id", "surface_id", "dimension_id", "bucket_start", "width_ms", "lens_version",
    "light_source_id", "light_source_requested", "substrate", "run_mode", "provenance",
    "cohort_tags", "offered", "passes", "dropped", "emission_stream", "seq_offset", "scored",
]  # fmt: skip


def write_cells(
    store: Store,
    cells: list[CellRow],
    ingested_at: dt.datetime,
    tenant_id: str = DEFAULT_TENANT,
) -> int:
    """Expand cells into event, dimension and receipt rows of `tenant_id` inside
    ClickHouse; returns the number of delivered events. Dropped events leave gaps in
    their stream's ordinals."""
    store.command(f"CREATE DATABASE IF NOT EXISTS {STAGING_DATABASE}")
    store.command(
        f"""CREATE TABLE IF NOT EXISTS {STAGING} (
            cell_id String, surface_id String, dimension_id String,
            bucket_start DateTime64(3, 'UTC'), width_ms UInt64, lens_version String,
            light_source_id String, light_source_requested String,
            substrate Map(String, String), run_mode String, provenance String,
            cohort_tags Array(String), offered UInt32, passes UInt32, dropped UInt32,
            emission_stream String, seq_offset UInt64, scored Bool
        ) ENGINE = MergeTree ORDER BY cell_id"""
    )
    store.command(f"TRUNCATE TABLE {STAGING}")
    offsets: dict[str, int] = {}
    width = int((_WIDTH["hour"] if _guess_hourly(cells) else _WIDTH["day"]).total_seconds() * 1000)
    rows = []
    for i, c in enumerate(sorted(cells, key=lambda c: (c.surface_id, c.bucket_start))):
        stream = f"{c.surface_id}/{c.bucket_start:%Y-%m-%d}"
        offset = offsets.get(stream, 0)
        offsets[stream] = offset + c.offered
        rows.append(
            [
                f"{c.surface_id}-{i}", c.surface_id, c.dimension_id, c.bucket_start, width,
                c.lens_version, c.light_source_id, c.light_source_requested, c.substrate,
                c.run_mode, c.provenance, list(c.cohort), c.offered, c.passes, c.dropped,
                stream, offset, c.scored,
            ]
        )  # fmt: skip
    store.insert(STAGING, rows, _STAGING_COLUMNS)
    params = {"ingested_at": ingested_at, "tenant": tenant_id}
    store.command(_EXPAND_DIMENSIONS.format(staging=STAGING), params)
    store.command(_EXPAND_EVENTS.format(staging=STAGING), params)
    store.command(_EXPAND_RECEIPTS.format(staging=STAGING), params)
    store.command(f"DROP TABLE {STAGING}")
    return sum(c.delivered for c in cells)


def _guess_hourly(cells: list[CellRow]) -> bool:
    starts = sorted({c.bucket_start for c in cells})
    return len(starts) < 2 or starts[1] - starts[0] < _WIDTH["day"]


# Within a cell, event j is a pass when j < passes; dropped events are failures
# j in [passes, passes + dropped). Its time (and ordinal) follow a fixed permutation of j
# so passes and failures interleave over the bucket.
_EVENTS = """
    SELECT *, j, concat(cell_id, '-', toString(j)) AS event_id,
           (j * 7919 + 13) % offered AS slot,
           bucket_start + toIntervalMillisecond(intDiv(slot * width_ms, offered)) AS ts
    FROM {staging} ARRAY JOIN range(offered) AS j
    WHERE NOT (j >= passes AND j < passes + dropped)
"""
_DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.column_list(
    "tenant_id",
    "event_id",
    "dimension_id",
    "passed",
    "score",
    "surface_id",
    "agent_id",
    "correlation_id",
    "run_mode",
    "provenance",
    "timestamp",
    "lens_version",
    "light_source_id",
    "light_source_requested",
    "substrate",
    "cohort_tags",
    "emission_stream",
    "ingested_at",
)
_EVENT_COLUMNS = EVALUATION_EVENTS.column_list(
    "tenant_id",
    "event_id",
    "surface_id",
    "agent_id",
    "correlation_id",
    "run_mode",
    "provenance",
    "timestamp",
    "lens_version",
    "light_source_id",
    "light_source_requested",
    "substrate",
    "cohort_tags",
    "sdk_name",
    "sdk_version",
    "dimension_ids",
    "emission_stream",
    "emission_seq",
    "emission_final",
    "resource_attributes",
    "extras",
    "ingested_at",
)
_RECEIPT_COLUMNS = EMISSION_RECEIPTS.column_list(
    "tenant_id",
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
)
_EXPAND_DIMENSIONS = (
    f"INSERT INTO {EVALUATION_DIMENSIONS.qualified}\n    ({_DIMENSION_COLUMNS})\n"
    + """    SELECT {{tenant:String}}, event_id, dimension_id, if(scored, NULL, j < passes),
           if(scored, 3.0 + 2.0 * (j < passes), NULL), surface_id, 'scenario-agent', event_id,
           run_mode, provenance, ts, lens_version, light_source_id, light_source_requested,
           substrate, cohort_tags, emission_stream, {{ingested_at:DateTime64(3, 'UTC')}}
    FROM ("""
    + _EVENTS
    + ")"
)
_EXPAND_EVENTS = (
    f"INSERT INTO {EVALUATION_EVENTS.qualified}\n    ({_EVENT_COLUMNS})\n"
    + """    SELECT {{tenant:String}}, event_id, surface_id, 'scenario-agent', event_id, run_mode,
           provenance, ts, lens_version, light_source_id, light_source_requested, substrate,
           cohort_tags,
           'scenario', '1', [dimension_id], emission_stream, seq_offset + slot, false,
           '{{}}', '{{}}', {{ingested_at:DateTime64(3, 'UTC')}}
    FROM ("""
    + _EVENTS
    + ")"
)
_EXPAND_RECEIPTS = (
    f"INSERT INTO {EMISSION_RECEIPTS.qualified}\n    ({_RECEIPT_COLUMNS})\n"
    + """    SELECT {{tenant:String}}, emission_stream, seq_offset + slot, concat('r-', event_id),
           'evaluation', false, false, event_id, surface_id, ts,
           {{ingested_at:DateTime64(3, 'UTC')}}
    FROM ("""
    + _EVENTS
    + ")"
)


@dataclass(frozen=True)
class ScenarioEvent:
    """One delivered event of a cell, as an SDK would emit it (for the receiver path)."""

    event_id: str
    stream: str
    seq: int
    timestamp: dt.datetime
    passed: bool
    attributes: dict[str, object]
    score: float | None = None  # set (and `passed` not to be sent) for scored scenarios


def events_from_cells(cells: list[CellRow]) -> list[ScenarioEvent]:
    """The same events `write_cells` stores (same ids, times, ordinals and outcomes), with
    the OTLP attributes of the wire contract, ordered by stream and ordinal."""
    width = _WIDTH["hour"] if _guess_hourly(cells) else _WIDTH["day"]
    offsets: dict[str, int] = {}
    out = []
    for i, c in enumerate(sorted(cells, key=lambda c: (c.surface_id, c.bucket_start))):
        stream = f"{c.surface_id}/{c.bucket_start:%Y-%m-%d}"
        offset = offsets.get(stream, 0)
        offsets[stream] = offset + c.offered
        attributes: dict[str, object] = {
            "holonograph.surface.id": c.surface_id,
            "holonograph.run_mode": c.run_mode,
            "holonograph.provenance": c.provenance,
            "holonograph.agent.id": "scenario-agent",
            "holonograph.lens.version": c.lens_version,
            "holonograph.light_source.id": c.light_source_id,
            "holonograph.light_source.requested": c.light_source_requested,
            "holonograph.cohort_tags": list(c.cohort),
            **{f"holonograph.substrate.{k}": v for k, v in c.substrate.items()},
        }
        for j in range(c.offered):
            if c.passes <= j < c.passes + c.dropped:
                continue
            slot = (j * 7919 + 13) % c.offered
            event_id = f"{c.surface_id}-{i}-{j}"
            out.append(
                ScenarioEvent(
                    event_id=event_id,
                    stream=stream,
                    seq=offset + slot,
                    timestamp=c.bucket_start + width * slot / c.offered,
                    passed=j < c.passes,
                    attributes=attributes | {"holonograph.correlation.id": event_id},
                    score=(3.0 + 2.0 * (j < c.passes)) if c.scored else None,
                )
            )
    return sorted(out, key=lambda e: (e.stream, e.seq))
