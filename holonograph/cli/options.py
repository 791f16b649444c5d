"""Options and output helpers every sub-command shares.

Imported by the command group itself (`--help` too), so it loads no models: a flag's
vocabulary comes from its schema when a command applies the flag."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, get_args

import click

from holonograph.cli.errors import EXIT_FINDING as EXIT_FINDING
from holonograph.cli.errors import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
from holonograph.cli.errors import EXIT_USAGE as EXIT_USAGE
from holonograph.cli.errors import CommandFailed, expected_failure, one_line
from ingest.redact import RedactingFormatter, redact, redact_url
from ingest.store.limits import DEFAULT_READ_LIMITS, LimitRequest
from ingest.store.url import DEFAULT_DATA_DIR
from ingest.store.url import store_url as resolve_store_url
from schemas import jsoncodec
from schemas.store import Store
from schemas.times import Clock, parse_moment, rfc3339, utc_now

F = TypeVar("F", bound=Callable[..., Any])


def choice_of(vocabulary: Any, *extra: str) -> click.Choice[str]:
    """A `click.Choice` of a schema's `Literal` (plus `extra` words such as "any"), so a
    flag accepts exactly the values the schema does."""
    return click.Choice([*get_args(vocabulary), *extra])


def run_mode_option(func: F) -> F:
    """`--run-mode` (repeatable): only events of these run modes; none given, every mode."""
    from schemas.events import RunMode

    return click.option(
        "--run-mode", "run_modes", multiple=True, type=choice_of(RunMode), help="Only these modes."
    )(func)


def series_options(func: F) -> F:
    """`--role` and `--light-source`: which series of a multiplexed surface to read
    (`processors.series.cells.SELECTION_FILTER`)."""
    from schemas.analysis import Role

    func = click.option(
        "--light-source",
        "light_source",
        default="",
        metavar="ID",
        help="Only events that answered for this light source (served as it, a version of"
        " it, or requested as it).",
    )(func)
    return click.option(
        "--role",
        type=choice_of(Role),
        default="primary",
        show_default=True,
        help="On a multiplexed surface: what the agent used (primary, with events without a"
        " role), the observers, or all events blended.",
    )(func)


def provenance_option(func: F) -> F:
    """`--provenance` (repeatable), read by `provenance_filter`."""
    from schemas.events import Provenance

    return click.option(
        "--provenance",
        "provenances",
        multiple=True,
        type=choice_of(Provenance, "any"),
        help="Default production-state; 'any' disables the filter.",
    )(func)


def provenance_filter(provenances: Sequence[str]) -> tuple[str, ...]:
    """The provenances an analysis reads: production-state unless told, none with 'any'."""
    if "any" in provenances:
        return ()
    return tuple(provenances) or ("production-state",)


def store_options(func: F) -> F:
    """`--store URL`, `--data-dir DIR` and `--json`, the same on every command."""
    func = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(
        func
    )
    func = click.option(
        "--data-dir",
        envvar="HOLONOGRAPH_DATA_DIR",
        type=click.Path(file_okay=False),
        help=f"Shorthand for --store chdb:///DIR (default {DEFAULT_DATA_DIR}).",
    )(func)
    func = click.option(
        "--store",
        "store_url",
        envvar="HOLONOGRAPH_STORE",
        help="chdb:///path or http(s)://host:8123.",
    )(func)
    return func


LIMIT_HELP = {
    "max_execution_time": "Seconds {who} may run",
    "max_memory_usage": "Bytes {who} may use",
    "max_rows_to_read": "Rows {who} may read",
    "max_result_rows": "Rows {who} may return",
}


def read_limit_options(prefix: str, who: str) -> Callable[[F], F]:
    """`--{prefix}max-execution-time` and the other read limits (`ingest.store.limits`),
    each defaulting to `DEFAULT_READ_LIMITS`; 0 is no limit."""

    def decorate(func: F) -> F:
        for name, text in reversed(LIMIT_HELP.items()):
            default = getattr(DEFAULT_READ_LIMITS, name)
            kind: click.ParamType[Any] = (
                click.FloatRange(min=0) if isinstance(default, float) else click.IntRange(min=0)
            )
            shown = f"{default:g}" if isinstance(default, float) else f"{default:,}"
            help_text = f"{text.format(who=who)} [{shown}; 0: none]."
            func = click.option(f"--{prefix}{name.replace('_', '-')}", type=kind, help=help_text)(
                func
            )
        return func

    return decorate


def read_options(func: F) -> F:
    """`serve` and `sink`: the admin endpoint's query workers and read limits."""
    func = read_limit_options("read-", "a read-only query")(func)
    return click.option(
        "--read-workers", type=click.IntRange(min=1), help="Admin queries run at once [4]."
    )(func)


