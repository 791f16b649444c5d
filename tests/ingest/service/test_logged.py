"""Readers of a logging process (`ingest.service.logged`): a job's insert makes the claim
index read the store's claims again only when the insert may claim a key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ingest.handoff.smalllog import SmallLog
from ingest.service.logged import DrainedStore, claims
from schemas.store import QueryResult
from schemas.tables import COMPLETENESS_WINDOWS, EVALUATION_EVENTS, EVENT_OWNERS, STREAM_OWNERS


class _Recording:
    """A store that takes every insert and answers every query with no rows."""

    url = "memory://"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        self.queries.append(sql)
        return QueryResult(column_names=(), rows=[])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        return None

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        return None

    def close(self) -> None:
        return None


def _refreshes(store: _Recording, log: SmallLog) -> int:
    """Store queries the index's next decision makes (a refresh reads both claim tables)."""
    before = len(store.queries)
    log.index.owners(store, [], [])
    return len(store.queries) - before


@pytest.mark.parametrize(
    ("table", "claiming"),
    [
        (COMPLETENESS_WINDOWS.qualified, False),
        (EVENT_OWNERS.qualified, True),
        (STREAM_OWNERS.qualified, True),
        (EVALUATION_EVENTS.qualified, True),  # its view claims the event ids
        ("`holonograph`.`event_owners`", True),
        ("event_owners", True),
    ],
)
def test_a_jobs_insert_refreshes_the_claims_only_when_it_may_claim(
    tmp_path: Path, table: str, claiming: bool
) -> None:
    inner = _Recording()
    log = SmallLog(tmp_path / "log", inner)
    try:
        jobs = DrainedStore(inner, log)
        assert claims(table) is claiming
        jobs.insert(table, [["t"]], ("tenant_id",))
        assert _refreshes(inner, log) == (2 if claiming else 0)
        assert _refreshes(inner, log) == 0  # read once
    finally:
        log.segments.close()
