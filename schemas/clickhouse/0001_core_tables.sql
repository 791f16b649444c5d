-- Core ingest tables. Append-only: never edit a merged migration, add a new one.
-- Every event table is a ReplacingMergeTree whose sorting key contains the
-- idempotency key, so a retried or replayed insert collapses to one row.
-- Read with FINAL (or argMax by ingested_at) to count each event once.

CREATE DATABASE IF NOT EXISTS holonograph;

CREATE TABLE IF NOT EXISTS holonograph.evaluation_events
(
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
    ingested_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (surface_id, toStartOfHour(timestamp), event_id);

CREATE TABLE IF NOT EXISTS holonograph.evaluation_dimensions
(
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
    ingested_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (surface_id, dimension_id, toStartOfHour(timestamp), event_id);

-- One row per receipt of a (stream, seq): receipt_id is assigned when the
-- receiver accepts a request, so a pipeline replay of the same receipt
-- collapses, while a client retry (a new receipt) stays countable as a duplicate.
CREATE TABLE IF NOT EXISTS holonograph.emission_receipts
(
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
ORDER BY (emission_stream, emission_seq, receipt_id);

-- One row per (stream, seq) with how many distinct receipts delivered it.
CREATE VIEW IF NOT EXISTS holonograph.emission_records AS
SELECT
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
GROUP BY emission_stream, emission_seq;

CREATE TABLE IF NOT EXISTS holonograph.quarantine
(
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
ORDER BY quarantine_id;
