"""The receiver's one seam for routes it does not know: `ReceiverService(routes=[...])`.

`ingest` never imports `processors`, so the analyses' HTTP endpoints are mounted by the
wiring (`holonograph.api`): each `Mount` is called once with the receiver's HTTP
application (the OTLP/HTTP port, behind its TLS and its connection caps) and an
`ApiContext`, and adds its routes. What a mount may use is exactly the context:

    authenticator   the tokens file's principals (bearer auth and scopes)
    workers         the read executor, and through `workers.sessions` per-request
                    connections to the store (None: the receiver holds none, --kafka)
    clock           the receiver's clock
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from ingest.edge.auth import Authenticator
from ingest.service.workers import StoreWorkers
from schemas.times import Clock


@dataclass(frozen=True)
class ApiContext:
    authenticator: Authenticator
    workers: StoreWorkers
    clock: Clock


Mount = Callable[[web.Application, ApiContext], None]
