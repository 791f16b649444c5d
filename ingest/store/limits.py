"""Limits of every read-only query: time, memory, rows read, rows returned.

A read-only connection (`ingest.store.reader`) fixes them in its server session
before `readonly = 1` (chDB), or sends them with every request (a ClickHouse server),
so a query cannot raise them; the server stops a query that reaches one and carries
on. 0 means no limit, as in ClickHouse. Light on purpose: the CLI's admin client
imports it without the store driver.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024 * 1024 * 1024

# The limits a caller asks for, by name (the others are the store owner's).
LimitRequest = Mapping[str, float]

# ClickHouse's error code for each limit, and the setting that raised it.
_LIMIT_CODES = {
    159: "max_execution_time",  # TIMEOUT_EXCEEDED
    241: "max_memory_usage",  # MEMORY_LIMIT_EXCEEDED
    158: "max_rows_to_read",  # TOO_MANY_ROWS
    396: "max_result_rows",  # TOO_MANY_ROWS_OR_BYTES
}
_CODE = re.compile(r"\bCode: (\d+)\b")
# What `holonograph query` calls each limit, for the hint.
FLAGS = {name: "--" + name.replace("_", "-") for name in _LIMIT_CODES.values()}


@dataclass(frozen=True)
class ReadLimits:
    """The server-side limits of one read-only query (0: none)."""

    max_execution_time: float = 300.0  # seconds
    max_memory_usage: int = 1 * GIB  # bytes, per query
    max_rows_to_read: int = 10_000_000_000
    max_result_rows: int = 1_000_000

    def settings(self) -> dict[str, Any]:
        """As ClickHouse settings (the overflow modes are ClickHouse's default, throw)."""
        return dataclasses.asdict(self)

    def within(self, ceiling: ReadLimits) -> ReadLimits:
        """The tighter of these limits and `ceiling`'s, limit by limit: a client may
        lower what the store's owner allows, never raise it."""
        values = {}
        for name, mine in dataclasses.asdict(self).items():
            theirs = getattr(ceiling, name)
            values[name] = theirs if not mine else mine if not theirs else min(mine, theirs)
        return ReadLimits(**values)

    @classmethod
    def from_mapping(cls, values: LimitRequest, base: ReadLimits | None = None) -> ReadLimits:
        """`base` (default: the defaults) with the limits `values` names (a JSON object
        of some of them); `ValueError` for anything else."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown read limit(s): {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"read limit {name} must be a number >= 0")
            out[name] = float(value) if name == "max_execution_time" else int(value)
        return dataclasses.replace(base or cls(), **out)


DEFAULT_READ_LIMITS = ReadLimits()

# The Linux nice value of a read-only query's threads (ClickHouse `os_thread_priority`):
# under CPU contention the commit path's threads (nice 0) run first. ClickHouse applies
# it only with CAP_SYS_NICE (root, or systemd's AmbientCapabilities=CAP_SYS_NICE, or
# docker's --cap-add SYS_NICE); without it the setting does nothing.
READ_OS_THREAD_PRIORITY = 10


class ReadLimitExceeded(RuntimeError):
    """The server stopped a read-only query at one of its limits (the query's own
    doing: the same query stops again; nothing else is affected)."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit

    @property
    def hint(self) -> str:
        flag = FLAGS.get(self.limit, self.limit)
        return (
            f"narrow the query, or raise the limit with `holonograph query {flag}`"
            f" (0: none; through `serve` or `sink` at most their --read-{flag[2:]})"
        )


def limit_hit(err: BaseException) -> str | None:
    """The read limit whose error `err` is, or None."""
    code = getattr(err, "code", None)
    if not isinstance(code, int):
        found = _CODE.search(str(err))
        code = int(found.group(1)) if found else None
    return _LIMIT_CODES.get(code) if code is not None else None
