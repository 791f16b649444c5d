"""The provisioned dashboards in the real Grafana, where Docker exists (the containers
backend): Grafana of the compose file's image, environment and provisioning mount, and
a ClickHouse server with compose's users (the read-only `holonograph_reader` the data
source logs in as), both on one Docker network where the server is `clickhouse`, the
host the data source file names. Through Grafana's HTTP API: healthy, exactly the six
dashboards, each loaded without a provisioning error, the data source's health check
OK, and on a seeded store the Evaluations panels' own queries answer through the
plugin with the rows the same SQL returns on the server.

`tests/deploy/test_dashboards.py` checks every query on chDB wherever the suite runs;
this one is the plugin, Grafana's provisioning and the reader's rights for real.
Variables are substituted the way Grafana's frontend does before it posts a query
(`interpolate`): /api/ds/query expands only the plugin's backend macros."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from ingest.store.clickhouse import ClickHouseStore
from processors.completeness.job import recompute_completeness
from testkit import multiplex
from testkit.backends import (
    STARTUP_TIMEOUT_SECONDS,
    Backends,
    clickhouse_container,
    compose_service,
    container_image,
    fresh_store,
)
from tests.deploy.test_dashboards import (
    DASHBOARDS,
    DATASOURCE_UID,
    INTERVAL_S,
    SCHEMA_VERSION,
    SINCE,
    SPEC,
    UNTIL,
    expand,
    interpolate,
)

pytestmark = pytest.mark.clickhouse

ADMIN = ("admin", "admin")  # Grafana's first-start administrator
GRAFANA_PORT = 3000
FOLDER = "Holonograph"
PROVISIONED_SECONDS = 60  # dashboards are provisioned beside the HTTP server's start
NOT_CONTAINERS = (
    "Grafana and ClickHouse run in containers: HOLONOGRAPH_TEST_BACKEND=containers (needs"
    " Docker); tests/deploy/test_dashboards.py checks the queries on chDB"
)


@dataclass(frozen=True)
class Grafana:
    url: str
    http: requests.Session
    store: ClickHouseStore  # the same server, as the suite's administrator
    logs: Callable[[], tuple[bytes, bytes]]  # the Grafana container's stdout, stderr

    def get(self, path: str) -> Any:
        response = self.http.get(self.url + path, timeout=30)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()


def _healthy(body: str) -> bool:
    """/api/health once Grafana's database is up (plugins are installed before)."""
    try:
        health = json.loads(body)
    except ValueError:
        return False
    return isinstance(health, dict) and health.get("database") == "ok"


@pytest.fixture(scope="module")
def grafana(
    backends: Backends, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Grafana]:
    if backends.name != "containers":
        pytest.skip(NOT_CONTAINERS)
    request.getfixturevalue("docker_engine")  # skips with the reason when Docker is absent
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    clickhouse = compose_service("clickhouse")
    service = compose_service("grafana")
    passwords = {k: v for k, v in clickhouse.environment.items() if k.startswith("HOLONOGRAPH_")}
    reader_password = service.environment["HOLONOGRAPH_READER_PASSWORD"]
    assert passwords["HOLONOGRAPH_READER_PASSWORD"] == reader_password
    with (
        Network() as network,
        clickhouse_container(
            container_image("clickhouse"),
            network=network,
            aliases=("clickhouse",),
            environment=passwords,
            mounts=clickhouse.mounts,  # deploy/clickhouse users.d and config.d
        ) as server,
    ):
        store = fresh_store(tmp_path_factory.mktemp("grafana"), server)
        try:
            multiplex.seed(store, SPEC, 7)
            recompute_completeness(store, UNTIL)
            container = (
                DockerContainer(service.image)
                .with_envs(**service.environment)
                .with_network(network)
                .with_exposed_ports(GRAFANA_PORT)
                .waiting_for(
                    HttpWaitStrategy(GRAFANA_PORT, "/api/health")
                    .for_response_predicate(_healthy)
                    .with_startup_timeout(STARTUP_TIMEOUT_SECONDS)
                )
            )
            for mount in service.mounts:  # deploy/grafana/provisioning, read-only
                container.with_volume_mapping(mount.host, mount.container, mount.mode)
            with container, requests.Session() as http:
                http.auth = ADMIN
                host = container.get_container_host_ip()
                url = f"http://{host}:{container.get_exposed_port(GRAFANA_PORT)}"
                yield Grafana(url, http, store, container.get_logs)
        finally:
            store.close()


def _ms(at: dt.datetime) -> str:
    return str(int(at.timestamp() * 1000))


