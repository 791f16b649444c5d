"""`holonograph query "SQL"`: run SQL against the store, read-only unless --write.

Read-only is decided by the store's side (a read-only connection, or the owner's
read token), so a refused statement is exit 1 and changes nothing; `--tenant T`
shows only tenant T's rows of every table that has a tenant column. A read-only
query runs within read limits (time, memory, rows read, rows returned; through
`serve` or `sink` at most theirs): one it reaches stops the query, exit 1. Ctrl-C
stops the query in the store too."""

from __future__ import annotations

import sys

import click

from holonograph.cli.errors import translate
from holonograph.cli.options import (
    EXIT_FINDING,
    emit_json,
    format_table,
    open_store_or_exit,
    read_limit_options,
    store_options,
)
from ingest.store.limits import ReadLimitExceeded
from schemas.store import QueryResult


@click.command("query")
@click.argument("sql")
@click.option("--write", is_flag=True, help="Allow statements that change the store.")
@click.option("--tenant", metavar="TENANT", help="Only this tenant's rows (read-only).")
@read_limit_options("", "the query")
@store_options
def query_command(
    sql: str,
    write: bool,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    **limit_flags: float | None,
) -> None:
    """Run SQL and print a table (or a JSON array of row objects with --json)."""
    from ingest.redact import redact

    if write and tenant is not None:
        raise click.UsageError("--tenant is a read-only view of the store; drop --write")
    given = {name: value for name, value in limit_flags.items() if value is not None}
    if write and given:
        raise click.UsageError("read limits apply to read-only queries; drop --write")
    store = open_store_or_exit(store_url, data_dir, write=write, tenant=tenant, limits=given)
    try:
        result = store.query(sql)
    except ReadLimitExceeded as err:
        raise translate(err) from None
    except Exception as err:
        click.echo(f"error: {redact(str(err))}", err=True)
        sys.exit(EXIT_FINDING)
    finally:
        store.close()
    result = _named(result)
    if as_json:
        emit_json(result.dicts())
    else:
        click.echo(format_table(result.column_names, result.rows))
        click.echo(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")


def _named(result: QueryResult) -> QueryResult:
    """Rows whose columns the driver did not name (`KILL QUERY` answers bare rows) get
    `column_1`, ... for the missing names: the statement ran, so it prints as a result."""
    width = max((len(row) for row in result.rows), default=len(result.column_names))
    if len(result.column_names) >= width:
        return result
    named = result.column_names + tuple(
        f"column_{i + 1}" for i in range(len(result.column_names), width)
    )
    return QueryResult(named, result.rows)


def register(group: click.Group) -> None:
    group.add_command(query_command)
