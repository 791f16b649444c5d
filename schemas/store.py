"""The store as the rest of the code sees it: a ClickHouse database behind a small protocol.

Concrete stores (a clickhouse-connect client over HTTP or chDB, or the admin
endpoint of the process that owns an embedded store) are built by the CLI wiring
and handed in; jobs and the receiver only ever see `Store`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class QueryResult:
    """Rows of a query, column names in select order; datetimes are naive UTC."""

    column_names: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.column_names, row, strict=True)) for row in self.rows]

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None


class Store(Protocol):
    """What every component needs from ClickHouse. Parameters bind as `{name:Type}`."""

    url: str

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult: ...

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None: ...

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None: ...

    def close(self) -> None: ...
