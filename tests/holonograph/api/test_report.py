"""`POST /holonograph/report` through one live `serve` with TLS and bearer tokens (the
module fixture of `test_api`, seeded by it): the body is `holonograph report --json` for
the same request and validates against its document type; `Accept: text/html` answers
the page `report --out` writes, byte for byte; the token's tenant only; read scope."""

from __future__ import annotations

from pathlib import Path

import requests
from click.testing import CliRunner

from holonograph.cli import cli
from tests.holonograph.api.test_api import (
    AS_OF,
    DAY,
    DAY_FLAGS,
    GLOBEX,
    READER,
    SDK,
    Served,
    _documented,
    served,
)

__all__ = ["served"]  # the module-scoped live serve, one for this module

SURFACE = "classify-intent"
REQUEST = {**DAY, "surfaceId": SURFACE, "asOf": AS_OF, "provenances": ["any"]}
FLAGS = [*DAY_FLAGS, "--surface", SURFACE, "--as-of", AS_OF, "--provenance", "any"]


def _page(served: Served, token: str, accept: str) -> requests.Response:
    return requests.post(
        served.url + "/holonograph/report", json=REQUEST, verify=str(served.ca_file), timeout=60,
        headers={"Authorization": f"Bearer {token}", "x-holonograph-run-mode": "production",
                 "Accept": accept},
    )  # fmt: skip


def test_the_report_answers_the_clis_json_for_the_same_request(served: Served) -> None:
    answer = served.call("/holonograph/report", REQUEST, token=READER)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-holonograph-finding"] == "false"
    assert answer.json() == served.cli("report", *FLAGS)
    _documented("/holonograph/report", answer.json())
    body = answer.json()
    assert (body["tenantId"], body["since"], body["asOf"]) == (
        "acme", "2026-07-01T00:00:00Z", AS_OF,
    )  # fmt: skip
    (surface,) = body["surfaces"]
    assert surface["surfaceId"] == "classify-intent"
    assert surface["comparison"]["events"] == 3  # acme's three events, not globex's
    assert [s["stream"] for s in body["completeness"]["streams"]] == ["a-1"]


def test_the_page_is_the_one_report_out_writes(served: Served, tmp_path: Path) -> None:
    page = _page(served, READER, "text/html")
    assert page.status_code == 200, page.text
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
    out = tmp_path / "report.html"
    written = CliRunner().invoke(
        cli, ["report", *FLAGS, "--out", str(out), "--data-dir", str(served.data_dir),
              "--tenant", "acme"],
    )  # fmt: skip
    assert written.exit_code == 0, written.output
    assert page.text == out.read_text(encoding="utf-8")
    assert "Surface classify-intent" in page.text
    # JSON unless the client prefers the page.
    either = _page(served, READER, "application/json;q=0.9, text/html;q=0.5")
    assert either.headers["Content-Type"].startswith("application/json")
    assert _page(served, READER, "*/*").headers["Content-Type"].startswith("application/json")


def test_the_report_is_the_tokens_tenant_only_and_needs_read(served: Served) -> None:
    theirs = served.call("/holonograph/report", REQUEST, token=GLOBEX)
    assert theirs.status_code == 200, theirs.text
    assert theirs.json()["tenantId"] == "globex"
    (surface,) = theirs.json()["surfaces"]
    assert surface["comparison"]["events"] == 1
    assert [s["stream"] for s in theirs.json()["completeness"]["streams"]] == ["g-1"]
    assert "acme" not in _page(served, GLOBEX, "text/html").text
    refused = served.call("/holonograph/report", REQUEST, token=SDK)
    assert (refused.status_code, refused.json()["details"]["required"]) == (403, ["read"])
    assert served.call("/holonograph/report", REQUEST, token=None).status_code == 401
    backwards = served.call("/holonograph/report", {"since": "2026-07-02", "until": "2026-07-01"})
    assert (backwards.status_code, backwards.json()["code"]) == (400, "invalid_request")
