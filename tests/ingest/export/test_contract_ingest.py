"""Ingest held to the contract, through the official OpenTelemetry exporters and the
real receiver: what the contract forbids is rejected with the column, the value and
the allowed values; what it does not know is stored with its finding and counted;
every event records the contract version it was checked against."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.cli import cli
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.url import chdb_path
from schemas.contracts import Contract
from schemas.registry import register
from schemas.times import utc_now
from tests.conftest import RunningReceiver
from tests.otel_emit import Dim, Evaluation, export_grpc, export_http, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "contracts" / "billing-triage.json"
AGENT = {"holonograph.agent.id": "billing-triage"}


def contract(change: Callable[[dict[str, Any]], None] | None = None) -> Contract:
    document = json.loads(EXAMPLE.read_text())
    surface = document["surfaces"][0]
    surface["substrateColumns"].append(
        {"id": "region", "control": "platform", "visibility": "announced",
         "semantic": "deployment-state", "values": ["eu", "us"]}
    )  # fmt: skip
    if change is not None:
        change(document)
    return Contract.model_validate(document)


def conforming(seq: int, **extra: Any) -> Evaluation:
    return Evaluation(
        stream="strm_c",
        seq=seq,
        dims=[Dim("correctness", score=0.9), Dim("schema-conformance", passed=True)],
        extra={
            **AGENT,
            "holonograph.light_source.id": "anthropic/claude-sonnet-5",
            "holonograph.substrate.prompt_hash": "v2",
            "holonograph.substrate.region": "eu",
            "holonograph.cohort_tags": ["customer-tier=enterprise", "severity=high"],
            **extra,
        },
    )


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def stored(store: ClickHouseStore) -> dict[str, tuple[str, list[str]]]:
    rows = store.query(
        "SELECT event_id, contract_version_id, contract_findings"
        " FROM holonograph.evaluation_events FINAL"
    ).rows
    return {e: (v, list(f)) for e, v, f in rows}


def reasons(store: ClickHouseStore) -> dict[str, str]:
    rows = store.query(
        "SELECT JSONExtractString(attributes, 'holonograph.event.id'), reason"
        " FROM holonograph.quarantine FINAL"
    ).rows
    return dict(rows)


def metric(receiver: RunningReceiver, line_start: str) -> float:
    text = requests.get(f"{receiver.admin_endpoint}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def registered(store: ClickHouseStore) -> Iterator[tuple[RunningReceiver, str]]:
    version = register(store, "default", contract(), utc_now()).version.version_id
    running = RunningReceiver(store)
    yield running, version
    running.stop()


def test_enum_and_type_violations_are_rejected_with_the_reason(
    registered: tuple[RunningReceiver, str], store: ClickHouseStore
) -> None:
    receiver, version = registered
    spans = record_spans(
        [
            conforming(0),
            conforming(1, **{"holonograph.substrate.region": "apac"}),
            conforming(2, **{"holonograph.cohort_tags": ["severity=extreme"]}),
            Evaluation("strm_c", 3, dims=[Dim("correctness", passed=True)], extra=AGENT),
            Evaluation("strm_c", 4, dims=[Dim("schema-conformance", score=1.0)], extra=AGENT),
        ]
    )
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    assert stored(store) == {"evt_strm_c_0": (version, [])}
    suffix = f"; contract version {version}"
    assert reasons(store) == {
        "evt_strm_c_1": "contract: holonograph.substrate.region: 'apac' is not an allowed value"
        " of column region (allowed: eu, us)" + suffix,
        "evt_strm_c_2": "contract: holonograph.cohort_tags: severity=extreme: 'extreme' is not"
        " an allowed value of column severity (allowed: low, medium, high)" + suffix,
        "evt_strm_c_3": "contract: dimension correctness: declared type score, the outcome has"
        " no score (holonograph.dimension.score)" + suffix,
        "evt_strm_c_4": "contract: dimension schema-conformance: declared type boolean, the"
        " outcome needs holonograph.dimension.passed and no score" + suffix,
    }
    reason = 'holonograph_spans_rejected_total{reason="contract: holonograph.substrate.*"}'
    assert metric(receiver, reason) == 1


def test_each_flag_kind_is_stored_and_counted(
    registered: tuple[RunningReceiver, str], store: ClickHouseStore
) -> None:
    receiver, version = registered
    spans = record_spans(
        [
            conforming(0, **{"holonograph.cohort_tags": ["vip", "multiplex.role=primary"]}),
            Evaluation("strm_f", 1, dims=[Dim("tone", score=0.5)], extra=AGENT),
            conforming(2, **{"holonograph.substrate.retrieval_rev": "r7"}),
            conforming(3, **{"holonograph.light_source.id": "google/gemini-2-pro"}),
            # a multiplex observer, routed only in eval and production
            conforming(4, **{"holonograph.light_source.id": "openai/gpt-5"}),
            Evaluation("strm_f", 5, run_mode="test", dims=[],
                       extra={**AGENT, "holonograph.light_source.id": "openai/gpt-5"}),
            Evaluation("strm_f", 6, surface="summarize", extra=AGENT),
            Evaluation("strm_f", 7, extra={"holonograph.agent.id": "other-agent"}),
            # no agent id: the only contract declaring the surface
            Evaluation("strm_f", 8, dims=[Dim("correctness", score=0.1)]),
            # a version of a routed light source, and one requested as it: both routed
            conforming(9, **{"holonograph.light_source.id": "anthropic/claude-sonnet-5/2026-05"}),
            conforming(10, **{"holonograph.light_source.id": "sonnet-5-0513",
                              "holonograph.light_source.requested": "anthropic/claude-sonnet-5"}),
            # a prefix not at a / boundary is another light source
            conforming(11, **{"holonograph.light_source.id": "anthropic/claude-sonnet-5x"}),
        ]
    )  # fmt: skip
    assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    assert stored(store) == {
        "evt_strm_c_0": (version, ["undeclared-cohort-tag:vip"]),
        "evt_strm_f_1": (version, ["undeclared-dimension:tone"]),
        "evt_strm_c_2": (version, ["undeclared-substrate-column:retrieval_rev"]),
        "evt_strm_c_3": (version, ["unrouted-light-source:google/gemini-2-pro"]),
        "evt_strm_c_4": (version, []),
        "evt_strm_f_5": (version, ["unrouted-light-source:openai/gpt-5"]),
        "evt_strm_f_6": (version, ["undeclared-surface:summarize"]),
        "evt_strm_f_7": ("", ["no-contract"]),
        "evt_strm_f_8": (version, []),
        "evt_strm_c_9": (version, []),
        "evt_strm_c_10": (version, []),
        "evt_strm_c_11": (version, ["unrouted-light-source:anthropic/claude-sonnet-5x"]),
    }
    assert reasons(store) == {}
    counted = {
        kind: metric(receiver, f'holonograph_contract_findings_total{{kind="{kind}"}}')
        for kind in ("undeclared-cohort-tag", "undeclared-dimension", "undeclared-substrate-column",
                     "unrouted-light-source", "undeclared-surface", "no-contract")
    }  # fmt: skip
    assert counted == {
        "undeclared-cohort-tag": 1, "undeclared-dimension": 1, "undeclared-substrate-column": 1,
        "unrouted-light-source": 3, "undeclared-surface": 1, "no-contract": 1,
    }  # fmt: skip


def test_a_registration_is_enforced_by_the_running_receiver(
    registered: tuple[RunningReceiver, str], store: ClickHouseStore
) -> None:
    receiver, first = registered

    def allow_apac(document: dict[str, Any]) -> None:
        document["surfaces"][0]["substrateColumns"][-1]["values"] = ["eu", "us", "apac"]

    # registered by another connection, as `holonograph contract register` does
    other = store.reopen()
    try:
        second = register(other, "default", contract(allow_apac), utc_now()).version.version_id
    finally:
        other.close()

    def enforced() -> bool:
        active = receiver.service.contracts.active("default", "billing-triage")
        return active is not None and active.version_id == second

    wait_until(enforced, timeout=5)
    spans = record_spans([conforming(9, **{"holonograph.substrate.region": "apac"})])
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    assert stored(store) == {"evt_strm_c_9": (second, [])}
    assert first != second


def test_no_contract_registered_flags_every_evaluation(
    receiver: RunningReceiver, store: ClickHouseStore
) -> None:
    spans = record_spans([Evaluation("strm_n", 0)])
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    assert stored(store) == {"evt_strm_n_0": ("", ["no-contract"])}
    assert reasons(store) == {}


def test_replay_after_a_contract_change_rechecks_against_the_new_version(
    registered: tuple[RunningReceiver, str], store: ClickHouseStore
) -> None:
    receiver, first = registered
    spans = record_spans([conforming(0, **{"holonograph.cohort_tags": ["severity=critical"]})])
    assert export_http(receiver.http_endpoint, spans) is SpanExportResult.SUCCESS
    assert "'critical' is not an allowed value" in reasons(store)["evt_strm_c_0"]

    def allow_critical(document: dict[str, Any]) -> None:
        document["surfaces"][0]["substrateColumns"][2]["values"].append("critical")

    data_dir = chdb_path(store.url)
    unchanged = CliRunner().invoke(cli, ["replay", "--from", "quarantine", "--data-dir", data_dir])
    assert unchanged.exit_code == 1 and "1 still rejected" in unchanged.output
    changed = CliRunner().invoke(
        cli, ["contract", "register", "-", "--data-dir", data_dir, "--json"],
        input=json.dumps(contract(allow_critical).to_json()),
    )  # fmt: skip
    assert changed.exit_code == 0, changed.output
    second = json.loads(changed.output)["versionId"]
    replayed = CliRunner().invoke(
        cli, ["replay", "--from", "quarantine", "--data-dir", data_dir, "--json"]
    )
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.output)["replayed"] == 1
    assert stored(store) == {"evt_strm_c_0": (second, [])}
    assert first != second
