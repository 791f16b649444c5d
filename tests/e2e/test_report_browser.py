"""`holonograph report` opened in headless Chromium (Debian's `chromium`, which `.ci/run`
installs where it can) over the DevTools protocol: the page renders (a screenshot that
is not blank), makes no network request (the protocol's Network events of the page,
proven to show one from a page that does fetch; every connection of the browser goes
to a proxy of the test's, so nothing leaves the machine), and the numbers on it equal
those of `compare --json` and `completeness --json` for the same window."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.tables import QUARANTINE
from testkit import multiplex
from testkit.browser import CHROMIUM, Visit, chromium
from testkit.multiplex import MultiplexSpec
from testkit.readings import seed_readings
from testkit.shown import compare_metrics as shown_compare

pytestmark = pytest.mark.clickhouse

SPEC = MultiplexSpec(lost=(5, 6, 7))
WINDOW = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]
AS_OF = ["--as-of", "2026-06-01T07:30:00Z"]
SINCE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


class LoggingProxy:
    """Where the browser's connections go: a loopback listener on a free port that
    records the first line of each request and answers 502, so nothing leaves."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    line = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
                    self.requests.append(line or "(connection without a request)")
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    self.requests.append("(connection)")

    def close(self) -> None:
        self._server.close()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if CHROMIUM is None:
        pytest.skip(
            "Debian's chromium is not installed (`apt-get install -y chromium`, which .ci/run"
            " does as root where apt-get can)"
        )
    base = tmp_path_factory.mktemp("report")
    data_dir = base / "store"
    store = open_store(f"chdb://{data_dir}")
    try:
        apply_migrations(store)
        multiplex.seed(store, SPEC, 7)
        seed_readings(store, SPEC.surface_id, SINCE)
        store.insert(
            QUARANTINE.qualified,
            [["default", "q-1", SINCE + dt.timedelta(minutes=3), "unknown run mode: prod", "x"]],
            QUARANTINE.pick("tenant_id", "quarantine_id", "received_at", "reason", "span_name"),
        )
    finally:
        store.close()
    runner = CliRunner()
    page = base / "report.html"
    common = ["--data-dir", str(data_dir)]
    written = runner.invoke(cli, ["report", *WINDOW, *AS_OF, "--out", str(page), *common])
    assert written.exit_code == 0, written.output
    compared = runner.invoke(
        cli, ["compare", "--surface", SPEC.surface_id, *WINDOW, *common, "--json"]
    )
    assert compared.exit_code == 1, compared.output  # the better vendor is significant
    complete = runner.invoke(cli, ["completeness", *WINDOW, *AS_OF, *common, "--json"])
    assert complete.exit_code == 1, complete.output  # three lost ordinals
    proxy = LoggingProxy()
    try:
        yield {
            "base": base,
            "page": page,
            "proxy": proxy,
            "compare": json.loads(compared.stdout),
            "completeness": json.loads(complete.stdout),
        }
    finally:
        proxy.close()


METRICS = (
    "JSON.stringify(Array.from(document.querySelectorAll('[data-metric]'),"
    " e => [e.dataset.metric, e.textContent.trim()]))"
)


def _visit(outputs: dict[str, Any], page: Path, expression: str | None = None) -> Visit:
    async def run() -> Visit:
        async with chromium(outputs["base"] / f"profile-{page.stem}", outputs["proxy"].port) as b:
            return await b.visit(page.as_uri(), expression)

    return asyncio.run(run())


def test_the_page_renders_without_a_single_network_request(outputs: dict[str, Any]) -> None:
    from PIL import Image

    visit = _visit(outputs, outputs["page"])
    assert visit.requests == [outputs["page"].as_uri()], "the page requested more than itself"
    with Image.open(io.BytesIO(visit.screenshot)) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
        inked = sum(n for n, c in colours if sum(c) < 600)
        (outputs["base"] / "report.png").write_bytes(visit.screenshot)
    assert rgb.height > 1600, "the whole page was captured"
    assert len(colours) > 50, "a blank (or single-colour) screenshot"
    assert inked > 0.01 * rgb.width * rgb.height, "hardly anything drawn"


def test_a_page_that_fetches_is_seen_fetching(outputs: dict[str, Any]) -> None:
    fetching = outputs["base"] / "fetching.html"
    fetching.write_text('<html><body><img src="http://report.example/pixel.png"></body></html>')
    visit = _visit(outputs, fetching)
    assert "http://report.example/pixel.png" in visit.requests


def test_the_numbers_on_the_page_are_those_of_compare_and_completeness(
    outputs: dict[str, Any],
) -> None:
    shown = dict(json.loads(_visit(outputs, outputs["page"], METRICS).value))
    expected = shown_compare(outputs["compare"], adjusted=True)
    totals = outputs["completeness"]["totals"]
    for name in ("streams", "expected", "delivered", "missing", "missingInRange", "duplicates"):
        expected[f"completeness/totals/{name}"] = str(totals[name])
    expected["completeness/totals/biasedSurfaceWindows"] = str(totals["biasedSurfaceWindows"])
    for status, n in totals["byStatus"].items():
        expected[f"completeness/totals/byStatus/{status}"] = str(n)
    for stream in outputs["completeness"]["streams"]:
        expected[f"completeness/streams/{stream['stream']}/status"] = stream["status"]
        expected[f"completeness/streams/{stream['stream']}/missing"] = str(stream["missing"])
    expected["variance/classify-intent/correctness"] = "viable"
    expected["quarantine/total"] = "1"
    assert {k: shown.get(k) for k in expected} == expected
    assert len(expected) > 40
