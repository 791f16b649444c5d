"""`schemas.readonce.read_once`: within the block one key on one store is read once, until `forget`;
outside it every call reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from schemas.migrations import table_exists
from schemas.readonce import forget, read_once, remembered, table_names
from schemas.store import QueryResult, Store
from schemas.tables import EVALUATION_EVENTS, QUARANTINE, Table


class _Counting:
    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.reads


def test_outside_a_block_every_call_reads() -> None:
    store, read = object(), _Counting()
    assert [remembered(store, "k", read) for _ in range(2)] == [1, 2]


def test_in_a_block_one_key_on_one_store_is_read_once_until_forgotten() -> None:
    store, other, read = object(), object(), _Counting()
    with read_once():
        assert remembered(store, "k", read) == 1
        assert remembered(store, "k", read) == 1
        assert remembered(store, "j", read) == 2  # another key
        assert remembered(other, "k", read) == 3  # another store
        forget()
        assert remembered(store, "k", read) == 4
    assert remembered(store, "k", read) == 5  # the block is over


def test_a_block_within_a_block_is_the_same_block() -> None:
    store, read = object(), _Counting()
    with read_once():
        assert remembered(store, "k", read) == 1
        with read_once():
            assert remembered(store, "k", read) == 1
        assert remembered(store, "k", read) == 1


class _Recording:
    def __init__(self, store: Store) -> None:
        self.store, self.sent = store, 0

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self.sent += 1
        return self.store.query(sql, parameters)


@pytest.mark.clickhouse
def test_a_job_block_lists_the_tables_once_and_answers_as_a_lookup_would(store: Store) -> None:
    recording = _Recording(store)
    missing = Table("no_such_table")
    outside = [table_exists(recording, t) for t in (EVALUATION_EVENTS, QUARANTINE, missing)]
    assert outside == [True, True, False] and recording.sent == 3
    recording.sent = 0
    with read_once():
        inside = [table_exists(recording, t) for t in (EVALUATION_EVENTS, QUARANTINE, missing)]
        assert {EVALUATION_EVENTS.name, QUARANTINE.name} <= table_names(recording)
    assert inside == outside and recording.sent == 1
