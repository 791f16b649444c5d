"""Test and bench support, not installed (like `bench/`): imported only by `tests/` and
`bench/`, from the repository root.

    backends.py      which Kafka and ClickHouse the suites use: Tansu + chDB, or
                     containers (testcontainers) or servers of one's own
    tansu.py         a Kafka-protocol broker (Tansu) on a free port, for the Kafka suites
    faulty_store.py  a `Store` that can be made to hold, fail or refuse rows
    scenarios.py     seeded synthetic traffic with known change points, written into a
                     migrated store's tables through `schemas.tables`
    scalestore.py    a store of millions of seeded rows (ULID or random ids),
                     generated inside ClickHouse, for the scale benchmark
"""
