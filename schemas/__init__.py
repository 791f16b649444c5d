"""The contract: wire models, Kafka record format, store protocol and ClickHouse migrations.

`ingest` and `processors` both import this package; neither imports the other.
"""
