-- Scheduled runs (`serve --schedule`, docs/schedules.md): who runs a fire time, and how
-- each run went.
--
-- `schedule_claims` is the lease. Before a receiver runs a schedule's fire time it
-- inserts a claim and reads the claims of that (tenant, schedule, fire time) back: the
-- claim with the lowest `_block_number` (the store's insert order, persisted by
-- `enable_block_number_column`) runs it, every other claimant stands down. Once a
-- receiver has read its own claim back, no claim it has not seen can come before it, so
-- two receivers that claimed at once agree which one stands, on chDB and on a
-- ClickHouse server alike. Plain MergeTree, not Replacing: a merge must never drop the
-- first claim for a later one. Claims are never updated.
CREATE TABLE IF NOT EXISTS holonograph.schedule_claims
(
    tenant_id   LowCardinality(String) DEFAULT 'default',
    schedule    String,
    fire_time   DateTime64(3, 'UTC'),
    claimant    String,
    claimed_at  DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (tenant_id, schedule, fire_time)
SETTINGS enable_block_number_column = 1, index_granularity = 256;

-- One row per state of a run (`version` grows): `running` is not written; a run is
-- written when its job is done (`ok`, `finding`, `failed`), then again with its
-- webhook delivery's outcome (`delivery`: none, pending, delivered, failed). The
-- latest version of a (tenant, schedule, fire time) is the run's state.
CREATE TABLE IF NOT EXISTS holonograph.schedule_runs
(
    tenant_id          LowCardinality(String) DEFAULT 'default',
    schedule           String,
    fire_time          DateTime64(3, 'UTC'),
    job                LowCardinality(String),
    run_id             String,
    claimant           String,
    started_at         DateTime64(3, 'UTC'),
    finished_at        DateTime64(3, 'UTC'),
    status             LowCardinality(String),
    finding            Bool,
    error              String,
    delivery           LowCardinality(String),
    delivery_attempts  UInt16,
    delivery_error     String,
    report             String CODEC(ZSTD(3)),
    version            UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (tenant_id, schedule, fire_time);