def _query(grafana: Grafana, target: dict[str, Any], sql: str) -> dict[str, list[Any]]:
    """The target with `sql` through POST /api/ds/query over the seeded day: its one
    frame as columns, after checking no error came back."""
    query = {**target, "refId": "A", "rawSql": sql}
    query |= {"intervalMs": INTERVAL_S * 1000, "maxDataPoints": 1000}
    body: dict[str, Any] = {"queries": [query], "from": _ms(SINCE), "to": _ms(UNTIL)}
    response = grafana.http.post(f"{grafana.url}/api/ds/query", json=body, timeout=60)
    assert response.status_code == 200, f"{response.status_code} {response.text}\n{sql}"
    result = response.json()["results"]["A"]
    assert not result.get("error"), f"{result['error']}\n{sql}"
    assert result.get("status", 200) == 200, result
    frames = result["frames"]
    for frame in frames:
        notices = (frame["schema"].get("meta") or {}).get("notices") or []
        assert not [n for n in notices if n.get("severity") == "error"], notices
    assert len(frames) == 1, f"{len(frames)} frames: {frames}"
    fields = frames[0]["schema"]["fields"]
    values = frames[0].get("data", {}).get("values") or [[] for _ in fields]
    return {field["name"]: list(column) for field, column in zip(fields, values, strict=True)}


def _variables(grafana: Grafana, board: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Each variable's values, fetched as Grafana's frontend fetches them: the query
    variables' own SQL through /api/ds/query."""
    options: dict[str, list[str]] = {}
    for variable in board["templating"]["list"]:
        if variable["type"] == "custom":
            options[variable["name"]] = variable["query"].split(",")
        elif variable["type"] == "query":
            target = {"datasource": variable["datasource"], "editorType": "sql", "format": 1}
            columns = _query(grafana, target, interpolate(variable["query"], current, options))
            options[variable["name"]] = [str(v) for v in next(iter(columns.values()), [])]
    return options


def test_grafana_is_healthy(grafana: Grafana) -> None:
    health = grafana.get("/api/health")
    assert health["database"] == "ok", health
    version = compose_service("grafana").image.rpartition(":")[2]
    assert health["version"] == version, health


def test_exactly_the_six_dashboards_are_provisioned(grafana: Grafana) -> None:
    expected = {(b["uid"], b["title"]) for b in DASHBOARDS.values()}
    assert len(expected) == 6
    deadline = time.monotonic() + PROVISIONED_SECONDS
    while True:
        found = {(d["uid"], d["title"]) for d in grafana.get("/api/search?type=dash-db")}
        if found == expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert found == expected
    for board in DASHBOARDS.values():
        loaded = grafana.get(f"/api/dashboards/uid/{board['uid']}")
        assert loaded["dashboard"]["schemaVersion"] == SCHEMA_VERSION, board["uid"]
        assert len(loaded["dashboard"]["panels"]) == len(board["panels"]), board["uid"]
        assert loaded["meta"]["provisioned"] is True, loaded["meta"]
        assert loaded["meta"]["folderTitle"] == FOLDER, loaded["meta"]
    stdout, stderr = grafana.logs()
    lines = (stdout + stderr).decode(errors="replace").splitlines()
    errors = [line for line in lines if "logger=provisioning" in line and "level=error" in line]
    assert not errors, "\n".join(errors)


def test_the_data_source_health_check_is_ok(grafana: Grafana) -> None:
    health = grafana.get(f"/api/datasources/uid/{DATASOURCE_UID}/health")
    assert health["status"] == "OK", health


def _panel_target(board: dict[str, Any], title: str) -> dict[str, Any]:
    (panel,) = [p for p in board["panels"] if p["title"] == title]
    (target,) = panel["targets"]
    assert isinstance(target, dict)
    return target


def test_the_evaluations_panels_answer_with_the_seeded_rows(grafana: Grafana) -> None:
    board = DASHBOARDS["evaluations"]
    current = {v["name"]: v["current"].get("value", "$__all") for v in board["templating"]["list"]}
    current |= {"surface": [SPEC.surface_id], "dimension": ["correctness"]}
    options = _variables(grafana, board, current)
    assert options["tenant"] == ["default"]
    assert SPEC.surface_id in options["surface"] and "correctness" in options["dimension"]
    for title, key in (
        ("Pass rate with completeness lower bound", "pass_rate"),  # timeseries, format 0
        ("Pass rate in the window, with completeness", "pass_rate"),  # table, format 1
    ):
        target = _panel_target(board, title)
        columns = _query(grafana, target, interpolate(target["rawSql"], current, options))
        direct = grafana.store.query(expand(target["rawSql"], current, options)).dicts()
        assert direct, f"{title}: the seeded store has no rows for it"
        assert columns[key] == pytest.approx([row[key] for row in direct]), title
        assert all(0 <= rate <= 1 for rate in columns[key]), title
