"""The statement gate of every read-only query path, decided by ClickHouse's parser.

`readonly=1` on the session refuses writes and setting changes, but not everything
that reaches outside the store: chDB still runs `SYSTEM`, `KILL`, `INTO OUTFILE` and
the scalar `file()` under it, and runs every statement of a multi-statement string.
So before a read-only connection runs a statement, the server parses it twice:

1. `formatQuery` with the SQL as a bound parameter: fails unless it is exactly one
   statement (nothing of it is executed);
2. `EXPLAIN AST` of that one statement: the statement kind and every node, which
   `refusal` inspects against allowlists.

Only a read (SELECT, SHOW, DESCRIBE, EXISTS, EXPLAIN of a SELECT) passes; table
functions must be in `ALLOWED_TABLE_FUNCTIONS`; no output file.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from ingest.store.embedded import EmbeddedClient

__all__ = [
    "ALLOWED_STATEMENTS",
    "ALLOWED_TABLE_FUNCTIONS",
    "HOST_FUNCTIONS",
    "EngineFunctions",
    "StatementRefused",
    "check_statement",
    "refusal",
]


class StatementRefused(PermissionError):
    """A read-only path refused the statement before running it (permanent: the same
    statement is refused every time, and nothing of it ran)."""


# Top node of `EXPLAIN AST` for statements that only read.
ALLOWED_STATEMENTS = frozenset(
    {
        "SelectWithUnionQuery",
        "ShowTables",
        "ShowColumns",
        "ShowIndexes",
        "ShowCreateTableQuery",
        "ShowCreateViewQuery",
        "ShowCreateDatabaseQuery",
        "DescribeQuery",
        "ExistsTableQuery",
        "ExistsViewQuery",
        "ExistsDatabaseQuery",
        "Explain",
    }
)

# Table functions that generate rows or wrap a subquery; every other one reads files,
# the network, other databases or processes (file, url, s3, remote, mysql, executable,
# python, ...) or reads a table around additional_table_filters (merge, mergeTreeIndex).
ALLOWED_TABLE_FUNCTIONS = frozenset(
    {
        "numbers",
        "numbers_mt",
        "zeros",
        "zeros_mt",
        "generate_series",
        "generateSeries",
        "generateRandom",
        "values",
        "view",
    }
)

# Ordinary functions that read the host (lower case: function names may be matched
# case-insensitively by the server).
HOST_FUNCTIONS = frozenset({"file", "catboostevaluate"})

_ALLOWED_LOWER = frozenset(name.lower() for name in ALLOWED_TABLE_FUNCTIONS)

# Which of `names` (the server's spellings) the server also knows as ordinary functions.
OrdinaryProbe = Callable[[Sequence[str]], Collection[str]]


class EngineFunctions:
    """The server's table functions that are not also ordinary functions, found as the
    gate needs them: `system.table_functions` is read at once (a few milliseconds),
    `system.functions` (25-250 ms: it describes every function) only for a name that a
    statement calls outside source position and that is a table function, and each
    answer is kept. The same set as `system.table_functions` minus `system.functions`
    read whole, without the read for statements that call no such name (ours)."""

    def __init__(self, table_functions: Iterable[str]) -> None:
        self._by_lower: dict[str, tuple[str, ...]] = {}
        for name in table_functions:
            lower = name.lower()
            self._by_lower[lower] = (*self._by_lower.get(lower, ()), name)
        self._outside: dict[str, bool] = {}
        self._lock = threading.Lock()

    def reaches_outside(self, lower: str, ordinary: OrdinaryProbe) -> bool:
        """Whether the function `lower` (lower case) is one of the server's table
        functions that is not also an ordinary function (`ordinary` asks the server)."""
        if lower in HOST_FUNCTIONS:
            return True
        names = self._by_lower.get(lower)
        if names is None or lower in _ALLOWED_LOWER:
            return False
        with self._lock:
            known = self._outside.get(lower)
        if known is None:
            plain = set(ordinary(names))
            known = any(name not in plain for name in names)
            with self._lock:
                self._outside[lower] = known
        return known


def check_statement(
    client: Client | EmbeddedClient,
    sql: str,
    parameters: Mapping[str, Any],
    *,
    settings: Mapping[str, Any],
    table_functions: Collection[str] | EngineFunctions,
) -> None:
    """Raise `StatementRefused` unless `sql` is one statement that only reads.

    `client` is the read-only connection itself, `settings` what each of its requests
    carries; `table_functions` are the server's table function names that are not
    also ordinary functions (system.table_functions), or an `EngineFunctions` that
    finds them on `client` as needed."""
    try:
        client.query(
            "SELECT formatQuery({holonograph_statement:String})",
            parameters={"holonograph_statement": sql},
            settings=dict(settings),
        )
    except Exception as err:
        if getattr(err, "code", None) is None:  # the connection failed, not the parser
            raise
        raise StatementRefused(
            f"refused: not a single valid statement: {parser_message(_first_line(err))}"
        ) from None
    # A command, not a query: clickhouse-connect appends FORMAT to a query's text,
    # which would become part of the statement explained.
    out = client.command(f"EXPLAIN AST {sql}", parameters=dict(parameters), settings=dict(settings))
    text = (
        out if isinstance(out, str) else "\t".join(map(str, out)) if isinstance(out, list) else ""
    )

    def ordinary(names: Sequence[str]) -> Collection[str]:
        found = client.query(
            "SELECT name FROM system.functions WHERE name IN {names:Array(String)}",
            parameters={"names": list(names)},
            settings=dict(settings),
        ).result_rows
        return {str(name) for (name,) in found}

    lines = text.split("\n") if text else []
    reason = refusal(lines, table_functions, ordinary)
    if reason:
        raise StatementRefused(f"refused on a read-only connection: {reason}")


def refusal(
    ast: Sequence[str],
    table_functions: Collection[str] | EngineFunctions = (),
    ordinary: OrdinaryProbe | None = None,
) -> str | None:
    """Why the statement whose `EXPLAIN AST` lines are `ast` may not run read-only.
    `table_functions`: see `check_statement`; an `EngineFunctions` asks `ordinary`.

    Every node starts a line, indented one space per level. A quoted identifier or
    alias with a line break can add lines that look like nodes, never remove one, so
    each rule below can be made to refuse more, never less."""
    if not ast:
        return "empty statement"
    kind = ast[0].split(" ", 1)[0]
    if kind not in ALLOWED_STATEMENTS:
        return f"{kind} is not a read (only SELECT, SHOW, DESCRIBE, EXISTS, EXPLAIN)"
    for reason in (_output_clause(ast, kind), _functions(ast, table_functions, ordinary)):
        if reason:
            return reason
    return None


def _output_clause(ast: Sequence[str], kind: str) -> str | None:
    for line in ast[1:]:
        if _depth(line) != 1:
            continue
        node = line.strip().split(" ", 1)[0]
        if node == "Literal":  # INTO OUTFILE 'path' [COMPRESSION 'x'] of the statement
            return "INTO OUTFILE writes a file"
        if kind == "Explain" and node not in ("Set", "SelectWithUnionQuery"):
            return f"EXPLAIN of {node} (only EXPLAIN of a SELECT)"
    return None


def _functions(
    ast: Sequence[str],
    table_functions: Collection[str] | EngineFunctions,
    ordinary: OrdinaryProbe | None,
) -> str | None:
    sources = {i + 1 for i, line in enumerate(ast) if line.strip().startswith("TableExpression")}
    outside = _outside(table_functions, ordinary)
    for index, line in enumerate(ast):
        name = _function_name(line)
        if name is None:
            continue
        if index in sources and name not in ALLOWED_TABLE_FUNCTIONS:
            return f"table function {name}() reaches outside the store"
        if outside(name.lower()):
            return f"function {name}() reaches outside the store"
    return None


def _outside(
    table_functions: Collection[str] | EngineFunctions, ordinary: OrdinaryProbe | None
) -> Callable[[str], bool]:
    """Whether a function (its name in lower case) reaches outside the store."""
    if isinstance(table_functions, EngineFunctions):
        if ordinary is None:
            raise ValueError("an EngineFunctions needs a probe of the ordinary functions")
        engine, probe = table_functions, ordinary
        return lambda lower: engine.reaches_outside(lower, probe)
    known = {name.lower() for name in table_functions} - _ALLOWED_LOWER
    return lambda lower: lower in HOST_FUNCTIONS or lower in known


def _function_name(line: str) -> str | None:
    parts = line.strip().split(" ", 2)
    return parts[1] if len(parts) >= 2 and parts[0] == "Function" else None


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


_IN_SCOPE = re.compile(r":? In scope SELECT formatQuery\(.*?\)\.?(?= \([A-Z_]+\)$|$)")
_EXPECTED = re.compile(r"Expected one of: (?P<items>.*?)(?=(?:: In scope|\. \(|\s\([A-Z_]+\)$|$))")
_SHOWN_ALTERNATIVES = 8


def parser_message(text: str) -> str:
    """The parser's complaint about the caller's own text: without the statement
    this module wrapped it in (positions already count from the caller's first
    character), and with a long list of expected tokens cut short."""
    text = _IN_SCOPE.sub("", text)

    def shorten(match: re.Match[str]) -> str:
        items = match["items"].split(", ")
        if len(items) <= _SHOWN_ALTERNATIVES:
            return match[0]
        more = len(items) - _SHOWN_ALTERNATIVES
        return f"Expected one of: {', '.join(items[:_SHOWN_ALTERNATIVES])} (and {more} more)"

    return _EXPECTED.sub(shorten, text)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
