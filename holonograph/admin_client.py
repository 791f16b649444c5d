"""Client of the loopback admin endpoint of a process that owns an embedded store.

chDB lets one process open a data directory; `serve` and `sink` publish an admin
endpoint in `<data-dir>/.holonograph-admin.json` and every other command reaches
the store through it, implementing the same `Store` protocol. Which token it sends
decides what it may do: the endpoint runs the read token's queries read-only, within
its read limits (or the lower ones a caller asks for). A call given up (Ctrl-C, the
timeout) closes its connection, and the endpoint stops the statement.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ingest.filecheck import UnsafeFile, check_private
from ingest.service.admin_file import ADMIN_FILE
from ingest.store.limits import LimitRequest, ReadLimitExceeded
from schemas import jsoncodec
from schemas.store import QueryResult

# How long a call waits for its answer beyond the query's own time limit.
_TIMEOUT_MARGIN_SECONDS = 30.0
_DEFAULT_TIMEOUT_SECONDS = 600.0


class AdminError(RuntimeError):
    """The admin endpoint refused the call or the store behind it failed."""


def read_admin_file(data_dir: Path) -> dict[str, Any] | None:
    """The published endpoint of a live owner of `data_dir`, or None.

    The file carries tokens and gets this command's SQL, so it is used only when it
    and its directory are this user's alone (`UnsafeFile` otherwise): another user who
    could write either could plant an endpoint of theirs."""
    path = data_dir / ADMIN_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeFile(path, "refusing the admin endpoint file: a symbolic link") from None
        return None
    with os.fdopen(fd, "rb") as handle:
        check_private(os.stat(data_dir), data_dir, "the data directory of the admin file")
        check_private(os.fstat(fd), path, "the admin endpoint file")
        try:
            info = json.loads(handle.read())
        except ValueError:
            return None
    if not isinstance(info, dict) or not _loopback(info.get("url")):
        raise UnsafeFile(path, "refusing the admin endpoint file: its endpoint is not loopback")
    pid = int(info.get("pid", 0))
    if pid <= 0 or not _alive(pid):
        return None
    return info


def _loopback(url: Any) -> bool:
    return isinstance(url, str) and bool(re.fullmatch(r"http://127\.0\.0\.1:\d{1,5}", url))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class AdminStore:
    """`Store` over HTTP to an owner's admin endpoint, with its read or write token;
    with `tenant`, queries see only that tenant's rows; with `limits`, read-only
    queries stop at those limits or the endpoint's, whichever is lower."""

    def __init__(
        self,
        url: str,
        base_url: str,
        token: str,
        tenant: str | None = None,
        limits: LimitRequest | None = None,
    ) -> None:
        self.url = url
        self._base = base_url.rstrip("/")
        self._token = token
        self._tenant = tenant
        self._limits = limits
        self._timeout = _DEFAULT_TIMEOUT_SECONDS
        if limits and limits.get("max_execution_time"):
            self._timeout = limits["max_execution_time"] + _TIMEOUT_MARGIN_SECONDS

    def _call(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self._base + path,
            data=jsoncodec.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return jsoncodec.loads(response.read())
        except urllib.error.HTTPError as err:
            detail, limit = err.read().decode(errors="replace"), None
            with contextlib.suppress(ValueError, AttributeError):
                reply = json.loads(detail)
                detail, limit = reply.get("error", detail), reply.get("limit")
            if isinstance(limit, str):
                raise ReadLimitExceeded(str(detail), limit) from None
            raise AdminError(f"admin endpoint: {detail}") from None
        except urllib.error.URLError as err:
            raise AdminError(f"admin endpoint {self._base} unreachable: {err.reason}") from None
        except TimeoutError:
            raise AdminError(
                f"admin endpoint {self._base}: no answer within {self._timeout:g}s"
                " (the call was given up, and with it the statement)"
            ) from None

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        body: dict[str, Any] = {"sql": sql, "parameters": dict(parameters or {})}
        if self._tenant is not None:
            body["tenant"] = self._tenant
        if self._limits:
            body["limits"] = dict(self._limits)
        reply = self._call("/admin/query", body)
        return QueryResult(tuple(reply["columns"]), [tuple(r) for r in reply["rows"]])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._call("/admin/command", {"sql": sql, "parameters": dict(parameters or {})})

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not rows:
            return
        self._call(
            "/admin/insert",
            {
                "table": table,
                "rows": [list(r) for r in rows],
                "column_names": list(column_names),
                "settings": dict(settings or {}),
            },
        )

    def close(self) -> None:
        return None
