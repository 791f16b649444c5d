"""A job's command is its flags plus a renderer (`processors.jobs`, `holonograph.runner`).

    @click.command("completeness")
    @request_option(Request, "since", "--since")      # type, default, help: the field's
    ...
    @tenant_option
    @store_options
    def completeness_command(tenant, store_url, data_dir, as_json, **flags):
        request = request_from(Request, {**flags, "tenant": tenant})  # exit 2 naming a flag
        run_command(JOB, request, Rendering(text, notes), store_url=store_url,
                    data_dir=data_dir, as_json=as_json)

`run_command` is the runner's CLI caller: the tenant (`--tenant`, else the store's
only one), run, persist, then `report.to_json()` with --json (the HTTP API's body,
byte for byte the same document) or the renderer's text, the renderer's notes on
stderr, and exit 1 when `job.finding(report)`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import annotated_types
import click
from pydantic import ValidationError
from pydantic_core import PydanticUndefined

from holonograph.cli import leaving
from holonograph.cli.errors import EXIT_FINDING, EXIT_USAGE, CommandFailed
from holonograph.cli.options import (
    CLOCK_KEY,
    LIMIT_HELP,
    RFC3339,
    emit_json,
    open_store_or_exit,
)
from holonograph.limits import JobOverLimit
from holonograph.runner import execute, freshen, scope
from ingest.store.limits import LimitRequest
from processors.jobs import Job, JobError, JobRequest, Report
from schemas.readonce import read_once
from schemas.store import Store
from schemas.times import Clock, utc_now

F = TypeVar("F", bound=Callable[..., Any])
RequestT = TypeVar("RequestT", bound=JobRequest)
ReportT = TypeVar("ReportT", bound=Report)


def _bare(annotation: Any) -> tuple[Any, bool]:
    """The annotation without `| None` and `Annotated[...]`, and whether it is a
    repeatable (tuple or list) of its item type."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return str, False  # a choice of shapes: the flag passes its text
            annotation = members[0]
        elif origin in (tuple, list):
            item = typing.get_args(annotation)[0]
            return _bare(item)[0], True
        else:
            return annotation, False


def _param_type(annotation: Any, metadata: list[Any]) -> click.ParamType[Any] | None:
    if typing.get_origin(annotation) is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(annotation)])
    if annotation is dt.datetime:
        return RFC3339()
    if annotation in (int, float):
        bounds: dict[str, Any] = {}
        for item in metadata:
            if isinstance(item, annotated_types.Ge):
                bounds["min"] = item.ge
            elif isinstance(item, annotated_types.Gt):
                bounds.update(min=item.gt, min_open=True)
            elif isinstance(item, annotated_types.Le):
                bounds["max"] = item.le
            elif isinstance(item, annotated_types.Lt):
                bounds.update(max=item.lt, max_open=True)
        if annotation is int:
            return click.IntRange(**bounds) if bounds else click.INT
        return click.FloatRange(**bounds) if bounds else click.FLOAT
    return None


def request_option(
    request: type[JobRequest], name: str, *decls: str, **overrides: Any
) -> Callable[[F], F]:
    """A click option for the field `name` of a job's Request, its value passed under
    the field's name: its type, range, choices, help and default all come from the
    field. A bool field is an on/off flag."""
    info = request.model_fields[name]
    annotation, repeatable = _bare(info.annotation)
    default = None if info.default is PydanticUndefined else info.default
    options: dict[str, Any] = {"help": info.description or ""}
    if annotation is bool:
        options.update(is_flag=True, default=bool(default))
    else:
        options["type"] = _param_type(annotation, info.metadata)
        if repeatable:
            options["multiple"] = True
        elif default is not None:
            options.update(default=default, show_default=True)
    options.update(overrides)
    return click.option(*decls, name, **options)


def request_from(request: type[RequestT], flags: Mapping[str, Any]) -> RequestT:
    """The Request from the flags given (by field name; unset ones take the model's
    default), or exit 2 naming each flag whose value the model refuses."""
    given = {k: v for k, v in flags.items() if k in request.model_fields and v not in (None, ())}
    try:
        return request.model_validate(given)
    except ValidationError as err:
        raise CommandFailed(_problems(request, err), EXIT_USAGE) from None


