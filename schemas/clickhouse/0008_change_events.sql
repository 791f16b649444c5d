-- Change events (docs/changes.md, docs/decisions/0007-change-events.md): every
-- governance change the store records, and what operators record themselves (deploys,
-- prompt and config changes, vendor and model changes, availability marks), as rows of
-- one table that drift attribution, the report and the dashboards read.
--
-- Rows of the governance tables are derived in ClickHouse by materialized views, which
-- fire on every insert into their source table whoever writes it (the receiver, the
-- sink, `replay`, a CLI command, embedded or on a server); the rows written before this
-- migration are copied by the runner's BACKFILL of each view, which runs the view's own
-- SELECT over them (one mapping, written once).
-- Operator rows are written by `schemas.changelog`, their one Python writer.
--
-- Safe to run again after a crash at any point: every object is created IF NOT EXISTS,
-- and each view exists before its backfill runs, so a row inserted in between is
-- written by the view and by the backfill, the same row under the same key, which the
-- ReplacingMergeTree collapses (read with FINAL). A governance row's change_id is a
-- function of its source row, so a redelivered source row is the same change too.

CREATE TABLE IF NOT EXISTS holonograph.change_events
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    origin                 LowCardinality(String),   -- the source table, or 'operator'
    change_id              String,
    agent_id               String,                   -- '' when not known
    surface_id             LowCardinality(String),   -- '' = agent-wide ('' agent too: tenant-wide)
    kind                   LowCardinality(String),
    artifact_id            String,
    artifact_version       String,
    at                     DateTime64(3, 'UTC'),
    ends_at                Nullable(DateTime64(3, 'UTC')),  -- a paired availability mark's end
    light_source_id        String,                   -- availability marks: the vendor ('' = any)
    actor                  String,
    description            String,
    details                String,                   -- a JSON object, per kind (docs/changes.md)
    recorded_at            DateTime64(3, 'UTC'),
    INDEX at_minmax at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(recorded_at)
ORDER BY (tenant_id, origin, change_id);

-- The contracts table as the contracts view joins it: a materialized view reads every
-- mention of its source table as the block being inserted, a view as the real table.
CREATE VIEW IF NOT EXISTS holonograph.contract_texts AS
SELECT tenant_id, agent_id, version_id, contract FROM holonograph.contracts;

-- One row per surface a contract version registers, changes or retires, with what it
-- retired and what superseded it (items are `dimension:ID`, `tag:ID`, `column:ID`).
CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.change_events_from_contracts
TO holonograph.change_events AS
SELECT
    tenant_id, 'contracts' AS origin,
    concat('contract:', version_id, ':', surface_id) AS change_id,
    agent_id, surface_id, 'contract' AS kind,
    agent_id AS artifact_id, version_id AS artifact_version,
    registered_at AS at, CAST(NULL, 'Nullable(DateTime64(3, \'UTC\'))') AS ends_at,
    '' AS light_source_id, '' AS actor,
    concat('contract ', version_id, ' of ', agent_id, ': surface ', surface_id, ' ', state,
           if(empty(retired) OR state = 'retired', '', concat(', retired ', arrayStringConcat(retired, ', ')))) AS description,
    toJSONString(CAST((state, previous_version_id, retired, superseded_by, surface_superseded_by),
        'Tuple(state String, previousVersionId String, retired Array(String), supersededBy Map(String, String), surfaceSupersededBy String)')) AS details,
    registered_at AS recorded_at
FROM
(
    SELECT *,
           arrayFilter(i -> NOT has(now_items, i), was_items) AS removed,
           arrayFilter(i -> NOT has(successors.1, splitByChar(':', i)[2]), removed) AS retired,
           mapFromArrays(
               arrayFilter(i -> has(successors.1, splitByChar(':', i)[2]), removed),
               arrayMap(i -> successors.2[indexOf(successors.1, splitByChar(':', i)[2])],
                        arrayFilter(i -> has(successors.1, splitByChar(':', i)[2]), removed))
           ) AS superseded_by,
           if(state = 'retired',
              JSONExtractString(arrayFirst(s -> JSONExtractString(s, 'supersedes') = surface_id, now_s), 'id'),
              '') AS surface_superseded_by
    FROM
    (
        SELECT *,
               multiIf(NOT has(was_ids, surface_id), 'registered',
                       NOT has(now_ids, surface_id), 'retired', 'changed') AS state,
               arrayFirst(s -> JSONExtractString(s, 'id') = surface_id, now_s) AS now_entry,
               arrayFirst(s -> JSONExtractString(s, 'id') = surface_id, was_s) AS was_entry,
               arrayConcat(
                   arrayMap(x -> concat('dimension:', JSONExtractString(x, 'id')), JSONExtractArrayRaw(was_entry, 'dimensions')),
                   arrayMap(x -> concat('tag:', if(JSONType(x) = 'String', JSONExtractString(x), JSONExtractString(x, 'id'))), JSONExtractArrayRaw(was_entry, 'cohortTags')),
                   arrayMap(x -> concat('column:', JSONExtractString(x, 'id')), JSONExtractArrayRaw(was_entry, 'substrateColumns'))
               ) AS was_items,
               arrayConcat(
                   arrayMap(x -> concat('dimension:', JSONExtractString(x, 'id')), JSONExtractArrayRaw(now_entry, 'dimensions')),
                   arrayMap(x -> concat('tag:', if(JSONType(x) = 'String', JSONExtractString(x), JSONExtractString(x, 'id'))), JSONExtractArrayRaw(now_entry, 'cohortTags')),
                   arrayMap(x -> concat('column:', JSONExtractString(x, 'id')), JSONExtractArrayRaw(now_entry, 'substrateColumns'))
               ) AS now_items,
               arrayFilter(p -> p.1 != '', arrayConcat(
                   arrayMap(x -> (JSONExtractString(x, 'supersedes'), concat('dimension:', JSONExtractString(x, 'id'))), JSONExtractArrayRaw(now_entry, 'dimensions')),
                   arrayMap(x -> (if(JSONType(x) = 'String', '', JSONExtractString(x, 'supersedes')), concat('tag:', if(JSONType(x) = 'String', JSONExtractString(x), JSONExtractString(x, 'id')))), JSONExtractArrayRaw(now_entry, 'cohortTags')),
                   arrayMap(x -> (JSONExtractString(x, 'supersedes'), concat('column:', JSONExtractString(x, 'id'))), JSONExtractArrayRaw(now_entry, 'substrateColumns'))
               )) AS successors
        FROM
        (
            SELECT c.tenant_id AS tenant_id, c.agent_id AS agent_id, c.version_id AS version_id,
                   c.previous_version_id AS previous_version_id, c.registered_at AS registered_at,
                   JSONExtractArrayRaw(c.contract, 'surfaces') AS now_s,
                   JSONExtractArrayRaw(p.contract, 'surfaces') AS was_s,
                   arrayMap(s -> JSONExtractString(s, 'id'), now_s) AS now_ids,
                   arrayMap(s -> JSONExtractString(s, 'id'), was_s) AS was_ids,
                   arrayJoin(arrayDistinct(arrayConcat(
                       arrayMap(s -> JSONExtractString(s, 'id'), arrayFilter(s -> NOT has(was_s, s), now_s)),
                       arrayFilter(i -> NOT has(now_ids, i), was_ids)))) AS surface_id
            FROM holonograph.contracts AS c
            ANY LEFT JOIN holonograph.contract_texts AS p
              ON p.tenant_id = c.tenant_id AND p.agent_id = c.agent_id
             AND p.version_id = c.previous_version_id
        )
    )
);

