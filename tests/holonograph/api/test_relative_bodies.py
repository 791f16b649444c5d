"""Relative times in HTTP request bodies: `"since": "24h"` is the API's clock minus a day,
parsed by the CLI flags' parser (`schemas.times.parse_moment`), once per request."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from holonograph.api.endpoints import Endpoint
from holonograph.api.handlers import JobApi
from ingest.edge.auth import Authenticator
from ingest.service.routes import ApiContext
from ingest.service.workers import StoreWorkers
from processors.jobs import Job, JobRequest, saves_nothing
from schemas.store import Store
from schemas.times import Clock
from schemas.utctime import UtcTime

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
HEADERS = {"x-holonograph-run-mode": "production", "Content-Type": "application/json"}


class EchoRequest(JobRequest):
    since: UtcTime
    until: UtcTime | None = None


@dataclass(frozen=True)
class EchoReport:
    request: EchoRequest

    def to_json(self) -> dict[str, Any]:
        return self.request.model_dump(mode="json", by_alias=True, exclude={"tenant"})


def echo(store: Store, request: EchoRequest, clock: Clock) -> EchoReport:
    return EchoReport(request)


ECHO = Job("test.echo", EchoRequest, dict[str, str], echo, saves_nothing, uses_store=False)


def _post(*bodies: dict[str, str]) -> list[tuple[int, Any]]:
    async def call() -> list[tuple[int, Any]]:
        application = web.Application()
        workers = StoreWorkers(None, 1)
        context = ApiContext(Authenticator(None), workers, lambda: NOW)
        application.router.add_post(
            "/test/echo", JobApi(context).handler(Endpoint("/test/echo", ECHO, "read", "", ""))
        )
        answers = []
        async with TestClient(TestServer(application)) as client:
            for body in bodies:
                reply = await client.post("/test/echo", data=json.dumps(body), headers=HEADERS)
                answers.append((reply.status, await reply.json()))
        workers.close()
        return answers

    return asyncio.run(call())


def test_a_relative_time_in_a_body_is_the_same_window_as_its_absolute_spelling() -> None:
    relative, absolute, grafana = _post(
        {"since": "24h", "until": "now"},
        {"since": "2026-11-30T09:30:00Z", "until": "2026-12-01T09:30:00Z"},
        {"since": "now-7d"},
    )
    assert (
        relative
        == absolute
        == (200, {"since": "2026-11-30T09:30:00Z", "until": "2026-12-01T09:30:00Z"})
    )
    assert grafana == (200, {"since": "2026-11-24T09:30:00Z", "until": None})


def test_a_time_no_parser_takes_is_400_naming_the_field() -> None:
    ((status, answer),) = _post({"since": "yesterday"})
    assert status == 400 and answer["code"] == "invalid_request"
    assert any(
        p.startswith("since") and "now, or a span before now" in p
        for p in answer["details"]["problems"]
    )
