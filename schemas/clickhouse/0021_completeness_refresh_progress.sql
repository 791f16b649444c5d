-- The progress of a full completeness recompute (issue 30): its plan (the chunks it
-- runs, by (tenant, stream) range and by bucket and time range), then one row per
-- chunk done, so a recompute interrupted by a crash or a limit resumes at the first
-- chunk not done, with the same version and `now`, instead of starting again. A
-- recompute is finished when `completeness_refreshes` has its version.
-- CREATE ... IF NOT EXISTS only: safe to re-run after a crash.
CREATE TABLE IF NOT EXISTS holonograph.completeness_refresh_progress
(
    version     UInt64,
    now         DateTime64(3, 'UTC'),
    -- 'plan' (detail: the chunks, JSON), 'surface_plan', or the step a chunk ran
    step        LowCardinality(String),
    chunk       UInt32,
    detail      String,
    done_at     DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(done_at)
ORDER BY (version, step, chunk);
