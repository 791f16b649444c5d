"""Options and output helpers every sub-command shares."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from holonograph import storeaccess
from schemas import jsoncodec
from schemas.store import Store

F = TypeVar("F", bound=Callable[..., Any])

# Exit codes: 0 ok, 1 the job ran and found a failure, 2 usage/config error,
# 3 store or broker unreachable.
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


def store_options(func: F) -> F:
    """`--store URL`, `--data-dir DIR` and `--json`, the same on every command."""
    func = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(
        func
    )
    func = click.option(
        "--data-dir",
        envvar="HOLONOGRAPH_DATA_DIR",
        type=click.Path(file_okay=False),
        help="Shorthand for --store chdb:///DIR (default ./holonograph-data).",
    )(func)
    func = click.option(
        "--store",
        "store_url",
        envvar="HOLONOGRAPH_STORE",
        help="chdb:///path or http(s)://host:8123.",
    )(func)
    return func


def open_store_or_exit(
    store_url: str | None, data_dir: str | None, *, write: bool = False, tenant: str | None = None
) -> Store:
    from ingest.redact import redact
    from ingest.store import StoreURLError

    try:
        url = storeaccess.store_url_from(store_url, data_dir)
        return storeaccess.connect(url, write=write, tenant=tenant)
    except StoreURLError as err:
        raise click.UsageError(str(err)) from None
    except FileNotFoundError as err:
        click.echo(f"error: {redact(str(err))}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    except Exception as err:
        click.echo(f"error: store unavailable: {redact(str(err))}", err=True)
        sys.exit(EXIT_UNAVAILABLE)


def parse_time(value: str | None) -> dt.datetime | None:
    """RFC 3339 -> aware UTC datetime (a bare date is midnight UTC)."""
    if value is None:
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise click.BadParameter(f"{value!r} has no UTC offset (write it as ...Z)")
    return parsed.astimezone(dt.UTC)


class RFC3339(click.ParamType):  # type: ignore[type-arg]
    name = "RFC3339"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, dt.datetime):
            return value
        return parse_time(value)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(jsoncodec.plain(value), indent=2, sort_keys=False))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 60) -> str:
    """A plain aligned text table, cells cut at `max_width`."""

    def cell(value: Any) -> str:
        value = jsoncodec.plain(value)
        text = value if isinstance(value, str) else json.dumps(value)
        text = text.replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    body = [[cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in body:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in body
    ]
    return "\n".join(lines)
