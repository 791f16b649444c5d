-- Event layout by placement (docs/decisions/0014-event-layout-placement.md, issue 30
-- item 1): the event and dimension tables sorted by (tenant, surface, hour, identity),
-- so a surface-and-window read touches that surface's hours whatever the event ids
-- look like, while every version of one event keeps one key (`schemas.placement`).
--
-- An event's placement is its surface and the hour of its timestamp at first receipt,
-- recorded with its owner's claim (`event_owners`, whose first claim with a placement
-- stands) and reused by every re-send. A row whose surface or hour is not its
-- placement's is a move, listed in `event_moves` by the views below, so the readers'
-- pruning predicate stays exactly a superset of today's filters.
--
-- Safe to run again after a crash at any point: every object is created IF NOT
-- EXISTS; placements are filled only for ids without one; the runner's RELAYOUT step
-- (schemas/migrations.py) copies a table into its new layout only while it lacks the
-- placement columns (an interrupted copy is truncated and redone), swaps the two with
-- EXCHANGE TABLES, then drops the old rows; moves are listed again from the relaid
-- tables (the list collapses repeats). Dropping and re-creating `event_owners_mv` in
-- one run leaves no gap a writer could fall into: the migrating process is the only
-- writer while it runs (an embedded store's owner migrates before it accepts a
-- request; on a server, the sinks of the older release are stopped first, Kafka holds
-- their records; see the decision record).

ALTER TABLE holonograph.event_owners
    ADD COLUMN IF NOT EXISTS placed_surface_id LowCardinality(String) DEFAULT '',
    ADD COLUMN IF NOT EXISTS placed_hour DateTime('UTC') DEFAULT 0;

-- Every stored event's placement: its earliest stored version's surface and hour. A
-- claim like any other (a later claim never changes the owner).
INSERT INTO holonograph.event_owners
    (tenant_id, event_id, agent_id, first_received_at, first_ingest_version,
     placed_surface_id, placed_hour)
SELECT
    tenant_id,
    event_id,
    argMin(agent_id, ingest_version),
    min(ingested_at),
    min(ingest_version),
    argMin(surface_id, ingest_version),
    toStartOfHour(argMin(timestamp, ingest_version))
FROM holonograph.evaluation_events
WHERE (tenant_id, event_id) NOT IN
    (SELECT tenant_id, event_id FROM holonograph.event_owners WHERE placed_surface_id != '')
GROUP BY tenant_id, event_id;

-- Claims now carry the row's placement; re-created after the tables are relaid.
DROP VIEW IF EXISTS holonograph.event_owners_mv;

CREATE TABLE IF NOT EXISTS holonograph.event_moves
(
    tenant_id              LowCardinality(String),
    surface_id             LowCardinality(String),
    hour                   DateTime('UTC'),
    placed_surface_id      LowCardinality(String),
    placed_hour            DateTime('UTC'),
    event_id               String
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, surface_id, hour, placed_surface_id, placed_hour, event_id);

CREATE TABLE IF NOT EXISTS holonograph.evaluation_events__v16
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    event_id               String,
    surface_id             LowCardinality(String),
    agent_id               String,
    correlation_id         String,
    run_mode               LowCardinality(String),
    provenance             LowCardinality(String),
    timestamp              DateTime64(9, 'UTC'),
    lens_version           LowCardinality(String),
    light_source_id        LowCardinality(String),
    light_source_requested LowCardinality(String),
    substrate              Map(String, String),
    cohort_tags            Array(String),
    multiplex_role         LowCardinality(String),
    fixture_id             String,
    markers                Map(String, Array(String)),
    latency_ms             Nullable(Float64),
    cost_usd               Nullable(Float64),
    tokens_input           Nullable(Int64),
    tokens_output          Nullable(Int64),
    sdk_name               String,
    sdk_version            String,
    dimension_ids          Array(String),
    emission_stream        String,
    emission_seq           UInt64,
    emission_final         Bool,
    trace_id               String,
    span_id                String,
    resource_attributes    String,
    extras                 String,
    ingested_at            DateTime64(3, 'UTC'),
    ingest_version         UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(ingested_at)),
    contract_version_id    String DEFAULT '',
    contract_findings      Array(String) DEFAULT [],
    placed_surface_id      LowCardinality(String) DEFAULT surface_id,
    placed_hour            DateTime('UTC') DEFAULT toStartOfHour(timestamp),
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
    INDEX surface_bloom surface_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(ingest_version)
