"""`POST /holonograph/contract` and `GET /holonograph/contract?agentId=A` on the OTLP/HTTP
port: register and read back surface contracts, behind the same TLS and bearer auth
as OTLP.

A token's tenant owns the contracts it registers; a token restricted to agents may
register and read only those. `x-holonograph-run-mode` is required, fail-closed
(missing or unknown: 400). Every error answers the Guide's envelope
`{"error", "code", "details"}`; success answers the ContractSummary. Where a
registration goes (the store, or the contracts topic with `--kafka`) is the
`Registrar`'s business, wired by the service.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web
from pydantic import ValidationError

from ingest.edge.auth import Authenticator
from ingest.errors import RetryableError, Unauthenticated
from ingest.export.principal import Principal
from schemas.contracts import Contract, ContractSummary, problems
from schemas.events import RUN_MODES

CONTRACT_PATH = "/holonograph/contract"
RUN_MODE_HEADER = "x-holonograph-run-mode"
# A contract is a person's document: far below the OTLP request limit.
MAX_CONTRACT_BYTES = 1024 * 1024


class Registrar(Protocol):
    """Where registrations go and where readbacks come from."""

    async def register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        """The summary of the now-active version, and whether it is new."""
        ...

    async def summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None: ...


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


def _run_mode(request: web.Request) -> str:
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


def _may(principal: Principal, agent_id: str) -> None:
    if not principal.may_write(agent_id):
        raise ApiError(
            403, "agent_not_allowed", f"this token may not write agent {agent_id!r}",
            {"agentId": agent_id},
        )  # fmt: skip


async def _document(request: web.Request) -> Any:
    if request.content_type != "application/json":
        raise ApiError(
            415, "unsupported_media_type",
            f"Content-Type {request.content_type!r} is not supported; use application/json",
        )  # fmt: skip
    if request.content_length is not None and request.content_length > MAX_CONTRACT_BYTES:
        raise _too_large()
    body = bytearray()
    async for chunk in request.content.iter_chunked(1 << 16):
        body += chunk
        if len(body) > MAX_CONTRACT_BYTES:
            raise _too_large()
    try:
        return json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError) as err:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {err}") from None


def _too_large() -> ApiError:
    return ApiError(
        413, "payload_too_large", f"a contract is at most {MAX_CONTRACT_BYTES} bytes",
        {"maxBytes": MAX_CONTRACT_BYTES},
    )  # fmt: skip


class ContractApi:
    def __init__(self, authenticator: Authenticator, registrar: Registrar) -> None:
        self._authenticator = authenticator
        self._registrar = registrar

    async def post(self, request: web.Request) -> web.Response:
        return await self._answer(request, self._register)

    async def get(self, request: web.Request) -> web.Response:
        return await self._answer(request, self._read)

    async def _answer(self, request: web.Request, step: Any) -> web.Response:
        try:
            try:
                principal = self._authenticator.authenticate(request.headers.get("Authorization"))
            except Unauthenticated as err:
                raise ApiError(
                    401, "unauthenticated", str(err), headers={"WWW-Authenticate": "Bearer"}
                ) from None
            _run_mode(request)
            body: dict[str, Any] = await step(request, principal)
        except ApiError as err:
            return err.response()
        except RetryableError as err:
            retry = f"{max(1, round(err.retry_after))}"
            return ApiError(503, "unavailable", str(err), headers={"Retry-After": retry}).response()
        return web.json_response(body)

    async def _register(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        document = await _document(request)
        try:
            contract = Contract.model_validate(document)
        except ValidationError as err:
            raise ApiError(
                400, "invalid_contract", "the contract is invalid; nothing was registered",
                {"problems": problems(err)},
            ) from None  # fmt: skip
        _may(principal, contract.agent_id)
        summary, created = await self._registrar.register(principal.tenant_id, contract)
        return summary.to_json() | {"created": created}

    async def _read(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        agent = request.query.get("agentId", "").strip()
        if not agent:
            raise ApiError(400, "agent_id_missing", "the agentId query parameter is required")
        _may(principal, agent)
        version = request.query.get("versionId") or None
        summary = await self._registrar.summary(principal.tenant_id, agent, version)
        if summary is None:
            what = f"version {version} of agent {agent!r}" if version else f"agent {agent!r}"
            raise ApiError(
                404, "not_found", f"no contract registered for {what}",
                {"agentId": agent, **({"versionId": version} if version else {})},
            )  # fmt: skip
        return summary.to_json()


def add_contract_routes(app: web.Application, api: ContractApi) -> None:
    app.router.add_post(CONTRACT_PATH, api.post)
    app.router.add_get(CONTRACT_PATH, api.get)
