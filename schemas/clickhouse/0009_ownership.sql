-- Identity owned by the agent (docs/security.md, "Event ids and streams have owners").
--
-- An event id belongs to the agent that first wrote it, per tenant; an emission stream
-- to the agents of the token that opened it. Writers check every write against the
-- claims (`ingest.store.owners`). Claims are never updated: a key's owner is its claim
-- with the lowest `_block_number` (the insert order, persisted by
-- `enable_block_number_column`), so two writers that claimed one key at once agree
-- which claim stands. Plain MergeTree, not Replacing: a merge must never drop the
-- first claim for a later one.
--
-- Every commit looks its keys up (`WHERE (tenant_id, event_id) IN ...`): small granules
-- and compressed blocks make a key that is not near the others (ids that are not
-- time-ordered) cost a small read instead of a 64 KB block.
--
-- `event_owners` is the companion identity table of the event tables: keyed like them
-- by (tenant_id, event_id), its first row per id recorded on first receipt; columns a
-- later layout needs at first receipt (a time-ordered internal key) belong here. Every
-- event row written claims its id through `event_owners_mv`, whoever writes it (a
-- writer older than this migration too); a writer that shares the store with others
-- also claims new ids itself before writing (see `ingest.store.owners`). A later
-- version's row is a later claim: it never wins.

CREATE TABLE IF NOT EXISTS holonograph.event_owners
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    event_id               String,
    agent_id               String,
    first_received_at      DateTime64(3, 'UTC'),
    first_ingest_version   UInt64
)
ENGINE = MergeTree
ORDER BY (tenant_id, event_id)
SETTINGS enable_block_number_column = 1, index_granularity = 256,
    min_compress_block_size = 8192, max_compress_block_size = 16384;

-- `any_agent`: opened by a token that may write any agent (or a receiver without
-- tokens); otherwise `agents` lists what the opening token could write.
CREATE TABLE IF NOT EXISTS holonograph.stream_owners
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    emission_stream        String,
    any_agent              Bool,
    agents                 Array(String),
    first_received_at      DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (tenant_id, emission_stream)
SETTINGS enable_block_number_column = 1, index_granularity = 256,
    min_compress_block_size = 8192, max_compress_block_size = 16384;

-- Existing rows: an event id belongs to the agent of its earliest version still stored
-- (a merge keeps only the latest, so for ids merged before this migration, that one).
-- Safe to run again after a crash at any point: only ids without a claim are filled,
-- so a repeat adds nothing twice. Filled before the view starts claiming new rows (a
-- new version of an old id must not claim it first), and once more after, for the rows
-- written in between.
INSERT INTO holonograph.event_owners
    (tenant_id, event_id, agent_id, first_received_at, first_ingest_version)
SELECT
    tenant_id,
    event_id,
    argMin(agent_id, ingest_version),
    min(ingested_at),
    min(ingest_version)
FROM holonograph.evaluation_events
WHERE (tenant_id, event_id) NOT IN (SELECT tenant_id, event_id FROM holonograph.event_owners)
GROUP BY tenant_id, event_id
SETTINGS optimize_aggregation_in_order = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_owners_mv
TO holonograph.event_owners
AS SELECT
    tenant_id,
    event_id,
    agent_id,
    ingested_at AS first_received_at,
    ingest_version AS first_ingest_version
FROM holonograph.evaluation_events;

INSERT INTO holonograph.event_owners
    (tenant_id, event_id, agent_id, first_received_at, first_ingest_version)
SELECT
    tenant_id,
    event_id,
    argMin(agent_id, ingest_version),
    min(ingested_at),
    min(ingest_version)
FROM holonograph.evaluation_events
WHERE (tenant_id, event_id) NOT IN (SELECT tenant_id, event_id FROM holonograph.event_owners)
GROUP BY tenant_id, event_id
SETTINGS optimize_aggregation_in_order = 1;

-- Existing streams: no token was recorded, so a stream belongs to the agents of the
-- events stored on it (a token that may write all of them continues it; one that
-- could write them is what the receiver checked each of them against). A stream with
-- no stored event gets no claim: its next writer opens it.
INSERT INTO holonograph.stream_owners
    (tenant_id, emission_stream, any_agent, agents, first_received_at)
SELECT
    tenant_id,
    emission_stream,
    false,
    arraySort(groupUniqArray(agent_id)),
    min(ingested_at)
FROM holonograph.evaluation_events
WHERE (tenant_id, emission_stream) NOT IN
    (SELECT tenant_id, emission_stream FROM holonograph.stream_owners)
GROUP BY tenant_id, emission_stream;
