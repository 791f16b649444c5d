"""The receiver's route seam and the job handler, on the real receiver in-process: every
path the HTTP port serves is in `/openapi.json` (an OpenAPI 3.1 document whose every
reference resolves); an analysis runs on the read executor, stops at a read limit with
422, and a client that goes away (its own timeout) leaves nothing running in the store;
a receiver holding no store answers a job that needs one 501 and runs one that does not."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
import requests
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from holonograph.api import mount_api
from holonograph.api.endpoints import Endpoint
from holonograph.api.handlers import JobApi
from ingest.edge.auth import Authenticator
from ingest.service.routes import ApiContext
from ingest.service.workers import StoreWorkers
from ingest.store.clickhouse import ClickHouseStore
from processors.jobs import Job, JobRequest, saves_nothing
from schemas.store import Store
from schemas.times import Clock, utc_now
from tests.conftest import RunningReceiver
from tests.ingest.service.test_read_isolation import running, slow_read, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SLOW_PATH = "/test/slow"
HEADERS = {"x-holonograph-run-mode": "production", "Content-Type": "application/json"}


class SlowRequest(JobRequest):
    probe: str
    read: Literal["slow", "huge", "none"] = "slow"


@dataclass(frozen=True)
class SlowReport:
    thread: str

    def to_json(self) -> dict[str, str]:
        return {"thread": self.thread}


def slow_run(store: Store, request: SlowRequest, clock: Clock) -> SlowReport:
    if request.read == "slow":
        store.query(slow_read(request.probe))
    elif request.read == "huge":
        store.query("SELECT count() FROM numbers(1000000000000)")
    return SlowReport(threading.current_thread().name)


SLOW = Job("test.slow", SlowRequest, dict[str, str], slow_run, saves_nothing)


def slow_mount(app: web.Application, context: ApiContext) -> None:
    endpoint = Endpoint(SLOW_PATH, SLOW, "read", "A read that runs until stopped.", "")
    app.router.add_post(SLOW_PATH, JobApi(context).handler(endpoint))


@pytest.fixture
def receiver(store: ClickHouseStore) -> Iterator[RunningReceiver]:
    running_receiver = RunningReceiver(
        store, routes=[slow_mount, mount_api], read_max_execution_time=20.0
    )
    yield running_receiver
    running_receiver.stop()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_every_served_path_is_in_the_openapi_document(receiver: RunningReceiver) -> None:
    document = requests.get(f"{receiver.http_endpoint}/openapi.json", timeout=30).json()
    assert document["openapi"] == "3.1.0"
    runner = receiver.service._http
    assert runner is not None and isinstance(runner.app, web.Application)
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in runner.app.router.routes()
        if route.resource is not None and route.method not in ("*", "HEAD")
        and not route.resource.canonical.startswith("/test/")
    }  # fmt: skip
    documented = {(m, path) for path, item in document["paths"].items() for m in item}
    assert served and served <= documented, served - documented
    assert ("post", "/lens/conformance/check") in served
    schemas = document["components"]["schemas"]
    for ref in set(_refs(document)):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas
    check = document["paths"]["/lens/conformance/check"]["post"]
    body = check["requestBody"]["content"]["application/json"]["schema"]
    fields = schemas[body["$ref"].rsplit("/", 1)[1]]["properties"]
    assert {"fixtureId", "fixture", "surfaceId", "since", "until", "runModes"} <= set(fields)
    assert "tenant" not in fields  # the token's, never the body's


def test_an_analysis_runs_on_the_read_executor_and_stops_at_a_read_limit(
    receiver: RunningReceiver,
) -> None:
    url = receiver.http_endpoint + SLOW_PATH
    quick = requests.post(url, json={"probe": "p", "read": "none"}, headers=HEADERS, timeout=30)
    assert quick.status_code == 200, quick.text
    assert quick.json()["thread"].startswith("store-read")  # never the commit path's
    huge = requests.post(url, json={"probe": "p", "read": "huge"}, headers=HEADERS, timeout=30)
    assert huge.status_code == 422, huge.text
    assert huge.json()["code"] == "read_limit_exceeded"
    assert huge.json()["details"]["limit"] == "max_rows_to_read"
    assert huge.json()["error"].startswith("test.slow: the query read more than ")


def test_a_client_that_goes_away_stops_the_analysis_in_the_store(
    receiver: RunningReceiver,
) -> None:
    watcher = receiver.store.reopen()
    probe = f"gone-{secrets.token_hex(6)}"
    url = receiver.http_endpoint + SLOW_PATH
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as client:
            # The client's own deadline: it gives up after 2 s and closes its connection.
            abandoned = client.submit(
                requests.post, url, json={"probe": probe}, headers=HEADERS, timeout=2.0
            )
            wait_until(lambda: running(watcher, probe) == 1, 30, "the analysis running")
            with pytest.raises(requests.exceptions.ReadTimeout):
                abandoned.result(timeout=30)
        started = time.monotonic()
        wait_until(lambda: running(watcher, probe) == 0, 10, "the analysis to stop")
        assert time.monotonic() - started < 10  # well before its 20 s limit would stop it
        again = requests.post(url, json={"probe": "p", "read": "none"}, headers=HEADERS,
                              timeout=30)  # fmt: skip
        assert again.status_code == 200
    finally:
        watcher.close()


def test_a_receiver_without_a_store_runs_what_needs_none_and_501s_the_rest() -> None:
    async def call() -> list[tuple[int, Any]]:
        application = web.Application()
        workers = StoreWorkers(None, 1)
        mount_api(application, ApiContext(Authenticator(None), workers, utc_now))
        answers = []
        async with TestClient(TestServer(application)) as client:
            for path, body in (
                ("/lens/conformance/derive", {"surfaceId": "s", "rules": ["Be polite."]}),
                ("/lens/conformance/check", {"surfaceId": "s"}),
            ):
                reply = await client.post(path, data=json.dumps(body), headers=HEADERS)
                answers.append((reply.status, await reply.json()))
        workers.close()
        return answers

    (derived, checked) = asyncio.run(call())
    assert derived[0] == 200 and derived[1]["coverage"]["rules"] == 1
    assert checked[0] == 501 and checked[1]["code"] == "not_wired"
    assert "holonograph conformance check --store URL" in checked[1]["error"]
