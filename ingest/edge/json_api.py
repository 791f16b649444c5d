"""What every JSON endpoint on the OTLP/HTTP port shares (the contract registry, the
change events, the analyses `holonograph.api` mounts): bearer auth, the token's
scopes, the fail-closed `x-holonograph-run-mode` header, bounded JSON bodies, and the
Guide's error envelope `{"error", "code", "details"}`.

An endpoint is a `JsonApi` whose steps take the request and the authenticated
`Principal` and return the JSON body of a success (or a whole response); they raise
`ApiError` for a 4xx, the store's `RetryableError` becomes 503 with `Retry-After`,
`ClientGone` ends the request without an answer, and anything else is 500 `internal`
(logged, never a traceback to the client).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ingest.edge.auth import Authenticator
from ingest.errors import RetryableError, Unauthenticated
from ingest.export.principal import Principal, Scope
from ingest.redact import redact
from schemas.events import RUN_MODES

log = logging.getLogger(__name__)

RUN_MODE_HEADER = "x-holonograph-run-mode"
Step = Callable[[web.Request, Principal], Awaitable[Any]]


@dataclass
class ApiError(Exception):
    status: int
    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> web.Response:
        body = {"error": self.message, "code": self.code, "details": self.details}
        return web.json_response(body, status=self.status, headers=self.headers)


def require_run_mode(request: web.Request) -> str:
    mode = request.headers.get(RUN_MODE_HEADER)
    allowed = sorted(RUN_MODES)
    if mode is None or not mode.strip():
        raise ApiError(
            400, "run_mode_missing", f"the {RUN_MODE_HEADER} header is required",
            {"header": RUN_MODE_HEADER, "allowed": allowed},
        )  # fmt: skip
    if mode not in RUN_MODES:
        raise ApiError(
            400, "run_mode_unknown", f"{RUN_MODE_HEADER}: {mode!r} is not a run mode",
            {"header": RUN_MODE_HEADER, "value": mode, "allowed": allowed},
        )  # fmt: skip
    return mode


def require_scope(principal: Principal, *scopes: Scope) -> None:
    """403 `insufficient_scope` unless the token holds one of `scopes`."""
    if not principal.may(*scopes):
        wanted = " or ".join(scopes)
        raise ApiError(
            403, "insufficient_scope",
            f"this token lacks the {wanted} scope: add it to the token's scopes in the"
            " tokens file",
            {"required": list(scopes), "scopes": sorted(principal.scopes)},
            {"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{" ".join(scopes)}"'},
        )  # fmt: skip


def require_agent(principal: Principal, agent_id: str) -> None:
    """403 unless the token may write `agent_id`."""
    if not principal.may_write(agent_id):
        raise ApiError(
            403, "agent_not_allowed", f"this token may not write agent {agent_id!r}",
            {"agentId": agent_id},
        )  # fmt: skip


class ClientGone(Exception):
    """The client closed its connection before its answer: there is nobody to answer."""


# A JSON body is small: one that has not arrived whole by then is not coming (408).
BODY_TIMEOUT_SECONDS = 30.0


async def read_json(
    request: web.Request, max_bytes: int, what: str, timeout: float = BODY_TIMEOUT_SECONDS
) -> Any:
    """The request's JSON body, read at most `max_bytes` of it (413 beyond) within
    `timeout` seconds (408 after)."""
    if request.content_type != "application/json":
        raise ApiError(
            415, "unsupported_media_type",
            f"Content-Type {request.content_type!r} is not supported; use application/json",
        )  # fmt: skip
    too_large = ApiError(
        413, "payload_too_large", f"{what} is at most {max_bytes} bytes", {"maxBytes": max_bytes}
    )
    if request.content_length is not None and request.content_length > max_bytes:
        raise too_large
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.content.iter_chunked(1 << 16):
                body += chunk
                if len(body) > max_bytes:
                    raise too_large
    except TimeoutError:
        raise ApiError(
            408, "body_timeout", f"{what} did not arrive within {timeout:g}s",
            {"timeoutSeconds": timeout},
        ) from None  # fmt: skip
    except ConnectionError:
        raise ClientGone() from None
    try:
        return json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError) as err:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {err}") from None


class JsonApi:
    """Answers a request: authenticate, check the run mode, run the step, map errors."""

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    async def answer(self, request: web.Request, step: Step) -> web.Response:
        try:
            try:
                principal = self._authenticator.authenticate(request.headers.get("Authorization"))
            except Unauthenticated as err:
                raise ApiError(
                    401, "unauthenticated", str(err), headers={"WWW-Authenticate": "Bearer"}
                ) from None
            require_run_mode(request)
            body = await step(request, principal)
        except ApiError as err:
            return err.response()
        except RetryableError as err:
            retry = f"{max(1, round(err.retry_after))}"
            return ApiError(503, "unavailable", str(err), headers={"Retry-After": retry}).response()
        except ClientGone:
            return web.Response(status=499)  # nobody is left to read an answer
        except Exception as err:
            log.exception("%s %s failed", request.method, request.path)
            message = f"internal error: {redact(str(err).splitlines()[0] if str(err) else '')}"
            return ApiError(500, "internal", message.rstrip(": ")).response()
        if isinstance(body, web.Response):
            return body
        return web.json_response(body)
