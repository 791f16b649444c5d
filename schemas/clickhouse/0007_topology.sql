-- Structural inventories (docs/contracts.md, "The topology scanner"): what an agent's
-- code says exists, the scan's third source beside the contract and the events. One
-- row per distinct inventory: its id is a function of (tenant, content), so an
-- identical re-post is the same row and the scan reads the latest per consumer.

CREATE TABLE IF NOT EXISTS holonograph.structural_inventories
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    agent_id               String,
    consumer_id            String,
    inventory_id           String,
    inventory_kind         LowCardinality(String),
    captured_at            DateTime64(3, 'UTC'),
    surface_ids            Array(String),
    dispatch_map           Map(String, String),
    digest                 String,
    recorded_at            DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (tenant_id, agent_id, inventory_id);
