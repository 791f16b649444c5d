"""The store: ClickHouse, embedded (chDB) or a server, behind `schemas.store.Store`.

url          store URLs and the one `--store` / `--data-dir` rule (no driver import)
clickhouse   the writing connection (`ClickHouseStore`, `open_store`)
rows         validated batches -> rows in `schemas.tables` column order -> inserts
errors       a refused write classified once: permanent (isolate) or retryable
retention    the TTL of the event tables
reader       read-only connections, tenant-scoped; querygate: what they may run
"""
