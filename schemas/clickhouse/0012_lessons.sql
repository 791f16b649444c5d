-- The lessons pipeline (docs/lessons.md, docs/decisions/0011-lessons-pipeline.md; the
-- Guide's chapter 12): overrides -> clusters -> drafts -> the gate -> published
-- artifacts. Every table is a tenant's (tenant_id leads each key); rows are appended,
-- never updated.

-- One row per human override: what the system produced beside what good looks like.
-- `event_id` is the idempotency key (a re-send is the same row, collapsed by the
-- ReplacingMergeTree and read with FINAL); `content_digest` tells a re-send from a
-- different override reusing an id (refused).
CREATE TABLE IF NOT EXISTS holonograph.lesson_overrides
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    event_id               String,
    agent_id               String,
    surface_id             LowCardinality(String),
    correlation_id         String,
    run_mode               LowCardinality(String),
    original_output        String,                   -- JSON
    corrected_output       String,                   -- JSON
    rationale              String,
    tags                   Array(String),
    source                 LowCardinality(String),   -- 'http' or 'otlp'
    emission_stream        String,
    emission_seq           UInt64,
    content_digest         String,
    occurred_at            DateTime64(3, 'UTC'),
    recorded_at            DateTime64(3, 'UTC'),
    INDEX occurred_minmax occurred_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, surface_id, event_id);

-- One row per recorded clustering of a surface's overrides (`lessons cluster --record`):
-- the same members give the same cluster_id, so a re-run replaces its row.
CREATE TABLE IF NOT EXISTS holonograph.lesson_clusters
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    cluster_id             String,
    surface_id             LowCardinality(String),
    window_start           DateTime64(3, 'UTC'),
    window_end             DateTime64(3, 'UTC'),
    member_ids             Array(String),
    payload                String,                   -- the cluster's JSON document
    computed_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(computed_at)
ORDER BY (tenant_id, cluster_id);

-- One row per action on a draft, numbered by `seq`: drafted, approved, rejected,
-- published. The newest row is the draft's status; all of them its history.
CREATE TABLE IF NOT EXISTS holonograph.lesson_drafts
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    draft_id               String,
    seq                    UInt32,
    action                 Enum8('drafted' = 1, 'approved' = 2, 'rejected' = 3, 'published' = 4),
    kind                   LowCardinality(String),
    surface_id             LowCardinality(String),
    cluster_id             String,
    actor                  String,
    comment                String,
    draft                  String,                   -- the draft's JSON document
    draft_digest           String,
    recorded_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(recorded_at)
ORDER BY (tenant_id, draft_id, seq);

-- One row per published artifact version. `supersedes` names the artifacts this
-- version replaced or merged (no longer live) and `links` those it only relates to.
CREATE TABLE IF NOT EXISTS holonograph.lesson_artifacts
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    artifact_id            String,
    version                UInt32,
    kind                   LowCardinality(String),
    surface_id             LowCardinality(String),
    draft_id               String,
    cluster_id             String,
    approver_id            String,
    content                String,                   -- JSON
    content_digest         String,
    supersedes             Array(String),
    links                  Array(String),
    fixture_record_id      String,                   -- a fixture's conformance record
    published_at           DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(published_at)
ORDER BY (tenant_id, artifact_id, version);

-- One change event per published skill, lesson or code-change recommendation (a
-- published lesson becomes substrate). A published fixture's change event is the one
-- its conformance approval writes (change_events_from_fixtures).
CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.change_events_from_lessons
TO holonograph.change_events AS
SELECT
    tenant_id, 'lesson_artifacts' AS origin,
    concat('lesson:', artifact_id, ':', toString(version)) AS change_id,
    '' AS agent_id, surface_id, 'lesson' AS kind,
    artifact_id, toString(version) AS artifact_version,
    published_at AS at, CAST(NULL, 'Nullable(DateTime64(3, \'UTC\'))') AS ends_at,
    '' AS light_source_id, approver_id AS actor,
    concat(toString(kind), ' ', artifact_id, ' v', toString(version), ' published',
           if(empty(supersedes), '', concat(', superseding ', arrayStringConcat(supersedes, ', ')))) AS description,
    toJSONString(CAST((toString(kind), draft_id, cluster_id, content_digest, supersedes, links),
        'Tuple(artifactKind String, draftId String, clusterId String, contentDigest String, supersedes Array(String), links Array(String))')) AS details,
    published_at AS recorded_at
FROM holonograph.lesson_artifacts AS source
WHERE source.kind != 'fixture';
