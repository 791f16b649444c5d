-- Delivery completeness, derived from emission_records by processors/completeness.py.
-- Both tables are ReplacingMergeTree keyed by what they describe and versioned by
-- the refresh that wrote the row, so a refresh simply inserts new rows; read with FINAL.
-- Columns are documented in docs/completeness.md.

-- One row per emission stream: its accounting (contract section 3) and status.
CREATE TABLE IF NOT EXISTS holonograph.stream_status
(
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
ORDER BY emission_stream;

-- Completeness per time bucket, for one stream (scope 'stream') or one surface
-- (scope 'surface'); a gap counts in the bucket of the first record received after it.
CREATE TABLE IF NOT EXISTS holonograph.completeness_windows
(
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
PARTITION BY (bucket, toYYYYMM(bucket_start))
ORDER BY (bucket, scope, surface_id, emission_stream, bucket_start);

-- One row per refresh run: what it covered and how long it took. The last row is
-- the watermark an incremental refresh starts from.
CREATE TABLE IF NOT EXISTS holonograph.completeness_refreshes
(
    version                UInt64,
    mode                   Enum8('full' = 1, 'incremental' = 2),
    now                    DateTime64(3, 'UTC'),
    since                  Nullable(DateTime64(3, 'UTC')),
    streams                UInt64,
    marked_dead            UInt64,
    duration_ms            Float64,
    computed_at            DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY version;