ORDER BY (tenant_id, placed_surface_id, placed_hour, event_id);

RELAYOUT holonograph.evaluation_events FROM holonograph.evaluation_events__v16 PLACED BY holonograph.event_owners;

CREATE TABLE IF NOT EXISTS holonograph.evaluation_dimensions__v16
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    event_id               String,
    dimension_id           LowCardinality(String),
    passed                 Nullable(Bool),
    score                  Nullable(Float64),
    expected               String,
    actual                 String,
    judge                  String,
    surface_id             LowCardinality(String),
    agent_id               String,
    correlation_id         String,
    run_mode               LowCardinality(String),
    provenance             LowCardinality(String),
    timestamp              DateTime64(9, 'UTC'),
    lens_version           LowCardinality(String),
    light_source_id        LowCardinality(String),
    light_source_requested LowCardinality(String),
    substrate              Map(String, String),
    cohort_tags            Array(String),
    emission_stream        String,
    ingested_at            DateTime64(3, 'UTC'),
    ingest_version         UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(ingested_at)),
    placed_surface_id      LowCardinality(String) DEFAULT surface_id,
    placed_hour            DateTime('UTC') DEFAULT toStartOfHour(timestamp),
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
    INDEX surface_bloom surface_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX dimension_set dimension_id TYPE set(256) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(ingest_version)
ORDER BY (tenant_id, placed_surface_id, placed_hour, event_id, dimension_id);

RELAYOUT holonograph.evaluation_dimensions FROM holonograph.evaluation_dimensions__v16 PLACED BY holonograph.event_owners;

CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_owners_mv
TO holonograph.event_owners
AS SELECT
    tenant_id,
    event_id,
    agent_id,
    ingested_at AS first_received_at,
    ingest_version AS first_ingest_version,
    placed_surface_id,
    placed_hour
FROM holonograph.evaluation_events;

CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_moves_from_events
TO holonograph.event_moves
AS SELECT tenant_id, surface_id, toStartOfHour(timestamp) AS hour, placed_surface_id,
    placed_hour, event_id
FROM holonograph.evaluation_events
WHERE surface_id != placed_surface_id OR toStartOfHour(timestamp) != placed_hour;

CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_moves_from_dimensions
TO holonograph.event_moves
AS SELECT tenant_id, surface_id, toStartOfHour(timestamp) AS hour, placed_surface_id,
    placed_hour, event_id
FROM holonograph.evaluation_dimensions
WHERE surface_id != placed_surface_id OR toStartOfHour(timestamp) != placed_hour;

-- The moves among the rows relaid (written before the views existed).
BACKFILL holonograph.event_moves_from_events;
BACKFILL holonograph.event_moves_from_dimensions;

-- Ids written while the view was away (none from this release: see above) get a claim.
INSERT INTO holonograph.event_owners
    (tenant_id, event_id, agent_id, first_received_at, first_ingest_version,
     placed_surface_id, placed_hour)
SELECT
    tenant_id,
    event_id,
    argMin(agent_id, ingest_version),
    min(ingested_at),
    min(ingest_version),
    any(placed_surface_id),
    any(placed_hour)
FROM holonograph.evaluation_events
WHERE (tenant_id, event_id) NOT IN
    (SELECT tenant_id, event_id FROM holonograph.event_owners WHERE placed_surface_id != '')
GROUP BY tenant_id, event_id;
