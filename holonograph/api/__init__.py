"""The Guide's HTTP API on the receiver's HTTP port (docs/api.md): the jobs of
`holonograph.api.endpoints`, each the runner's HTTP caller (`holonograph.api.handlers`),
the Guide's other paths answering 501, and `/openapi.json` (`holonograph.api.openapi`).

`mount_api` is the receiver's route seam (`ingest.service.routes.Mount`): `serve` passes
it to `ReceiverService(routes=[mount_api])`, so `ingest` never imports a job.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from holonograph.api.endpoints import ENDPOINTS, NOT_SERVED
from holonograph.api.handlers import JobApi
from holonograph.api.openapi import OPENAPI_PATH, document
from ingest.edge.json_api import ApiError
from ingest.service.routes import ApiContext

__all__ = ["mount_api"]

# Prefixes whose unknown paths (and methods) answer the envelope, not aiohttp's text.
_PREFIXES = ("/lens/", "/holonograph/", "/hil/", "/lessons/", "/fixtures/")


def mount_api(app: web.Application, context: ApiContext) -> None:
    """Add the job endpoints, the 501s, `/openapi.json` and the envelope's 404/405 for
    unknown paths under the API's prefixes to `app`."""
    api = JobApi(context)
    for endpoint in ENDPOINTS:
        app.router.add_route(endpoint.method, endpoint.path, api.handler(endpoint))
    for absent in NOT_SERVED:
        app.router.add_route(absent.method, absent.path, api.not_served(absent))
    text = json.dumps(document())

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="application/json")

    app.router.add_get(OPENAPI_PATH, openapi)
    for prefix in _PREFIXES:
        app.router.add_route("*", prefix + "{tail:.*}", _unknown(app))


def _unknown(app: web.Application) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def unknown(request: web.Request) -> web.Response:
        allowed = sorted(
            route.method
            for route in app.router.routes()
            if route.method != "*" and route.resource is not None
            and route.resource.canonical == request.path
        )  # fmt: skip
        if allowed:
            use = ", ".join(allowed)
            return ApiError(
                405, "method_not_allowed", f"{request.method} {request.path}: use {use}",
                {"allowed": allowed}, {"Allow": use},
            ).response()  # fmt: skip
        return ApiError(
            404, "not_found", f"no such endpoint: {request.method} {request.path}",
            {"path": request.path, "openapi": OPENAPI_PATH},
        ).response()  # fmt: skip

    return unknown
