-- Retention (issue 30): how long each tenant's events, dimensions, receipts and
-- quarantined spans are kept, and the store's default for every other tenant
-- (`holonograph serve --retention`). The tables' TTL is rendered from these rows
-- (`schemas.retention.apply_retention_ttl`, run after every migration run, so a table a
-- later migration rebuilds gets its TTL back). The default lives in a table without a
-- tenant column: a tenant's read-only view shows it, and only its own row of the other.
-- CREATE ... IF NOT EXISTS only: safe to re-run after a crash.
CREATE TABLE IF NOT EXISTS holonograph.tenant_retention
(
    tenant_id   LowCardinality(String),
    -- how long a row is kept after its time (0: the setting was cleared)
    seconds     UInt64,
    updated_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY tenant_id;

CREATE TABLE IF NOT EXISTS holonograph.store_retention
(
    -- the store's default for a tenant without a setting of its own (0: keep forever)
    seconds     UInt64,
    updated_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(updated_at)
ORDER BY tuple();
