-- Tenants apart in every table, and one event id = one event whatever its timestamp
-- (docs/decisions/0005-tenancy-and-event-identity.md). Existing rows become tenant
-- 'default'.
--
-- ClickHouse cannot change a sorting key's prefix in place, so each core table is
-- rebuilt: its new layout is created as `<table>__v5`, and the runner's REBUILD step
-- (schemas/migrations.py; not ClickHouse SQL) copies the old rows into it, swaps the
-- two with EXCHANGE TABLES and drops the old one. Every statement here is safe to run
-- again after a crash at any point: a table is rebuilt only while it lacks the column
-- named after ADDING, and an interrupted copy is truncated and redone.
--
-- Event tables have no time partitioning: a partition must be a function of the
-- identity for ReplacingMergeTree to collapse a re-send with another timestamp, and a
-- backfill over any number of months must fit one INSERT. Data-skipping indexes keep
-- time and surface filters pruning (event ids are time-ordered ULIDs, so granules are
-- narrow in time). `ingest_version` orders versions of one event: the receipt time in
-- nanoseconds plus the request's place in its group commit, so the latest received
-- version wins, deterministically, even within one commit.

CREATE TABLE IF NOT EXISTS holonograph.evaluation_events__v5
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
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
    INDEX surface_bloom surface_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(ingest_version)
ORDER BY (tenant_id, event_id);

REBUILD holonograph.evaluation_events FROM holonograph.evaluation_events__v5 ADDING tenant_id;

-- Per (tenant, event, dimension) the latest received grade: a re-send that drops a
-- dimension leaves that dimension's last grade in place.
CREATE TABLE IF NOT EXISTS holonograph.evaluation_dimensions__v5
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
    INDEX timestamp_minmax timestamp TYPE minmax GRANULARITY 1,
    INDEX surface_bloom surface_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX dimension_set dimension_id TYPE set(256) GRANULARITY 4
)
ENGINE = ReplacingMergeTree(ingest_version)
ORDER BY (tenant_id, event_id, dimension_id);

REBUILD holonograph.evaluation_dimensions FROM holonograph.evaluation_dimensions__v5 ADDING tenant_id;

CREATE TABLE IF NOT EXISTS holonograph.emission_receipts__v5
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    emission_stream        String,
    emission_seq           UInt64,
    receipt_id             String,
    kind                   Enum8('evaluation' = 1, 'sentinel' = 2),
    final                  Bool,
    quarantined            Bool,
    event_id               String,
    surface_id             LowCardinality(String),
    event_time             DateTime64(9, 'UTC'),
    received_at            DateTime64(3, 'UTC'),
    sentinel_interval_ms   Nullable(UInt64),
    completeness_offered   Nullable(Int64),
    completeness_delivered Nullable(Int64),
    completeness_dropped   Nullable(Int64),
    completeness_failed    Nullable(Int64),
    completeness_window_start Nullable(DateTime64(9, 'UTC')),
    completeness_window_end   Nullable(DateTime64(9, 'UTC'))
)
ENGINE = ReplacingMergeTree(received_at)
ORDER BY (tenant_id, emission_stream, emission_seq, receipt_id);

REBUILD holonograph.emission_receipts FROM holonograph.emission_receipts__v5 ADDING tenant_id;

-- A stream is (tenant, stream): another tenant's stream of the same name is another stream.
CREATE OR REPLACE VIEW holonograph.emission_records AS
SELECT
    tenant_id,
    emission_stream,
    emission_seq,
    any(kind)                         AS kind,
    max(final)                        AS final,
    min(quarantined)                  AS quarantined,
    any(event_id)                     AS event_id,
    any(surface_id)                   AS surface_id,
    min(event_time)                   AS event_time,
    min(received_at)                  AS first_received_at,
    max(received_at)                  AS last_received_at,
    count()                           AS received_count,
    max(sentinel_interval_ms)         AS sentinel_interval_ms,
    max(completeness_offered)         AS completeness_offered,
    max(completeness_delivered)       AS completeness_delivered,
    max(completeness_dropped)         AS completeness_dropped,
    max(completeness_failed)          AS completeness_failed,
    min(completeness_window_start)    AS completeness_window_start,
    max(completeness_window_end)      AS completeness_window_end
