"""One error path for every command.

An expected failure (bad usage or configuration, a missing file, a port in use, the
store or the broker unreachable or refusing) becomes one or two lines on stderr,
what failed and what to do, and its documented exit code. Anything else is a bug:
a short message, the full trace written to an owner-only file, and exit 70, so a
script can tell a crash from a finding.

    0    ok
    1    the command ran and found something (a finding, a failed check, SQL refused)
    2    usage or configuration error (bad flag or setting, missing file, port in use;
         a job's query stopped at its read limit: narrow the request or raise it)
    3    store or broker unreachable or refusing
    70   internal error (a bug): the trace is in a file named on stderr
    130  interrupted (Ctrl-C)

Library exceptions are recognised only when their library is already imported: a
failure can only come from a library that ran, and a light command stays light.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import click

from ingest.redact import redact
from schemas.times import rfc3339

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 70  # EX_SOFTWARE in sysexits.h
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 the command found something (a finding, a failed check); "
    "2 usage or configuration error; 3 store or broker unreachable or refusing; "
    "70 internal error (the trace is written to a file named on stderr)."
)

_MAX_MESSAGE = 400


class CommandFailed(click.ClickException):
    """An expected failure: what failed, what to do about it, and its exit code."""

    def __init__(self, message: str, exit_code: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it per class
        self.hint = hint

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)
        if self.hint:
            click.echo(f"hint: {self.hint}", err=True)


def one_line(err: BaseException) -> str:
    """The first line of an error's message, bounded (library messages can be pages),
    with secrets (URL passwords, tokens) masked."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    text = redact(text)
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def root_cause(err: BaseException) -> str:
    """The innermost OS-level reason (`Connection refused`) under a library's wrapping
    of it, else the error's own first line."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return one_line(err)


def _loaded(module: str, name: str) -> type[BaseException] | None:
    """`module.name` if that module was imported (a failure cannot come from one that was not)."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _is(err: BaseException, module: str, name: str) -> bool:
    cls = _loaded(module, name)
    return cls is not None and isinstance(err, cls)


def _store_failure(err: BaseException) -> CommandFailed | None:
    if _is(err, "ingest.store.limits", "ReadLimitExceeded"):
        limit = err.limit  # type: ignore[attr-defined]
        return CommandFailed(
            f"stopped by the read limit {limit}: {one_line(err)}",
            EXIT_FINDING,
            err.hint,  # type: ignore[attr-defined]
        )
    if _is(err, "holonograph.admin_client", "AdminError"):
        return CommandFailed(f"the store refused: {one_line(err)}", EXIT_UNAVAILABLE)
    if _is(err, "clickhouse_connect.driver.exceptions", "OperationalError"):
        return CommandFailed(
            f"store unreachable: {root_cause(err)}",
            EXIT_UNAVAILABLE,
            "check --store/--data-dir and that the ClickHouse server is up",
        )
    if _is(err, "clickhouse_connect.driver.exceptions", "ClickHouseError") or _is(
        err, "ingest.store.embedded", "EmbeddedError"
    ):
        return CommandFailed(f"the store refused: {one_line(err)}", EXIT_UNAVAILABLE)
    if isinstance(err, PermissionError) and err.filename is None:
        return CommandFailed(f"the store refused: {one_line(err)}", EXIT_UNAVAILABLE)
    return None


def _broker_failure(err: BaseException) -> CommandFailed | None:
    if _is(err, "ingest.handoff.kafka_producer", "BrokerRefused"):
        return CommandFailed(redact(err.message), EXIT_UNAVAILABLE, err.hint)  # type: ignore[attr-defined]
    if _is(err, "aiokafka.errors", "KafkaError"):
        return CommandFailed(
            f"Kafka broker: {one_line(err)}", EXIT_UNAVAILABLE, "check --kafka and the broker"
        )
    return None


def _local_failure(err: BaseException) -> CommandFailed | None:
    if _is(err, "ingest.errors", "ListenError"):
        return CommandFailed(
            one_line(err),
            EXIT_USAGE,
            "another process holds the port, or the address is not this host's: stop it,"
            " or pick another port (0 picks a free one)",
        )
    if _is(err, "ingest.store.url", "StoreURLError"):
        return CommandFailed(
            f"invalid store URL {one_line(err)}",
            EXIT_USAGE,
            "--store chdb:///path or http(s)://host:8123, or --data-dir DIR",
        )
    if _is(err, "ingest.edge.tls", "TlsError") or _is(err, "ingest.edge.auth", "TokensFileError"):
        return CommandFailed(f"invalid configuration: {one_line(err)}", EXIT_USAGE)
    if isinstance(err, OSError) and err.filename is not None:
        return CommandFailed(f"{err.filename}: {err.strerror or one_line(err)}", EXIT_USAGE)
    if isinstance(err, ConnectionError):
        return CommandFailed(f"unavailable: {one_line(err)}", EXIT_UNAVAILABLE)
    return None


_RULES: tuple[Callable[[BaseException], CommandFailed | None], ...] = (
    _broker_failure,
    _store_failure,
    _local_failure,
)


def expected_failure(err: BaseException) -> CommandFailed | None:
    """The documented failure `err` is, or None when it is a bug."""
    for rule in _RULES:
        failure = rule(err)
        if failure is not None:
            return failure
    return None


def trace_dir() -> Path:
    """Where traces go: the user's cache directory (XDG), else a per-user temp directory."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "holonograph"


def write_trace(err: BaseException) -> Path:
    """The full trace in a new owner-only file; returns its path. (Its modules are
    imported here: only a failing command needs them.)"""
    import shlex
    import tempfile
    import traceback

    stamp = dt.datetime.now(dt.UTC)
    text = "".join(
        [
            f"time: {rfc3339(stamp)}\n",
            f"command: {redact(shlex.join(['holonograph', *sys.argv[1:]]))}\n",
            f"python: {sys.version.split()[0]}\n\n",
            *traceback.format_exception(err),
        ]
    )
    name = f"trace-{stamp:%Y%m%dT%H%M%SZ}-{os.getpid()}.txt"
    for directory in (trace_dir(), Path(tempfile.gettempdir()) / f"holonograph-{os.getuid()}"):
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = directory / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        return path
    raise OSError("no writable directory for the trace")


def internal_failure(err: BaseException) -> CommandFailed:
    """A bug: say so in one line, keep the trace in a file."""
    message = f"unexpected {type(err).__name__}: {one_line(err)} (a bug in holonograph)"
    try:
        path = write_trace(err)
    except OSError:
        import traceback

        traceback.print_exception(err)  # nowhere to keep it: stderr is all there is
        return CommandFailed(message, EXIT_INTERNAL)
    return CommandFailed(
        message, EXIT_INTERNAL, f"the full trace is in {path}; include it in a bug report"
    )


def translate(err: Exception) -> click.ClickException:
    """The one mapping from an exception a command raised to what the user sees."""
    if isinstance(err, click.ClickException):
        return err
    return expected_failure(err) or internal_failure(err)
