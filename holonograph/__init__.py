"""Wiring: the `holonograph` command line builds configs, stores and clients and
hands them to `ingest` and `processors`."""
