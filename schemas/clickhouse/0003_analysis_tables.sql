-- Results of the drift and variance analyses, kept so dashboards can show history.

-- One row per change point or bracketed window of a drift run, with the run's
-- parameters repeated on every row (a run is read back with WHERE run_id = ...).
-- The full JSON report of each run is also an analysis event (kind 'drift-run'),
-- so a run that found nothing is still on record.
CREATE TABLE IF NOT EXISTS holonograph.drift_change_points
(
    run_id                 String,
    run_at                 DateTime64(3, 'UTC'),
    surface_id             LowCardinality(String),
    dimension_id           LowCardinality(String),
    kind                   Enum8('change_point' = 1, 'bracketed_window' = 2),
    change_time            Nullable(DateTime64(3, 'UTC')),
    window_from            DateTime64(3, 'UTC'),
    window_to              DateTime64(3, 'UTC'),
    source                 LowCardinality(String),
    reason                 String,
    confident              Bool,
    effect                 Nullable(Float64),
    effect_ci_low          Nullable(Float64),
    effect_ci_high         Nullable(Float64),
    test_statistic         Nullable(Float64),
    penalty                Nullable(Float64),
    p_value                Nullable(Float64),
    evidence               String,
    since                  DateTime64(3, 'UTC'),
    until                  DateTime64(3, 'UTC'),
    bucket                 LowCardinality(String),
    delta_threshold        Float64,
    run_modes              Array(String),
    provenances            Array(String),
    alpha                  Float64,
    permutations           UInt32,
    seed                   UInt64,
    event_count            UInt64
)
ENGINE = ReplacingMergeTree(run_at)
ORDER BY (surface_id, run_id, kind, window_from, dimension_id, source, reason);

-- Analysis records and governance decisions, append-only: a variance reading
-- ('variance-decompose'), its verdict ('variance-evaluate'), a lifecycle decision
-- ('variance-lifecycle': lock | pin | supersede | discard) and drift runs ('drift-run').
-- payload holds the full JSON response of the analysis.
CREATE TABLE IF NOT EXISTS holonograph.analysis_events
(
    event_id               String,
    kind                   LowCardinality(String),
    target_event_id        String,
    surface_id             LowCardinality(String),
    dimension_id           LowCardinality(String),
    status                 LowCardinality(String),
    verdict                LowCardinality(String),
    approver_id            String,
    pinned_label           String,
    superseded_by          String,
    created_at             DateTime64(3, 'UTC'),
    payload                String
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY event_id;

-- One row per variance decomposition (its eventId is the analysis event's id).
CREATE TABLE IF NOT EXISTS holonograph.variance_readings
(
    event_id               String,
    surface_id             LowCardinality(String),
    dimension_id           LowCardinality(String),
    since                  DateTime64(3, 'UTC'),
    until                  DateTime64(3, 'UTC'),
    bucket                 LowCardinality(String),
    run_modes              Array(String),
    provenances            Array(String),
    outcome                LowCardinality(String),
    buckets                UInt32,
    events                 UInt64,
    clusters               UInt64,
    mean                   Float64,
    observed_variance      Float64,
    noise_variance         Float64,
    cleaned_variance       Float64,
    cleaned_ci_low         Float64,
    cleaned_ci_high        Float64,
    noise_share            Float64,
    q_statistic            Float64,
    method                 LowCardinality(String),
    created_at             DateTime64(3, 'UTC'),
    payload                String
)
ENGINE = ReplacingMergeTree(created_at)
ORDER BY event_id;