-- One row per fixture approval or rejection.
CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.change_events_from_fixtures
TO holonograph.change_events AS
SELECT
    tenant_id, 'conformance_fixtures' AS origin, concat('fixture:', record_id) AS change_id,
    '' AS agent_id, surface_id, 'fixture' AS kind,
    fixture_id AS artifact_id, toString(version) AS artifact_version,
    recorded_at AS at, CAST(NULL, 'Nullable(DateTime64(3, \'UTC\'))') AS ends_at,
    '' AS light_source_id, approver_id AS actor,
    concat('fixture ', fixture_id, ' v', toString(version), ' ', toString(action),
           if(comment = '', '', concat(': ', comment))) AS description,
    toJSONString(CAST((toString(action), rule_id, toString(enforceability), comment, fixture_digest, source_surface_id),
        'Tuple(action String, ruleId String, enforceability String, comment String, fixtureDigest String, sourceSurfaceId String)')) AS details,
    recorded_at AS recorded_at
FROM holonograph.conformance_fixtures;

-- One row per variance lifecycle decision (lock, pin, supersede, discard).
CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.change_events_from_variance
TO holonograph.change_events AS
SELECT
    tenant_id, 'analysis_events' AS origin, concat('variance-lifecycle:', event_id) AS change_id,
    '' AS agent_id, surface_id, 'variance-lifecycle' AS kind,
    target_event_id AS artifact_id, '' AS artifact_version,
    created_at AS at, CAST(NULL, 'Nullable(DateTime64(3, \'UTC\'))') AS ends_at,
    '' AS light_source_id, approver_id AS actor,
    concat('variance reading ', target_event_id, ' of ', dimension_id, ': ', toString(status),
           if(pinned_label = '', '', concat(' ', pinned_label)),
           if(superseded_by = '', '', concat(' by ', superseded_by))) AS description,
    toJSONString(CAST((toString(status), toString(dimension_id), pinned_label, superseded_by),
        'Tuple(status String, dimensionId String, pinnedLabel String, supersededBy String)')) AS details,
    created_at AS recorded_at
FROM holonograph.analysis_events AS source
WHERE source.kind = 'variance-lifecycle';

-- One row per recorded topology scan (agent-wide).
CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.change_events_from_scans
TO holonograph.change_events AS
SELECT
    tenant_id, 'analysis_events' AS origin, concat('topology-scan:', event_id) AS change_id,
    JSONExtractString(payload, 'agentId') AS agent_id, '' AS surface_id, 'topology-scan' AS kind,
    event_id AS artifact_id, JSONExtractString(payload, 'contractVersionId') AS artifact_version,
    created_at AS at, CAST(NULL, 'Nullable(DateTime64(3, \'UTC\'))') AS ends_at,
    '' AS light_source_id, '' AS actor,
    concat('topology scan of ', JSONExtractString(payload, 'agentId'), ': ',
           if(toString(verdict) = '', 'recorded', toString(verdict))) AS description,
    toJSONString(CAST((toString(verdict), JSONExtractString(payload, 'since'), JSONExtractString(payload, 'until'),
                       JSONExtractFloat(payload, 'coverage', 'ratio')),
        'Tuple(verdict String, since String, until String, coverageRatio Float64)')) AS details,
    created_at AS recorded_at
FROM holonograph.analysis_events AS source
WHERE source.kind = 'topology-scan';

-- The rows written before this migration, by each view's own SELECT (the runner's
-- BACKFILL, schemas/migrations.py).
BACKFILL holonograph.change_events_from_contracts;
BACKFILL holonograph.change_events_from_fixtures;
BACKFILL holonograph.change_events_from_variance;
BACKFILL holonograph.change_events_from_scans;