def _problems(request: type[JobRequest], err: ValidationError) -> str:
    """Each problem under the flag of its field (pydantic names fields by alias)."""
    ctx = click.get_current_context(silent=True)
    flags = {p.name: p.opts[0] for p in (ctx.command.params if ctx else []) if p.opts}
    for name, info in request.model_fields.items():
        if info.alias and name in flags:
            flags[info.alias] = flags[name]
    problems = []
    for error in err.errors():
        message = error["msg"].removeprefix("Value error, ")
        where = ".".join(str(part) for part in error["loc"])
        if not where:  # the whole request's: its fields by their flags
            for alias, flag in flags.items():
                message = re.sub(rf"\b{re.escape(alias)}\b", flag, message)
            problems.append(message)
            continue
        problems.append(f"{flags.get(str(error['loc'][0]), where)}: {message}")
    return "; ".join(problems)


LIMITS_KEY = "holonograph.job_limits"


def _keep_limit(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    if value is not None and param.name:
        ctx.meta.setdefault(LIMITS_KEY, {})[param.name] = value


def job_limit_options(func: F) -> F:
    """`--max-rows-to-read` and the other read limits of the job's queries
    (`holonograph.limits`), left out of the command's parameters: `report_of` reads
    them. A config file's section of the command sets them as any other flag."""
    for name, text in reversed(LIMIT_HELP.items()):
        decimal = name == "max_execution_time"
        kind: click.ParamType[Any] = click.FloatRange(min=0) if decimal else click.IntRange(min=0)
        func = click.option(
            f"--{name.replace('_', '-')}",
            name,
            type=kind,
            expose_value=False,
            callback=_keep_limit,
            help=f"{text.format(who='each query of the job')}"
            " [the job's default, holonograph/limits.py; 0: none].",
        )(func)
    return func


def given_limits() -> LimitRequest:
    """The read limits the current command's flags set (`job_limit_options`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return {}
    found: dict[str, float] = {}
    while ctx is not None:
        found = {**ctx.meta.get(LIMITS_KEY, {}), **found}
        ctx = ctx.parent
    return found


@dataclass(frozen=True)
class Rendering(Generic[ReportT]):
    """How a command shows its job's report without --json: `text` on stdout, and
    `notes` (warnings, what a write did) on stderr, with --json too."""

    text: Callable[[ReportT], str]
    notes: Callable[[ReportT], Iterable[str]] = field(default=lambda report: ())


class CommandStores:
    """The runner's `StoreAccess` for a command: the store `--store`/`--data-dir` names,
    through its owner's admin endpoint while `serve` or `sink` holds it; any failure to
    reach it is exit 3 (a bad URL: 2). Each connection is opened once per command (and
    the store migrated once), and closed by `close`. On a chDB directory the command
    opens itself, the first unscoped reader is scoped to the store's only tenant
    (`storeaccess.connect`), so the runner's tenant lookup and that tenant's reads run
    on one connection. `own_statements`: the job runs only its own code's statements
    (`storeaccess.connect`): its readers skip the statement gate. Once `close` has
    closed them all, the process may end without the interpreter's teardown
    (`holonograph.cli.leaving`)."""

    def __init__(
        self, store_url: str | None, data_dir: str | None, *, own_statements: bool = False
    ) -> None:
        self._url = store_url
        self._dir = data_dir
        self._own = own_statements
        self._open: dict[tuple[bool, str | None, tuple[tuple[str, float], ...]], Store] = {}

    def _store(self, write: bool, tenant: str | None, limits: LimitRequest | None) -> Store:
        key = (write, tenant, tuple(sorted((limits or {}).items())))
        if key not in self._open:
            first = not self._open
            if first:
                leaving.hold()
            store = open_store_or_exit(
                self._url, self._dir, write=write, tenant=tenant, limits=limits,
                migrate=first, only_tenant=first and not write and tenant is None,
                own_statements=self._own and not write,
            )  # fmt: skip
            self._open[key] = store
            scoped = getattr(store, "tenant", None) if tenant is None and not write else None
            if isinstance(scoped, str):  # the store's only tenant: its reads share it
                self._open.setdefault((False, scoped, key[2]), store)
        return self._open[key]

    @contextlib.contextmanager
    def reading(self, tenant: str | None, limits: LimitRequest | None = None) -> Iterator[Store]:
        yield self._store(False, tenant, limits)

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        yield self._store(True, None, None)

    def may_refresh(self) -> bool:
        """Whether this command may rewrite derived tables before it answers: an
        embedded store (its own, or through the owner's admin endpoint). A server's
        store is refreshed by its `sink`, and the command's user may be its reader."""
        from ingest.store.url import is_embedded, store_url

        return is_embedded(store_url(self._url, self._dir))

    def close(self) -> None:
        opened, self._open = self._open, {}
        for store in {id(store): store for store in opened.values()}.values():
            store.close()
        if opened:
            leaving.release()


def command_clock() -> Clock:
    """The clock a command's jobs run with: the root context's `obj["clock"]` (tests),
    else the wall clock (`options.command_now` reads the same one for relative flags)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    clock: Clock = obj.get(CLOCK_KEY, utc_now) if isinstance(obj, dict) else utc_now
    return clock


def report_of(
    job: Job[RequestT, ReportT],
    requests: Sequence[RequestT],
    store_url: str | None,
    data_dir: str | None,
    *,
    own_statements: bool = False,
) -> list[ReportT]:
    """The runner for a command, one report per request on the same connections: scope,
    run, persist; a request the job refuses is exit 2 with its message and hint.
    `own_statements`: every statement the job (and the runner for it) sends is written
    in this code base with its values bound on the server, never a user's text (see
    `CommandStores`): said only for a job whose queries are known to be so."""
    stores = CommandStores(store_url, data_dir, own_statements=own_statements)
    clock = command_clock()
    limits = given_limits()
    try:
        return [_scoped_run(job, r, stores, clock, limits) for r in requests]
    except JobError as err:
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    except JobOverLimit as err:  # the request's to narrow, or the flag's to raise
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    finally:
        stores.close()


def _scoped_run(
    job: Job[RequestT, ReportT],
    request: RequestT,
    stores: CommandStores,
    clock: Clock,
    limits: LimitRequest | None,
) -> ReportT:
    """`scope`, then `run_fresh`, reading what they share once (the store's tables)."""
    with read_once():
        return run_fresh(job, scope(job, request, stores, limits), stores, clock, limits)


def run_fresh(
    job: Job[RequestT, ReportT],
    request: RequestT,
    stores: CommandStores,
    clock: Clock,
    limits: LimitRequest | None = None,
) -> ReportT:
    """`execute`, after refreshing the completeness windows the job reads when they lag
    its range and the command may write (said on stderr): a drift straight after a
    backfill brackets the backfill's loss instead of missing it. Windows found fresh
    are not read again by the job (`schemas.readonce.read_once`)."""
    with read_once():
        if stores.may_refresh():
            found = freshen(job, request, stores, clock, limits)
            if found is not None and found.stale:
                click.echo(
                    "refreshed the completeness windows first: events of this range arrived"
                    " after their last refresh",
                    err=True,
                )
        return execute(job, request, stores, clock, limits)


def run_command(
    job: Job[RequestT, ReportT],
    request: RequestT,
    rendering: Rendering[ReportT],
    *,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    own_statements: bool = False,
) -> None:
    """Run `job` for `request` (its tenant: `request.tenant`, else the store's only one),
    show the report, and exit 1 when it is a finding. `own_statements`: see
    `report_of`."""
    (report,) = report_of(job, [request], store_url, data_dir, own_statements=own_statements)
    show(report, rendering, as_json)
    if job.finding(report):
        sys.exit(EXIT_FINDING)


def show(report: Report, rendering: Rendering[Any], as_json: bool) -> None:
    for note in rendering.notes(report):
        click.echo(note, err=True)
    if as_json:
        emit_json(report.to_json())
    else:
        click.echo(rendering.text(report))
