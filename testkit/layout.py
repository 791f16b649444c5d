"""The reads as they were before the event layout (migration 0016): every query with
the layout's pruning predicate (`schemas.placement.placed_in`) taken out, so it runs on
a store of the old layout too. The layout tests and `bench.layout_pruning` compare
the analyses' answers and costs with and without it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.store import QueryResult, Store

_PLACED = re.compile(r"\(\((?:\w+\.)?placed_")


def strip_placement(sql: str) -> str:
    """`sql` without the layout's pruning predicates (`schemas.placement.placed_in`),
    each replaced by `1`: the query as it was before the layout, which runs on the old
    tables too."""
    while (match := _PLACED.search(sql)) is not None:
        start, depth = match.start(), 0
        for end in range(start, len(sql)):
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            if depth == 0:
                break
        sql = sql[:start] + "1" + sql[end + 1 :]
    return sql


class Unplaced:
    """A store that runs every query without the pruning predicates (`strip_placement`):
    the reads exactly as they were before the layout."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.url = inner.url

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self._inner.query(strip_placement(sql), parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._inner.command(strip_placement(sql), parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner.insert(table, rows, column_names, settings)

    def close(self) -> None:
        self._inner.close()
