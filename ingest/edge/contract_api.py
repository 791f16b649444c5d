"""`POST /holonograph/contract` and `GET /holonograph/contract?agentId=A` on the OTLP/HTTP
port: register and read back surface contracts, behind the same TLS and bearer auth
as OTLP.

A token's tenant owns the contracts it registers; a token restricted to agents may
register and read only those. Registering needs the `govern` scope, reading `read` or
`govern`. `x-holonograph-run-mode` is required, fail-closed
(missing or unknown: 400). Every error answers the Guide's envelope
`{"error", "code", "details"}`; success answers the ContractSummary. Where a
registration goes (the store, or the contracts topic with `--kafka`) is the
`Registrar`'s business, wired by the service.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web
from pydantic import ValidationError

from ingest.edge.auth import Authenticator
from ingest.edge.json_api import ApiError, JsonApi, read_json, require_agent, require_scope
from ingest.export.principal import Principal
from schemas.contracts import Contract, ContractSummary, problems

CONTRACT_PATH = "/holonograph/contract"
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


class ContractApi(JsonApi):
    def __init__(self, authenticator: Authenticator, registrar: Registrar) -> None:
        super().__init__(authenticator)
        self._registrar = registrar

    async def post(self, request: web.Request) -> web.Response:
        return await self.answer(request, self._register)

    async def get(self, request: web.Request) -> web.Response:
        return await self.answer(request, self._read)

    async def _register(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        require_scope(principal, "govern")
        document = await read_json(request, MAX_CONTRACT_BYTES, "a contract")
        try:
            contract = Contract.model_validate(document)
        except ValidationError as err:
            raise ApiError(
                400, "invalid_contract", "the contract is invalid; nothing was registered",
                {"problems": problems(err)},
            ) from None  # fmt: skip
        require_agent(principal, contract.agent_id)
        summary, created = await self._registrar.register(principal.tenant_id, contract)
        return summary.to_json() | {"created": created}

    async def _read(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        require_scope(principal, "read", "govern")
        agent = request.query.get("agentId", "").strip()
        if not agent:
            raise ApiError(400, "agent_id_missing", "the agentId query parameter is required")
        require_agent(principal, agent)
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
