"""The gate's reading of `EXPLAIN AST`: the statement kind, table functions in source
position, host functions anywhere, an output file; lines a quoted identifier adds can
only make it refuse more. The ASTs are chDB's own (26.9) output."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ingest.store.clickhouse import open_store
from ingest.store.querygate import EngineFunctions, StatementRefused, parser_message, refusal
from ingest.store.reader import open_reader
from schemas.migrations import apply_migrations

SELECT_FILE = """\
SelectWithUnionQuery (children 1)
 ExpressionList (children 1)
  SelectQuery (children 2)
   ExpressionList (children 1)
    Asterisk
   TablesInSelectQuery (children 1)
    TablesInSelectQueryElement (children 1)
     TableExpression (children 1)
      Function file (children 1)
       ExpressionList (children 2)
        Literal 'x'
        Literal 'LineAsString'"""

SELECT_NUMBERS = SELECT_FILE.replace("Function file", "Function numbers").replace(
    "        Literal 'LineAsString'\n", ""
)

SCALAR_FILE = """\
SelectWithUnionQuery (children 1)
 ExpressionList (children 1)
  SelectQuery (children 1)
   ExpressionList (children 1)
    Function file (alias f) (children 1)
     ExpressionList (children 1)
      Literal 'x'"""

OUTFILE = """\
SelectWithUnionQuery (children 2)
 ExpressionList (children 1)
  SelectQuery (children 1)
   ExpressionList (children 1)
    Literal UInt64_1
 Literal '/tmp/x'"""

# `FROM file('x') AS `a<newline>   Function numbers``: the alias adds a line.
SPOOFED = """\
SelectWithUnionQuery (children 1)
 ExpressionList (children 1)
  SelectQuery (children 2)
   ExpressionList (children 1)
    Asterisk
   TablesInSelectQuery (children 1)
    TablesInSelectQueryElement (children 1)
     TableExpression (children 1)
      Function file (alias a
   Function numbers) (children 1)
       ExpressionList (children 1)
        Literal 'x'"""

EXPLAIN_JSON = """\
Explain EXPLAIN (children 2)
 Set
 SelectWithUnionQuery (children 1)
  ExpressionList (children 1)
   SelectQuery (children 1)
    ExpressionList (children 1)
     Literal UInt64_1"""


def _lines(text: str) -> list[str]:
    return text.split("\n")


@pytest.mark.parametrize(
    ("ast", "reason"),
    [
        (SELECT_FILE, "table function file()"),
        (SCALAR_FILE, "function file()"),
        (OUTFILE, "INTO OUTFILE"),
        (SPOOFED, "table function file()"),
        ("SYSTEM query", "SYSTEM is not a read"),
        ("KillQueryQuery Literal_UInt64_1 ASYNC (children 1)\n Literal UInt64_1", "KillQuery"),
        ("InsertQuery   (children 2)\n Function file (children 1)", "InsertQuery"),
        ("Set", "Set is not a read"),
        ("UseQuery h (children 1)\n Identifier h", "UseQuery"),
        ("Explain EXPLAIN (children 1)\n InsertQuery (children 1)", "EXPLAIN of InsertQuery"),
        ("", "empty"),
    ],
)
def test_refused(ast: str, reason: str) -> None:
    found = refusal(_lines(ast) if ast else [])
    assert found is not None and reason in found


@pytest.mark.parametrize(
    "ast",
    [SELECT_NUMBERS, EXPLAIN_JSON, "ShowTables", "DescribeQuery (children 1)\n TableExpression"],
)
def test_reads_pass(ast: str) -> None:
    assert refusal(_lines(ast)) is None


def test_any_table_function_of_the_server_is_refused_outside_source_position() -> None:
    # `x IN remote(...)` is not a source, but remote is the server's table function.
    ast = SCALAR_FILE.replace("Function file", "Function remote")
    assert refusal(_lines(ast)) is None
    assert "remote()" in (refusal(_lines(ast), table_functions={"remote", "numbers"}) or "")
    assert refusal(_lines(SELECT_NUMBERS), table_functions={"remote", "numbers"}) is None


def test_a_syntax_error_points_into_the_callers_text_not_the_gates(tmp_path: Path) -> None:
    store = open_store(f"chdb://{tmp_path / 'store'}")
    apply_migrations(store)
    store.close()
    reader = open_reader(f"chdb://{tmp_path / 'store'}")
    try:
        with pytest.raises(StatementRefused) as refused:
            reader.query("SELEC 1")
    finally:
        reader.close()
    message = str(refused.value)
    assert "position 7" in message
    assert "formatQuery" not in message and "In scope" not in message
    assert "(and " in message  # the long list of expected tokens is cut short


def test_parser_message_keeps_short_lists_and_other_errors_whole() -> None:
    text = (
        "Code: 62. Syntax error: failed at position 3 (x): x. Expected one of: a, b. (SYNTAX_ERROR)"
    )
    assert parser_message(text) == text


def test_engine_functions_ask_the_server_only_for_a_table_function_called_outside_a_source() -> (
    None
):
    asked: list[tuple[str, ...]] = []

    def ordinary(names: Sequence[str]) -> set[str]:
        asked.append(tuple(names))
        return {"format"} & set(names)

    engine = EngineFunctions(["remote", "format", "numbers", "file"])
    assert not engine.reaches_outside("count", ordinary)  # not a table function: no question
    assert not engine.reaches_outside("numbers", ordinary)  # allowed
    assert engine.reaches_outside("file", ordinary)  # a host function, whatever the server says
    assert asked == []
    assert engine.reaches_outside("remote", ordinary)
    assert not engine.reaches_outside("format", ordinary)  # also an ordinary function
    assert engine.reaches_outside("remote", ordinary)  # answered once, kept
    assert asked == [("remote",), ("format",)]
    ast = SCALAR_FILE.replace("Function file", "Function Remote")
    assert "Remote()" in (refusal(_lines(ast), engine, ordinary) or "")


def test_the_gate_on_a_live_reader_refuses_a_table_function_outside_a_source(
    tmp_path: Path,
) -> None:
    store = open_store(f"chdb://{tmp_path / 'store'}")
    apply_migrations(store)
    store.close()
    reader = open_reader(f"chdb://{tmp_path / 'store'}")
    try:
        with pytest.raises(StatementRefused, match=r"function remote\(\)"):
            reader.query("SELECT 1 IN remote('127.0.0.1', system.one)")
        assert reader.query("SELECT format('{}-{}', 'a', 'b')").rows == [("a-b",)]
        assert reader.query("SELECT count() FROM numbers(3)").rows == [(3,)]
    finally:
        reader.close()
