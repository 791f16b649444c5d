"""`serve --api-port`: the HTTP API on a listener of its own, behind the same TLS and
bearer tokens, answering what it answers on the OTLP/HTTP port; that port then serves
OTLP only (docs/api.md, "Where")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.holonograph.api.test_api import AS_OF, READER, SDK, Served, _seed, live_serve
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("api-port")
    _seed(root / "data")
    with live_serve(root, root / "data", "--api-port", "0") as live:
        yield live


def _post(served: Served, url: str, body: bytes, content_type: str) -> requests.Response:
    return requests.post(
        url, data=body, verify=str(served.ca_file), timeout=60,
        headers={"Content-Type": content_type, "Authorization": f"Bearer {SDK}",
                 "x-holonograph-run-mode": "production"},
    )  # fmt: skip


def test_the_api_answers_on_its_own_port_behind_the_same_tls_and_tokens(served: Served) -> None:
    assert served.url.startswith("https://") and served.url != served.otlp_url
    request = {"asOf": AS_OF, "refreshIntervalSeconds": 3600}
    answer = served.call("/holonograph/completeness", request, token=READER)
    assert answer.status_code == 200, answer.text
    assert answer.json() == served.cli("completeness", "--as-of", AS_OF, "--refresh-interval",
                                       "3600")  # fmt: skip
    assert served.call("/holonograph/completeness", request, token=None).status_code == 401
    refused = served.call("/holonograph/completeness", request, token=SDK)
    assert (refused.status_code, refused.json()["code"]) == (403, "insufficient_scope")
    absent = served.call("/holonograph/messages", {})
    assert (absent.status_code, absent.json()["code"]) == (501, "not_implemented")
    contract = {"agentId": "billing-triage", "surfaces": [{"id": "classify-intent"}]}
    assert served.call("/holonograph/contract", contract, token=SDK).status_code == 200
    openapi = requests.get(served.url + "/openapi.json", verify=str(served.ca_file), timeout=30)
    assert openapi.json()["openapi"] == "3.1.0"


def test_the_otlp_port_then_serves_otlp_only(served: Served) -> None:
    body = export_request(record_spans([Evaluation("api-port", 0)])).SerializeToString()
    exported = _post(served, served.otlp_url + "/v1/traces", body, "application/x-protobuf")
    assert exported.status_code == 200, exported.text
    on_the_api = _post(served, served.url + "/v1/traces", body, "application/x-protobuf")
    assert on_the_api.status_code == 404
    moved = _post(served, served.otlp_url + "/holonograph/completeness", b"{}", "application/json")
    assert moved.status_code == 404
