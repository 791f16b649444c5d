-- Surface contracts (docs/contracts.md): every registered version of every agent's
-- contract, never mutated; the active one is the latest registered. And on each
-- evaluation event, the contract version it was checked against ('' = none) and what
-- the check flagged ('undeclared-dimension:tone', ...).

CREATE TABLE IF NOT EXISTS holonograph.contracts
(
    tenant_id              LowCardinality(String) DEFAULT 'default',
    agent_id               String,
    version_id             String,
    previous_version_id    String,
    registered_at          DateTime64(3, 'UTC'),
    digest                 String,
    contract               String
)
ENGINE = ReplacingMergeTree(registered_at)
ORDER BY (tenant_id, agent_id, version_id);

ALTER TABLE holonograph.evaluation_events
    ADD COLUMN IF NOT EXISTS contract_version_id String DEFAULT '';
ALTER TABLE holonograph.evaluation_events
    ADD COLUMN IF NOT EXISTS contract_findings Array(String) DEFAULT [];
