-- Harness conformance runs (`holonograph conformance suite run` on a suite with
-- combinations; docs/conformance.md): one row per (run, combination, scenario) cell
-- with its reductions, failure classes and regressions, so the report and dashboards
-- show what passed per combination over time. A credential-gated combination that
-- did not run has its cells as status 'skipped'. Rows are appended, never updated.
CREATE TABLE IF NOT EXISTS holonograph.harness_conformance_results
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    run_id                 String,
    suite_id               String,
    suite_revision         UInt32,
    suite_digest           String,
    ran_at                 DateTime64(3, 'UTC'),
    run_status             LowCardinality(String),   -- passed | failed
    executor               LowCardinality(String),   -- recorded | store
    combination_id         String,
    provider               LowCardinality(String),
    model                  LowCardinality(String),
    profile                LowCardinality(String),
    policy                 LowCardinality(String),
    sandbox                LowCardinality(String),
    scenario_id            String,
    surface_id             LowCardinality(String),
    tier                   LowCardinality(String),
    status                 LowCardinality(String),   -- passed | failed | skipped
    trials                 UInt32,
    passes                 UInt32,
    missing                UInt32,
    pass_rate              Nullable(Float64),
    mean_latency_ms        Nullable(Float64),
    p95_latency_ms         Nullable(Float64),
    latency_sd_ms          Nullable(Float64),
    tokens_total           Nullable(Float64),
    cost_usd_total         Nullable(Float64),
    retries                UInt32,
    failure_classes        Map(String, UInt32),
    baseline_revision      Nullable(UInt32),
    regressions            Array(String),
    failures               Array(String)
)
ENGINE = ReplacingMergeTree(ran_at)
PARTITION BY toYYYYMM(ran_at)
ORDER BY (tenant_id, suite_id, ran_at, run_id, combination_id, scenario_id);
