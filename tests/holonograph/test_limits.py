"""Every job's queries run within its read limits (`holonograph.limits`): over a store
where a limit is tiny, drift, compare and completeness stop with one sentence naming
the job, the limit and its value, exit 2 on the CLI (no traceback) and 422
`read_limit_exceeded` over HTTP; a config file's section of the command raises or
lowers one job's limit; every job has its defaults in the one table."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner, Result

from holonograph.api import mount_api
from holonograph.cli import cli
from holonograph.limits import JOB_LIMITS, job_limits
from ingest.edge.auth import Authenticator
from ingest.service.routes import ApiContext
from ingest.service.workers import StoreWorkers
from ingest.store.clickhouse import open_store
from ingest.store.limits import ReadLimits
from ingest.store.reader import StoreSessions
from schemas.migrations import apply_migrations
from schemas.times import utc_now
from testkit import multiplex
from testkit.multiplex import MultiplexSpec
from tests.test_architecture import JOB_MODULES

pytestmark = pytest.mark.clickhouse

WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]
SURFACE = MultiplexSpec().surface_id
HEADERS = {"x-holonograph-run-mode": "production", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("limits") / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(), 7)
    finally:
        store.close()
    return path


def run(data_dir: Path, *args: str, config: Path | None = None) -> Result:
    head = ["--config", str(config)] if config else []
    return CliRunner().invoke(cli, [*head, *args, "--data-dir", str(data_dir)])


@pytest.mark.parametrize(
    "command",
    [
        ["drift", "--surface", SURFACE, *WINDOW],
        ["compare", "--surface", SURFACE, *WINDOW],
        ["completeness", *WINDOW],
    ],
    ids=["drift", "compare", "completeness"],
)
def test_a_job_over_its_rows_limit_exits_2_with_one_sentence(
    data_dir: Path, command: list[str]
) -> None:
    done = run(data_dir, *command, "--max-rows-to-read", "10")
    assert done.exit_code == 2, done.output
    job = command[0]
    assert (
        f"error: {job}: the query read more than 10 rows (max_rows_to_read); narrow the window"
        " or raise --max-rows-to-read" in done.stderr
    )
    assert "hint: the command's --max-rows-to-read N" in done.stderr
    assert "Traceback" not in done.output
    # The same command within its defaults answers.
    assert run(data_dir, *command, "--json").exit_code in (0, 1)


def test_a_memory_limit_is_said_in_bytes(data_dir: Path) -> None:
    done = run(data_dir, "drift", "--surface", SURFACE, *WINDOW, "--max-memory-usage", "1000")
    assert done.exit_code == 2, done.output
    assert "drift: the query needed more than 1,000 bytes of memory (max_memory_usage)" in (
        done.stderr
    )


def test_a_config_file_section_sets_one_jobs_limit(data_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "holonograph.yaml"
    config.write_text("drift:\n  max-rows-to-read: 10\n")
    limited = run(data_dir, "drift", "--surface", SURFACE, *WINDOW, config=config)
    assert limited.exit_code == 2, limited.output
    assert "drift: the query read more than 10 rows" in limited.stderr
    other = run(data_dir, "compare", "--surface", SURFACE, *WINDOW, "--json", config=config)
    assert other.exit_code in (0, 1), other.output  # the section is drift's alone
    # The flag wins over the file.
    raised = run(data_dir, "drift", "--surface", SURFACE, *WINDOW, "--max-rows-to-read", "0",
                 "--json", config=config)  # fmt: skip
    assert raised.exit_code in (0, 1), raised.output
    assert json.loads(raised.stdout)["surfaceId"] == SURFACE


def test_the_http_api_answers_the_envelope_within_the_owners_ceiling(data_dir: Path) -> None:
    url = f"chdb://{data_dir}"

    async def call() -> tuple[int, Any]:
        application = web.Application()
        sessions = StoreSessions(url, limits=ReadLimits(max_rows_to_read=10))
        workers = StoreWorkers(sessions, 1)
        mount_api(application, ApiContext(Authenticator(None), workers, utc_now))
        body = {"surfaceId": SURFACE, "since": WINDOW[1], "until": WINDOW[3]}
        try:
            async with TestClient(TestServer(application)) as client:
                reply = await client.post("/lens/attribute", data=json.dumps(body), headers=HEADERS)
                return reply.status, await reply.json()
        finally:
            workers.close()
            sessions.close()

    status, envelope = asyncio.run(call())
    assert status == 422, envelope
    assert envelope["code"] == "read_limit_exceeded"
    # The owner's ceiling (10) is what stopped it, below drift's default.
    assert envelope["error"] == (
        "drift: the query read more than 10 rows (max_rows_to_read); narrow the window or"
        " raise --max-rows-to-read"
    )
    assert envelope["details"] == {"limit": "max_rows_to_read", "value": 10, "job": "drift"}


def test_every_job_has_its_limits_in_the_one_table() -> None:
    names = {importlib.import_module(name).JOB.name for name in JOB_MODULES}
    assert names <= set(JOB_LIMITS), sorted(names - set(JOB_LIMITS))
    assert job_limits("drift", {"max_rows_to_read": 5})["max_rows_to_read"] == 5
    defaults = ReadLimits()
    for limits in JOB_LIMITS.values():  # never above what a read-only query gets anyway
        assert limits.within(defaults) == limits