FROM holonograph.emission_receipts FINAL
GROUP BY tenant_id, emission_stream, emission_seq;

CREATE TABLE IF NOT EXISTS holonograph.quarantine__v5
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    quarantine_id          String,
    received_at            DateTime64(3, 'UTC'),
    reason                 String,
    span_name              String,
    trace_id               String,
    span_id                String,
    emission_stream        Nullable(String),
    emission_seq           Nullable(UInt64),
    attributes             String,
    resource_attributes    String,
    span_proto             String,
    source                 LowCardinality(String)
)
ENGINE = ReplacingMergeTree(received_at)
ORDER BY (tenant_id, quarantine_id);

REBUILD holonograph.quarantine FROM holonograph.quarantine__v5 ADDING tenant_id;

CREATE TABLE IF NOT EXISTS holonograph.stream_status__v5
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    emission_stream        String,
    status                 Enum8('open' = 1, 'closed-complete' = 2, 'closed-lossy' = 3, 'dead' = 4),
    first_seq              UInt64,
    last_seq               UInt64,
    final_seq              Nullable(UInt64),
    expected               UInt64,
    delivered              UInt64,
    missing                UInt64,
    duplicates             UInt64,
    quarantined            UInt64,
    sentinels              UInt64,
    missing_ranges         Array(Tuple(seq_from UInt64, seq_to UInt64)),
    final_seen             Bool,
    first_seen_at          DateTime64(3, 'UTC'),
    last_seen_at           DateTime64(3, 'UTC'),
    first_event_time       DateTime64(9, 'UTC'),
    last_event_time        DateTime64(9, 'UTC'),
    sentinel_interval_ms   UInt64,
    interval_reported      Bool,
    dead_after_ms          UInt64,
    surfaces               Array(String),
    reported_windows       UInt64,
    reported_offered       Int64,
    reported_delivered     Int64,
    reported_dropped       Int64,
    reported_failed        Int64,
    lost_after_client      Int64,
    loss_mismatch          Bool,
    status_as_of           DateTime64(3, 'UTC'),
    version                UInt64,
    computed_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (tenant_id, emission_stream);

REBUILD holonograph.stream_status FROM holonograph.stream_status__v5 ADDING tenant_id;

-- Not partitioned by month: a refresh after a 10-year backfill writes windows of every
-- month in one INSERT.
CREATE TABLE IF NOT EXISTS holonograph.completeness_windows__v5
(
    tenant_id                LowCardinality(String) DEFAULT 'default',
    bucket                   Enum8('minute' = 1, 'hour' = 2, 'day' = 3),
    scope                    Enum8('stream' = 1, 'surface' = 2),
    surface_id               String,
    emission_stream          String,
    bucket_start             DateTime('UTC'),
    offered                  UInt64,
    delivered                UInt64,
    missing                  UInt64,
    quarantined              UInt64,
    duplicates               UInt64,
    completeness_lower_bound Float64,
    bias_flag                Bool,
    streams                  UInt64,
    lossy_streams            UInt64,
    delivered_by_surface     Map(String, UInt64),
    quarantined_by_surface   Map(String, UInt64),
    version                  UInt64,
    computed_at              DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (tenant_id, bucket, scope, surface_id, emission_stream, bucket_start);

REBUILD holonograph.completeness_windows FROM holonograph.completeness_windows__v5 ADDING tenant_id;

-- Analysis results keep their keys; their rows carry the tenant they were computed for.
ALTER TABLE holonograph.drift_change_points
    ADD COLUMN IF NOT EXISTS tenant_id LowCardinality(String) DEFAULT 'default';
ALTER TABLE holonograph.analysis_events
    ADD COLUMN IF NOT EXISTS tenant_id LowCardinality(String) DEFAULT 'default';
ALTER TABLE holonograph.variance_readings
    ADD COLUMN IF NOT EXISTS tenant_id LowCardinality(String) DEFAULT 'default';
ALTER TABLE holonograph.conformance_fixtures
    ADD COLUMN IF NOT EXISTS tenant_id LowCardinality(String) DEFAULT 'default';
ALTER TABLE holonograph.conformance_results
    ADD COLUMN IF NOT EXISTS tenant_id LowCardinality(String) DEFAULT 'default';
