-- Conformance: approved fixtures and the results of checks over stored events.

-- One immutable row per approval or rejection of a fixture. Editing a fixture is a
-- new version (the next number for that fixture_id); rows are never updated. A
-- fixture is live while its newest record is an approval; checks run that version.
CREATE TABLE IF NOT EXISTS holonograph.conformance_fixtures
(
    record_id              String,
    fixture_id             String,
    version                UInt32,
    action                 Enum8('approved' = 1, 'rejected' = 2),
    surface_id             LowCardinality(String),
    source_surface_id      String,
    rule_id                String,
    enforceability         LowCardinality(String),
    approver_id            String,
    comment                String,
    fixture                String,
    fixture_digest         String,
    recorded_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(recorded_at)
ORDER BY (fixture_id, version, record_id);

-- One row per (check run, fixture): the top-level verdict, counts per verdict and
-- the evaluable share over the window actually used, so dashboards can chart
-- conformance over time. fixture_version 0 marks an inline (unapproved) fixture.
CREATE TABLE IF NOT EXISTS holonograph.conformance_results
(
    check_id               String,
    fixture_id             String,
    fixture_version        UInt32,
    fixture_digest         String,
    rule_id                String,
    surface_id             LowCardinality(String),
    enforceability         LowCardinality(String),
    window_start           DateTime64(9, 'UTC'),
    window_end             DateTime64(9, 'UTC'),
    checked_at             DateTime64(3, 'UTC'),
    run_modes              Array(String),
    verdict                Enum8('not-applicable' = 1, 'unevaluable' = 2, 'requires-judge' = 3, 'pass' = 4, 'fail' = 5),
    events_checked         UInt64,
    count_fail             UInt64,
    count_pass             UInt64,
    count_requires_judge   UInt64,
    count_unevaluable      UInt64,
    count_not_applicable   UInt64,
    evaluable_share        Nullable(Float64),
    failing_event_ids      Array(String)
)
ENGINE = ReplacingMergeTree(checked_at)
PARTITION BY toYYYYMM(checked_at)
ORDER BY (surface_id, fixture_id, checked_at, check_id);
