"""The delivery-completeness read: what `holonograph completeness --json` prints and
what `processors.completeness.job` returns. Field names mirror the Guide's
CompletenessWindow (camelCase: `completenessLowerBound`, `biasFlag`, ...)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from schemas.retention import RetentionReach

# all-quarantined: closed with nothing missing, but every evaluation on it was rejected.
StreamState = Literal["open", "closed-complete", "closed-lossy", "dead", "all-quarantined"]
Bucket = Literal["minute", "hour", "day"]
Scope = Literal["stream", "surface"]

STREAM_STATES: tuple[StreamState, ...] = (
    "open", "closed-complete", "closed-lossy", "dead", "all-quarantined",
)  # fmt: skip
BUCKETS: tuple[Bucket, ...] = ("minute", "hour", "day")


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class GapRange(_Model):
    """Seqs `seq_from..seq_to` (inclusive) never arrived; JSON `{"from": a, "to": b}`."""

    seq_from: int = Field(alias="from", ge=0)
    seq_to: int = Field(alias="to", ge=0)

    @property
    def size(self) -> int:
        return self.seq_to - self.seq_from + 1


class LossComparison(_Model):
    """Client-reported counters (summed over the distinct windows its sentinels
    reported) beside what the collector observed missing. `lost_after_client` is
    observed missing minus reported drops; negative means the client reported more
    drops than there are gaps, which `mismatch` flags as a finding of its own."""

    reported_windows: int
    reported_offered: int
    reported_delivered: int
    reported_dropped: int
    reported_failed: int
    observed_missing: int
    lost_after_client: int
    mismatch: bool


class StreamAccounting(_Model):
    """One emission stream per the wire contract section 3: expected `[0, last_seq]`.
    A stream belongs to a tenant: (tenant, stream) is its identity."""

    tenant_id: str
    stream: str
    status: StreamState
    first_seq: int
    last_seq: int
    final_seq: int | None
    expected: int
    delivered: int
    missing: int
    duplicates: int
    quarantined: int
    sentinels: int
    missing_ranges: list[GapRange]
    final_seen: bool
    first_seen_at: dt.datetime
    last_seen_at: dt.datetime
    first_event_time: dt.datetime
    last_event_time: dt.datetime
    sentinel_interval_ms: int
    interval_reported: bool
    dead_after_ms: int
    surfaces: list[str]
    loss: LossComparison
    status_as_of: dt.datetime


class CompletenessWindow(_Model):
    """One stream or surface in one UTC bucket. Surface rows count that surface's
    delivered records against the gaps of every stream that carried the surface, so
    `completeness_lower_bound` is a floor and `bias_flag` is conservative."""

    tenant_id: str
    bucket: Bucket
    scope: Scope
    surface_id: str
    stream: str
    bucket_start: dt.datetime
    offered: int
    delivered: int
    missing: int
    quarantined: int
    duplicates: int
    completeness_lower_bound: float
    bias_flag: bool
    streams: int
    lossy_streams: int


Unknown = Literal["unknown: no emission ordinals"]
UNKNOWN_WITHOUT_ORDINALS: Unknown = "unknown: no emission ordinals"


class SurfaceWithoutOrdinals(_Model):
    """A surface some of whose events arrived without emission ordinals (OpenTelemetry
    GenAI evaluations): how many of its events could not be counted by any stream, so
    its completeness is unknown, whatever its streams say."""

    tenant_id: str
    surface_id: str
    status: Unknown = UNKNOWN_WITHOUT_ORDINALS
    events: int
    without_ordinals: int
    share_without_ordinals: float


class WindowsFreshness(_Model):
    """Whether the stored completeness windows (`completeness_windows`, rewritten by the
    completeness refresh) have seen every event an analysis read: `stale` when an event
    of the range arrived after the last refresh began (or there never was one), and
    `behind_seconds` how long after it the newest one arrived. A backfill of last week
    arrives now: its loss is in the windows only after the next refresh."""

    refreshed_at: dt.datetime | None  # when the last refresh began (None: never)
    newest_arrival: dt.datetime | None  # newest ingest time of the range's events
    stale: bool
    behind_seconds: float | None = None


class CompletenessTotals(_Model):
    streams: int
    by_status: dict[str, int]
    expected: int
    delivered: int
    missing: int
    missing_in_range: int | None
    duplicates: int
    biased_windows: int  # stream and surface windows flagged
    biased_surface_windows: int = 0  # of them, surface windows: `completeness`'s count


class CompletenessReport(_Model):
    """The whole answer for one selection: streams (lossy and dead first) and windows.
    With a time range, `missing_in_range` gives each stream's gaps counted in the
    selected buckets (stream totals cover the stream's whole life). `tenant` is the
    tenant read (None: every tenant in the store)."""

    tenant: str | None = None
    as_of: dt.datetime
    since: dt.datetime | None
    until: dt.datetime | None
    bucket: Bucket
    totals: CompletenessTotals
    streams: list[StreamAccounting]
    windows: list[CompletenessWindow]
    missing_in_range: dict[str, int] | None = None
    # When `stream_status`/`completeness_windows` were last refreshed (None: never),
    # and whether that is older than two refresh periods of `serve`/`sink`.
    tables_refreshed_at: dt.datetime | None = None
    tables_stale: bool = False
    # Surfaces whose completeness is unknown: events without emission ordinals.
    surfaces_without_ordinals: list[SurfaceWithoutOrdinals] = []
    # The tenant's retention beside the window (None: its rows are kept forever).
    retention: RetentionReach | None = None


class RefreshSummary(_Model):
    """What one refresh of `stream_status`/`completeness_windows` did: `streams`
    recomputed from their records, `marked_dead` silent open streams turned dead
    without new records, `dead` dead streams in the table afterwards."""

    mode: Literal["full", "incremental"]
    now: dt.datetime
    since: dt.datetime | None
    version: int
    streams: int
    marked_dead: int
    dead: int
    duration_ms: float
    step_ms: dict[str, float] = {}
    # a full recompute's chunks, and those an interrupted run had done (skipped)
    chunks: int = 0
    resumed_chunks: int = 0
