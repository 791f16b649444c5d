"""Batch jobs over the ClickHouse store, one module per job."""
