"""Arrivals per minute (`holonograph activity`, GET /holonograph/activity, the web UI's
ingest rate) on a seeded store with an injected clock: every minute listed, the events
received and the spans rejected counted in the minute they arrived, for the tenant
asked only, the totals equal to what `status` counts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import QUARANTINE
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

pytestmark = pytest.mark.clickhouse

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 6, 1, 0, 40, 30, tzinfo=dt.UTC)
# The seeded events all arrive one spacing after the last call: acme's at 00:31
# (30 calls), globex's at 00:29 (8 calls and 20 fallbacks).
ACME = MultiplexSpec(calls=30, fallbacks=0, tenant_id="acme")
GLOBEX = MultiplexSpec(surface_id="answer-question", calls=8, tenant_id="globex")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("activity") / "data"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, ACME, 1)
        multiplex.seed(store, GLOBEX, 2)
        rows = [["acme", f"q{i}", START + dt.timedelta(minutes=35, seconds=i), "bad"]
                for i in range(3)]  # fmt: skip
        rows.append(["acme", "q-old", START + dt.timedelta(minutes=20), "bad"])  # before
        rows.append(["globex", "q-g", START + dt.timedelta(minutes=35), "bad"])
        store.insert(
            QUARANTINE.qualified, rows,
            QUARANTINE.pick("tenant_id", "quarantine_id", "received_at", "reason"),
        )  # fmt: skip
    finally:
        store.close()
    return path


def _cli(data_dir: Path, *args: str) -> Any:
    done = CliRunner().invoke(
        cli, [*args, "--data-dir", str(data_dir), "--json"], obj={"clock": lambda: NOW}
    )
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_every_minute_is_listed_with_what_arrived_in_it(data_dir: Path) -> None:
    doc = _cli(data_dir, "activity", "--tenant", "acme", "--minutes", "15")
    (tenant,) = _cli(data_dir, "status", "--tenant", "acme")["tenants"]
    minutes = [START + dt.timedelta(minutes=26 + i) for i in range(15)]
    assert [m["minute"] for m in doc["perMinute"]] == [
        m.isoformat().replace("+00:00", "Z") for m in minutes
    ]
    busy = {
        m["minute"]: (m["events"], m["rejections"])
        for m in doc["perMinute"]
        if m["events"] or m["rejections"]
    }
    assert busy == {"2026-06-01T00:31:00Z": (tenant["events"], 0), "2026-06-01T00:35:00Z": (0, 3)}
    assert tenant["events"] > 60
    assert (doc["events"], doc["rejections"]) == (tenant["events"], 3)
    assert (doc["since"], doc["until"]) == ("2026-06-01T00:26:00Z", "2026-06-01T00:41:00Z")
    assert doc["tenantId"] == "acme"


def test_a_tenant_sees_only_its_own_arrivals(data_dir: Path) -> None:
    doc = _cli(data_dir, "activity", "--tenant", "globex", "--minutes", "15")
    (tenant,) = _cli(data_dir, "status", "--tenant", "globex")["tenants"]
    busy = {
        m["minute"]: (m["events"], m["rejections"])
        for m in doc["perMinute"]
        if m["events"] or m["rejections"]
    }
    assert busy == {"2026-06-01T00:29:00Z": (tenant["events"], 0), "2026-06-01T00:35:00Z": (0, 1)}


def test_quiet_minutes_are_zeros_and_the_text_says_so(data_dir: Path) -> None:
    done = CliRunner().invoke(
        cli, ["activity", "--tenant", "acme", "--minutes", "5", "--data-dir", str(data_dir)],
        obj={"clock": lambda: NOW},
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "0 event(s) received, 0 span(s) rejected" in done.output
    assert "no minute had an arrival or a rejection" in done.output
    doc = _cli(data_dir, "activity", "--tenant", "acme", "--minutes", "5")
    assert [(m["events"], m["rejections"]) for m in doc["perMinute"]] == [(0, 0)] * 5


def test_minutes_out_of_range_is_a_usage_error(data_dir: Path) -> None:
    done = CliRunner().invoke(cli, ["activity", "--minutes", "0", "--data-dir", str(data_dir)])
    assert done.exit_code == 2
    assert "--minutes" in done.output
