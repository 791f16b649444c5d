"""A seeded store in the layout before migration 0016, for the layout tests: events on
several surfaces over days, with time-ordered (ULID-like) or random ids, and re-sends
that move an event to another hour, another surface, or drop a dimension. Generated
inside ClickHouse (`INSERT ... SELECT FROM numbers()`); everything is a function of
the event's number and the seed."""

from __future__ import annotations

import datetime as dt

from schemas.migrations import apply_migrations, load_migrations
from schemas.store import Store
from testkit.layout import Unplaced, strip_placement

__all__ = ["BEFORE_LAYOUT", "START", "Unplaced", "seed_old_store", "strip_placement"]

# A store of the release before the layout: every migration but 0016.
BEFORE_LAYOUT = [m for m in load_migrations() if m.version != 16]
START = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
INGESTED = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
STAGING = "testkit_layout.versions"

# An id by the event's number `n` and first time `base_ts`: time-ordered (a ULID's 48-bit
# millisecond prefix, then randomness) or random (a seeded hash: a UUIDv4's order).
IDS = {
    "ulid": "concat(leftPad(hex(toUnixTimestamp64Milli(base_ts)), 12, '0'),"
    " hex(cityHash64(n, {seed:UInt64})))",
    "random": "lower(hex(cityHash64(n, {seed:UInt64})))",
}

# One row per stored version: the first receipt of every event, and re-sends of some.
# `kind` 1: an hour and a day later (another hour, another day); 2: on another
# surface; 3: 90 minutes earlier with only its first dimension (the other keeps its
# last grade, at the first version's time).
_VERSIONS = """
INSERT INTO testkit_layout.versions
SELECT n, version, kind, id, surface, ts, version_at,
       (cityHash64(n, version, 1) % 100) < if(surface = 's0' AND ts >= {change:DateTime64(3, 'UTC')}, 55, 80) AS passed,
       (cityHash64(n, version, 2) % 1000) / 100.0 AS score
FROM (
    SELECT n, id, v.1 AS version, v.2 AS kind,
           multiIf(kind = 2, concat('s', toString((n + 1) % {surfaces:UInt32})), base_surface) AS surface,
           multiIf(kind = 1, base_ts + toIntervalMinute(60 * 25 + 30),
                   kind = 3, base_ts - toIntervalMinute(90), base_ts) AS ts,
           {ingested:DateTime64(3, 'UTC')} + toIntervalSecond(version) AS version_at
    FROM (
        SELECT number AS n,
               concat('s', toString(n % {surfaces:UInt32})) AS base_surface,
               toDateTime64({start:DateTime64(3, 'UTC')}, 9, 'UTC')
                 + toIntervalMillisecond(intDiv(n * {span_ms:UInt64}, {events:UInt64})) AS base_ts,
               {id} AS id,
               arrayConcat([(0, 0)],
                   if(n % 50 = 0, [(1, 1)], []),
                   if(n % 77 = 1, [(2, 2)], []),
                   if(n % 91 = 2, [(3, 3)], [])) AS versions
        FROM numbers({events:UInt64})
    ) ARRAY JOIN versions AS v
)
"""  # noqa: E501

_EVENTS = """
INSERT INTO holonograph.evaluation_events
    (tenant_id, event_id, surface_id, agent_id, correlation_id, run_mode, provenance, timestamp,
     lens_version, light_source_id, light_source_requested, substrate, cohort_tags, sdk_name,
     sdk_version, dimension_ids, emission_stream, emission_seq, emission_final,
     resource_attributes, extras, ingested_at, ingest_version, latency_ms, cost_usd)
SELECT 'default', id, surface, 'agent-1', '', 'production', 'production-state', ts,
       'lens-1', if(n % 2 = 0, 'model-a', 'model-b'), '', map('prompt_hash', 'p1'),
       [if(n % 3 = 0, 'tier=free', 'tier=enterprise')], 'sdk', '1',
       if(kind = 3, ['correctness'], ['correctness', 'quality']),
       concat('stream-', toString(n % 7)), intDiv(n, 7), false, '{}', '{}', version_at,
       toUInt64(toUnixTimestamp64Nano(version_at)), toFloat64(n % 97), 0.001
FROM testkit_layout.versions WHERE version = {version:UInt8}
"""

_DIMENSIONS = """
INSERT INTO holonograph.evaluation_dimensions
    (tenant_id, event_id, dimension_id, passed, score, surface_id, agent_id, correlation_id,
     run_mode, provenance, timestamp, lens_version, light_source_id, light_source_requested,
     substrate, cohort_tags, emission_stream, ingested_at, ingest_version)
SELECT 'default', id, dim, if(dim = 'correctness', passed, NULL),
       if(dim = 'quality', score, NULL), surface, 'agent-1', '', 'production',
       'production-state', ts, 'lens-1', if(n % 2 = 0, 'model-a', 'model-b'), '',
       map('prompt_hash', 'p1'), [if(n % 3 = 0, 'tier=free', 'tier=enterprise')],
       concat('stream-', toString(n % 7)), version_at, toUInt64(toUnixTimestamp64Nano(version_at))
FROM testkit_layout.versions
ARRAY JOIN if(kind = 3, ['correctness'], ['correctness', 'quality']) AS dim
WHERE version = {version:UInt8}
"""

_RECEIPTS = """
INSERT INTO holonograph.emission_receipts
    (tenant_id, emission_stream, emission_seq, receipt_id, kind, final, quarantined, event_id,
     surface_id, event_time, received_at)
SELECT 'default', concat('stream-', toString(n % 7)), intDiv(n, 7),
       concat('r-', toString(n), '-', toString(version)), 'evaluation', false, false, id,
       surface, ts, version_at
FROM testkit_layout.versions WHERE version = {version:UInt8}
"""


def seed_old_store(
    store: Store, ids: str, *, events: int = 6000, days: int = 12, surfaces: int = 3, seed: int = 7
) -> None:
    """Reset `store` to the layout before 0016 and fill it (see the module doc)."""
    store.command("DROP DATABASE IF EXISTS holonograph SYNC")
    apply_migrations(store, BEFORE_LAYOUT)
    store.command("CREATE DATABASE IF NOT EXISTS testkit_layout")
    store.command("DROP TABLE IF EXISTS testkit_layout.versions SYNC")
    store.command(
        "CREATE TABLE testkit_layout.versions (n UInt64, version UInt8, kind UInt8, id String,"
        " surface String, ts DateTime64(9, 'UTC'), version_at DateTime64(3, 'UTC'),"
        " passed Bool, score Float64) ENGINE = MergeTree ORDER BY (n, version)"
    )
    params = {
        "seed": seed,
        "surfaces": surfaces,
        "events": events,
        "span_ms": days * 86_400_000,
        "start": START.replace(tzinfo=None),
        "change": (START + dt.timedelta(days=days * 2 // 3)).replace(tzinfo=None),
        "ingested": INGESTED.replace(tzinfo=None),
    }
    store.command(_VERSIONS.replace("{id}", IDS[ids]), params)
    for version in range(4):  # each re-send later, in an insert of its own
        for statement in (_EVENTS, _DIMENSIONS, _RECEIPTS):
            store.command(statement, {"version": version})
    store.command("DROP DATABASE testkit_layout SYNC")