def open_store_or_exit(
    store_url: str | None,
    data_dir: str | None,
    *,
    write: bool = False,
    tenant: str | None = None,
    limits: LimitRequest | None = None,
    migrate: bool = True,
    only_tenant: bool = False,
    own_statements: bool = False,
) -> Store:
    """The store named by the options; any failure to reach it is exit 3 (a bad URL: 2,
    through the one error path). `migrate`, `only_tenant`, `own_statements`: see
    `storeaccess.connect`."""
    from holonograph import storeaccess

    url = resolve_store_url(store_url, data_dir)  # StoreURLError: exit 2 (cli.errors)
    try:
        return storeaccess.connect(
            url,
            write=write,
            tenant=tenant,
            limits=limits,
            migrate=migrate,
            only_tenant=only_tenant,
            own_statements=own_statements,
        )
    except FileNotFoundError as err:  # no store there yet
        raise CommandFailed(one_line(err), EXIT_UNAVAILABLE) from None
    except Exception as err:
        raise store_unavailable(store_url or data_dir, err) from None


def refuse_if_held(url: str) -> None:
    """Before `serve` or `sink` opens an embedded store: another live process holding
    the directory is one clear line naming its PID (exit 3), not the engine's lock
    error. Other commands reach a held store through its owner; a second owner cannot."""
    from pathlib import Path

    from holonograph.admin_client import read_admin_file
    from ingest.filecheck import UnsafeFile
    from ingest.store.url import chdb_path, is_embedded

    if not is_embedded(url):
        return
    directory = Path(chdb_path(url))
    try:
        info = read_admin_file(directory) if directory.is_dir() else None
    except UnsafeFile:
        # A file that is not this user's alone names no holder we can trust; serve makes
        # the tree owner-only itself, and the engine's lock still refuses a second owner.
        info = None
    if info is None:
        return
    pid = info.get("pid")
    raise CommandFailed(
        f"{directory} is already in use by holonograph process {pid} (admin {info['url']})",
        EXIT_UNAVAILABLE,
        f"stop it first (kill {pid}), or give this one another --data-dir; every other"
        " command reaches the store through the running process",
    )


def store_unavailable(url: str | None, err: Exception) -> CommandFailed:
    """Opening the store failed: its documented failure, else exit 3 naming the store."""
    failure = expected_failure(err)
    if failure is not None and failure.exit_code != EXIT_UNAVAILABLE:
        return failure
    reason, hint = (failure.format_message(), failure.hint) if failure else (one_line(err), None)
    where = f" {redact_url(url)}" if url else ""
    return CommandFailed(f"cannot open store{where}: {reason}", EXIT_UNAVAILABLE, hint)


def invalid_configuration(err: Exception) -> CommandFailed:
    """A settings error (pydantic's or a store URL's) as one line naming the setting, its
    flag and its environment variable: exit 2, before any socket opens."""
    from pydantic import ValidationError

    if not isinstance(err, ValidationError):
        return CommandFailed(f"invalid configuration: {one_line(err)}", EXIT_USAGE)
    problems = []
    for error in err.errors():
        message = error["msg"].removeprefix("Value error, ")
        field = ".".join(str(part) for part in error["loc"])
        if field:
            flag, env = "--" + field.replace("_", "-"), "HOLONOGRAPH_" + field.upper()
            message = f"{field} ({flag} or {env}): {message}"
        problems.append(message)
    return CommandFailed(redact("invalid configuration: " + "; ".join(problems)), EXIT_USAGE)


class _UTCFormatter(RedactingFormatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return rfc3339(dt.datetime.fromtimestamp(record.created, dt.UTC))


def configure_logging(verbose: bool) -> None:
    """One line per event, RFC 3339 UTC time first, secrets redacted, for the
    long-running commands."""
    handler = logging.StreamHandler()
    handler.setFormatter(_UTCFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    quiet_libraries(not verbose)


def quiet_libraries(quiet: bool = True) -> None:
    """The HTTP client libraries log each retry of a failure we report once, in our words."""
    # urllib3.connectionpool: clickhouse-connect resets the `urllib3` level on import.
    for name in ("urllib3.connectionpool", "clickhouse_connect"):
        logging.getLogger(name).setLevel(logging.ERROR if quiet else logging.NOTSET)


CLOCK_KEY = "clock"


def command_now(ctx: click.Context | None) -> dt.datetime:
    """ "Now" for one command, read once so every relative flag of it (`--since 24h
    --until now`) counts from the same moment: the clock in the root context's `obj`
    (`{"clock": ...}`, the tests' seam), else the wall clock."""
    if ctx is None:
        return utc_now()
    root = ctx.find_root()
    if "holonograph.now" not in root.meta:
        obj = root.obj if isinstance(root.obj, dict) else {}
        clock: Clock = obj.get(CLOCK_KEY, utc_now)
        root.meta["holonograph.now"] = clock()
    now: dt.datetime = root.meta["holonograph.now"]
    return now


def parse_time(value: str | None, now: dt.datetime | None = None) -> dt.datetime | None:
    """RFC 3339 -> aware UTC datetime (a bare date is midnight UTC); `now`, `24h`, `7d`
    and the other spans of `schemas.times.parse_moment` count back from `now`."""
    if value is None:
        return None
    try:
        return parse_moment(value, now or utc_now())
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


class RFC3339(click.ParamType):  # type: ignore[type-arg]
    """Every time flag: RFC 3339 UTC, a date, `now`, or a span before now (`24h`)."""

    name = "RFC3339"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, dt.datetime):
            return value
        return parse_time(value, command_now(ctx))


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
