"""Where `serve` puts the web UI: at /ui/ on the HTTP API's port (the OTLP/HTTP port, or
`--api-port`'s listener and only there), announced in the start-up banner and by
`--open`; `--no-ui` leaves it out (404) and the API as it was. Its files are package
data, so an installed wheel carries them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from holonograph.ui import UI_PATH, ui_files
from tests.holonograph.cli.test_serve import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

HEADERS = {"x-holonograph-run-mode": "production"}


class Serve:
    def __init__(self, data_dir: Path, *flags: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "holonograph", "serve", "--data-dir", str(data_dir),
             "--grpc-port", "0", "--http-port", "0", *flags],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.stdout = self.process.stdout

    def lines_until(self, prefix: str) -> list[str]:
        lines: list[str] = []
        while not lines or not lines[-1].startswith(prefix):
            lines.append(self.stdout.readline())
            assert lines[-1], lines
        return lines

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, stderr


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def test_the_ui_is_on_the_otlp_http_port_by_default_and_gone_with_no_ui(data_dir: Path) -> None:
    on = Serve(data_dir)
    try:
        lines = on.lines_until("web UI")
        http = re.search(r"(http://127\.0\.0\.1:\d+)/v1/traces", "".join(lines))
        assert http and lines[-1].strip() == f"web UI     {http[1]}{UI_PATH}"
        page = requests.get(http[1] + UI_PATH, timeout=30)
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in page.text
        module = requests.get(http[1] + UI_PATH + "app.js", timeout=30)
        assert module.headers["Content-Type"].startswith("text/javascript")
        assert module.content == ui_files()["app.js"][0]
        assert (
            requests.get(http[1] + "/", timeout=30, allow_redirects=False).headers["Location"]
            == UI_PATH
        )
        assert requests.get(http[1] + UI_PATH + "../tokens.yaml", timeout=30).status_code == 404
        assert requests.get(http[1] + UI_PATH + "nothing.js", timeout=30).status_code == 404
    finally:
        on.stop()

    off = Serve(data_dir, "--no-ui", "--json")
    try:
        info = json.loads(off.stdout.readline())
        assert "ui" not in info
        base = info["http"].removesuffix("/v1/traces")
        assert requests.get(base + UI_PATH, timeout=30).status_code == 404
        assert requests.get(base + UI_PATH + "app.js", timeout=30).status_code == 404
        status = requests.get(base + "/holonograph/status", headers=HEADERS, timeout=60)
        assert status.status_code == 200, status.text  # the API is still served
    finally:
        off.stop()


def test_with_api_port_the_ui_is_on_the_apis_listener_and_open_prints_it(data_dir: Path) -> None:
    served = Serve(data_dir, "--api-port", "0", "--open")
    try:
        lines = served.lines_until("open ")
        text = "".join(lines)
        api = re.search(r"HTTP API   listening on (http://127\.0\.0\.1:\d+)/openapi.json", text)
        http = re.search(r"(http://127\.0\.0\.1:\d+)/v1/traces", text)
        assert api and http
        assert f"web UI     {api[1]}{UI_PATH}\n" in lines
        assert lines[-1] == f"open {api[1]}{UI_PATH}\n"
        assert requests.get(api[1] + UI_PATH, timeout=30).status_code == 200
        assert requests.get(http[1] + UI_PATH, timeout=30).status_code == 404
    finally:
        served.stop()


def test_the_wheel_carries_the_ui_files() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '"holonograph.ui" = ["static/*.html", "static/*.js", "static/*.css"]' in text
    static = {p.name for p in (ROOT / "holonograph" / "ui" / "static").iterdir()}
    assert set(ui_files()) == static  # nothing there that the patterns would leave out
    assert {"index.html", "app.js", "style.css"} <= static


def test_the_ui_shares_the_apis_tls_and_its_api_calls_the_tokens_scopes(tmp_path: Path) -> None:
    from tests.holonograph.api.test_api import READER, SDK, live_serve

    with live_serve(tmp_path, tmp_path / "data") as served:
        page = requests.get(served.url + UI_PATH, verify=str(served.ca_file), timeout=30)
        assert page.status_code == 200 and served.url.startswith("https://")
        assert "connect-src 'self'" in page.headers["Content-Security-Policy"]
        with pytest.raises(requests.exceptions.SSLError):  # the certificate is the API's
            requests.get(served.url + UI_PATH, timeout=30)
        # What the overview asks, with the tokens a user could paste into the page.
        for token, code in ((READER, 200), (SDK, 403)):
            answer = served.call("/holonograph/activity", token=token, method="GET")
            assert answer.status_code == code, answer.text
