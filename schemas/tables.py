"""Every table of the `holonograph` database: its name and the order its columns are
inserted in.

The tables themselves are the migrations' (`schemas/clickhouse/NNNN_*.sql`); this
module is the one place code names a table or lists columns to write, so a new
column touches a migration, this file and the one function that fills it (found by
following the table's name from here). Row builders write `columns` in order; a
writer of only some columns (an `INSERT ... SELECT`, a test helper) names them with
`pick`, which refuses a name the table does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

DATABASE = "holonograph"


@dataclass(frozen=True)
class Table:
    """`columns`: the insert order of the table's writer (empty for a table or view that
    is only read, or written by SQL alone)."""

    name: str
    columns: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        """`holonograph.<name>`, as SQL and inserts name it."""
        return f"{DATABASE}.{self.name}"

    def pick(self, *names: str) -> tuple[str, ...]:
        """`names` in the order given, each checked to be one of `columns`."""
        unknown = [name for name in names if name not in self.columns]
        if unknown:
            raise ValueError(f"{self.qualified} has no column {', '.join(unknown)}")
        return names

    def column_list(self, *names: str) -> str:
        """`a, b, c` for an `INSERT INTO t (...)`: `names` (checked) or every column."""
        return ", ".join(self.pick(*names) if names else self.columns)


# --- written by the ingest path (the row builders of `ingest.store.rows`)

EVALUATION_EVENTS = Table(
    "evaluation_events",
    (
        "tenant_id", "event_id", "surface_id", "agent_id", "correlation_id", "run_mode",
        "provenance", "timestamp", "lens_version", "light_source_id", "light_source_requested",
        "substrate", "cohort_tags", "multiplex_role", "fixture_id", "markers", "latency_ms",
        "cost_usd", "tokens_input", "tokens_output", "sdk_name", "sdk_version", "dimension_ids",
        "emission_stream", "emission_seq", "emission_final", "trace_id", "span_id",
        "resource_attributes", "extras", "ingested_at", "ingest_version", "contract_version_id",
        "contract_findings", "placed_surface_id", "placed_hour",
    ),
)  # fmt: skip

EVALUATION_DIMENSIONS = Table(
    "evaluation_dimensions",
    (
        "tenant_id", "event_id", "dimension_id", "passed", "score", "expected", "actual", "judge",
        "surface_id", "agent_id", "correlation_id", "run_mode", "provenance", "timestamp",
        "lens_version", "light_source_id", "light_source_requested", "substrate", "cohort_tags",
        "emission_stream", "ingested_at", "ingest_version", "placed_surface_id", "placed_hour",
    ),
)  # fmt: skip

EMISSION_RECEIPTS = Table(
    "emission_receipts",
    (
        "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
        "quarantined", "event_id", "surface_id", "event_time", "received_at",
        "sentinel_interval_ms", "completeness_offered", "completeness_delivered",
        "completeness_dropped", "completeness_failed", "completeness_window_start",
        "completeness_window_end",
    ),
)  # fmt: skip

# One row per (tenant, stream, seq) with its receipt count: a view over the receipts.
EMISSION_RECORDS = Table("emission_records")

QUARANTINE = Table(
    "quarantine",
    (
        "tenant_id", "quarantine_id", "received_at", "reason", "span_name", "trace_id",
        "span_id", "emission_stream", "emission_seq", "attributes", "resource_attributes",
        "span_proto", "source",
    ),
)  # fmt: skip

# --- written by the ownership check (`ingest.store.owners`, their one writer): an event
# id's agent and a stream's opening token, claimed on first receipt, never updated

EVENT_OWNERS = Table(
    "event_owners",
    (
        "tenant_id", "event_id", "agent_id", "first_received_at", "first_ingest_version",
        "placed_surface_id", "placed_hour",
    ),
)  # fmt: skip

# --- written by the store's own materialized views (migration 0016, `schemas.placement`):
# every event or dimension row whose surface or hour is not its placement's

EVENT_MOVES = Table("event_moves")

STREAM_OWNERS = Table(
    "stream_owners",
    ("tenant_id", "emission_stream", "any_agent", "agents", "first_received_at"),
)

# --- written by the contract registry (`schemas.registry`, its one writer)

# Every registered version of every agent's contract; the active one is the latest.
CONTRACTS = Table(
    "contracts",
    (
        "tenant_id", "agent_id", "version_id", "previous_version_id", "registered_at",
        "digest", "contract",
    ),
)  # fmt: skip

# --- written by the topology inventory (`processors.topology.inventory`, its one writer)

# What an agent's code says exists: surface ids, or a dispatch map key -> surface id.
STRUCTURAL_INVENTORIES = Table(
    "structural_inventories",
    (
        "tenant_id", "agent_id", "consumer_id", "inventory_id", "inventory_kind", "captured_at",
        "surface_ids", "dispatch_map", "digest", "recorded_at",
    ),
)  # fmt: skip

# --- written by the completeness job (`processors.completeness.job`), by INSERT ... SELECT

STREAM_STATUS = Table(
    "stream_status",
    (
        "tenant_id", "emission_stream", "status", "first_seq", "last_seq", "final_seq",
        "expected", "delivered", "missing", "duplicates", "quarantined", "sentinels",
        "missing_ranges", "final_seen", "first_seen_at", "last_seen_at", "first_event_time",
        "last_event_time", "sentinel_interval_ms", "interval_reported", "dead_after_ms",
        "surfaces", "reported_windows", "reported_offered", "reported_delivered",
        "reported_dropped", "reported_failed", "lost_after_client", "loss_mismatch",
        "status_as_of", "version", "computed_at",
    ),
)  # fmt: skip

COMPLETENESS_WINDOWS = Table(
    "completeness_windows",
    (
        "tenant_id", "bucket", "scope", "surface_id", "emission_stream", "bucket_start",
        "offered", "delivered", "missing", "quarantined", "duplicates",
        "completeness_lower_bound", "bias_flag", "streams", "lossy_streams",
        "delivered_by_surface", "quarantined_by_surface", "version", "computed_at",
    ),
)  # fmt: skip

COMPLETENESS_REFRESHES = Table(
    "completeness_refreshes",
    ("version", "mode", "now", "since", "streams", "marked_dead", "duration_ms", "computed_at"),
)
COMPLETENESS_REFRESH_PROGRESS = Table(
    "completeness_refresh_progress", ("version", "now", "step", "chunk", "detail", "done_at")
)

# --- written by the drift and variance jobs (`processors.drift`, `processors.variance`)

DRIFT_CHANGE_POINTS = Table(
    "drift_change_points",
    (
        "run_id", "run_at", "surface_id", "dimension_id", "kind", "change_time", "window_from",
        "window_to", "source", "reason", "confident", "effect", "effect_ci_low",
        "effect_ci_high", "test_statistic", "penalty", "p_value", "evidence", "since", "until",
        "bucket", "delta_threshold", "run_modes", "provenances", "alpha", "permutations", "seed",
        "event_count", "tenant_id",
    ),
)  # fmt: skip

# Governance events of every analysis (`processors.analysis_events`, its one writer).
ANALYSIS_EVENTS = Table(
    "analysis_events",
    (
        "tenant_id", "event_id", "kind", "target_event_id", "surface_id", "dimension_id",
        "status", "verdict", "approver_id", "pinned_label", "superseded_by", "created_at",
        "payload",
    ),
)  # fmt: skip

VARIANCE_READINGS = Table(
    "variance_readings",
    (
        "tenant_id", "event_id", "surface_id", "dimension_id", "since", "until", "bucket",
        "run_modes", "provenances", "outcome", "buckets", "events", "clusters", "mean",
        "observed_variance", "noise_variance", "cleaned_variance", "cleaned_ci_low",
        "cleaned_ci_high", "noise_share", "q_statistic", "method", "created_at", "payload",
    ),
)  # fmt: skip

# --- written by the conformance job (`processors.conformance.approve`, `.check`)

CONFORMANCE_FIXTURES = Table(
    "conformance_fixtures",
    (
        "tenant_id", "record_id", "fixture_id", "version", "action", "surface_id",
        "source_surface_id", "rule_id", "enforceability", "approver_id", "comment", "fixture",
        "fixture_digest", "recorded_at",
    ),
)  # fmt: skip

CONFORMANCE_RESULTS = Table(
    "conformance_results",
    (
        "tenant_id", "check_id", "fixture_id", "fixture_version", "fixture_digest", "rule_id",
        "surface_id", "enforceability", "window_start", "window_end", "checked_at", "run_modes",
        "verdict", "events_checked", "count_fail", "count_pass", "count_requires_judge",
        "count_unevaluable", "count_not_applicable", "evaluable_share", "failing_event_ids",
    ),
)  # fmt: skip

# --- written by harness conformance runs (`processors.conformance.record`)

HARNESS_CONFORMANCE_RESULTS = Table(
    "harness_conformance_results",
    (
        "tenant_id", "run_id", "suite_id", "suite_revision", "suite_digest", "ran_at",
        "run_status", "executor", "combination_id", "provider", "model", "profile", "policy",
        "sandbox", "scenario_id", "surface_id", "tier", "status", "trials", "passes", "missing",
        "pass_rate", "mean_latency_ms", "p95_latency_ms", "latency_sd_ms", "tokens_total",
        "cost_usd_total", "retries", "failure_classes", "baseline_revision", "regressions",
        "failures",
    ),
)  # fmt: skip

# --- written by the lessons pipeline (`processors.lessons`, docs/lessons.md): overrides
# (`.overrides`), recorded clusterings (`.cluster`), the gate's records of each draft
# (`.gate`), published artifacts (`.publish`)

LESSON_OVERRIDES = Table(
    "lesson_overrides",
    (
        "tenant_id", "event_id", "agent_id", "surface_id", "correlation_id", "run_mode",
        "original_output", "corrected_output", "rationale", "tags", "source", "emission_stream",
        "emission_seq", "content_digest", "occurred_at", "recorded_at",
    ),
)  # fmt: skip

LESSON_CLUSTERS = Table(
    "lesson_clusters",
    (
        "tenant_id", "cluster_id", "surface_id", "window_start", "window_end", "member_ids",
        "payload", "computed_at",
    ),
)  # fmt: skip

LESSON_DRAFTS = Table(
    "lesson_drafts",
    (
        "tenant_id", "draft_id", "seq", "action", "kind", "surface_id", "cluster_id", "actor",
        "comment", "draft", "draft_digest", "recorded_at",
    ),
)  # fmt: skip

LESSON_ARTIFACTS = Table(
    "lesson_artifacts",
    (
        "tenant_id", "artifact_id", "version", "kind", "surface_id", "draft_id", "cluster_id",
        "approver_id", "content", "content_digest", "supersedes", "links", "fixture_record_id",
        "published_at",
    ),
)  # fmt: skip

# --- change events (docs/changes.md): governance rows derived by the store's own
# materialized views (migration 0008), operator rows by `schemas.changelog`, their one
# Python writer

CHANGE_EVENTS = Table(
    "change_events",
    (
        "tenant_id", "origin", "change_id", "agent_id", "surface_id", "kind", "artifact_id",
        "artifact_version", "at", "ends_at", "light_source_id", "actor", "description",
        "details", "recorded_at",
    ),
)  # fmt: skip

# The views deriving governance rows, one per source table (written by SQL alone), and
# the plain view over `contracts` they join to find a version's predecessor.
CHANGES_FROM_CONTRACTS = Table("change_events_from_contracts")
CHANGES_FROM_FIXTURES = Table("change_events_from_fixtures")
CHANGES_FROM_VARIANCE = Table("change_events_from_variance")
CHANGES_FROM_SCANS = Table("change_events_from_scans")
CHANGES_FROM_LESSONS = Table("change_events_from_lessons")
CONTRACT_TEXTS = Table("contract_texts")

# --- written by the scheduler (`holonograph.schedule.records`, their one writer): the
# lease on a schedule's fire time, and each run's outcome (docs/schedules.md)

SCHEDULE_CLAIMS = Table(
    "schedule_claims", ("tenant_id", "schedule", "fire_time", "claimant", "claimed_at")
)

SCHEDULE_RUNS = Table(
    "schedule_runs",
    (
        "tenant_id", "schedule", "fire_time", "job", "run_id", "claimant", "started_at",
        "finished_at", "status", "finding", "error", "delivery", "delivery_attempts",
        "delivery_error", "report", "version",
    ),
)  # fmt: skip

# --- written by `holonograph retention` and `serve --retention` (`ingest.store.retention`)

# A tenant's retention (0 seconds: cleared); the store's default for every other tenant.
TENANT_RETENTION = Table("tenant_retention", ("tenant_id", "seconds", "updated_at"))
STORE_RETENTION = Table("store_retention", ("seconds", "updated_at"))

# --- created and written by the migrations runner itself (`schemas.migrations`)

SCHEMA_MIGRATIONS = Table("schema_migrations", ("version", "name", "checksum"))
