"""Contracts with `serve --kafka`: receivers hold no store, so a registration travels on
the compacted contracts topic. Registered at one receiver, it is enforced by another
within 5 s (Tansu), read by a receiver that starts later, and kept in the store by
the sink, every version."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.cli import cli
from ingest.store.clickhouse import ClickHouseStore
from schemas.changelog import ChangeQuery, list_changes
from schemas.registry import history
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import wait_until
from tests.otel_emit import Dim, Evaluation, export_http, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "contracts" / "billing-triage.json"
AGENT = {"holonograph.agent.id": "billing-triage"}


def register(receiver: KafkaReceiver, document: dict[str, Any]) -> dict[str, Any]:
    response = requests.post(
        f"{receiver.http_endpoint}/holonograph/contract",
        data=json.dumps(document),
        headers={"Content-Type": "application/json", "x-holonograph-run-mode": "production"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def severity(seq: int, value: str) -> Evaluation:
    return Evaluation(
        "strm_k", seq, dims=[Dim("correctness", score=0.5)],
        extra={**AGENT, "holonograph.cohort_tags": [f"severity={value}"]},
    )  # fmt: skip


def test_a_registration_reaches_every_kafka_receiver_within_5s(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    first = KafkaReceiver(broker, names)
    second = KafkaReceiver(broker, names)
    sink = RunningSink(broker, names, store)
    late: KafkaReceiver | None = None
    try:
        v1 = register(first, json.loads(EXAMPLE.read_text()))
        registered = time.monotonic()
        wait_until(
            lambda: (
                (active := second.service.contracts.active("default", "billing-triage")) is not None
                and active.version_id == v1["versionId"]
            ),
            timeout=5,
            what="the second receiver to hold the contract",
        )
        assert time.monotonic() - registered < 5
        spans = record_spans([severity(0, "extreme"), severity(1, "high")])
        assert export_http(second.http_endpoint, spans) is SpanExportResult.SUCCESS
        wait_until(
            lambda: (
                store.query("SELECT count() FROM holonograph.evaluation_events").scalar() == 1
                and store.query("SELECT count() FROM holonograph.quarantine").scalar() == 1
            ),
            what="the sink to store the checked spans",
        )
        assert store.query(
            "SELECT event_id, contract_version_id FROM holonograph.evaluation_events FINAL"
        ).rows == [("evt_strm_k_1", v1["versionId"])]
        reason = str(store.query("SELECT reason FROM holonograph.quarantine FINAL").scalar())
        assert reason.startswith(
            "contract: holonograph.cohort_tags: severity=extreme: 'extreme' is not an allowed"
            " value of column severity (allowed: low, medium, high)"
        )
        # a replacement, read back from the other receiver with its removed[]
        document = json.loads(EXAMPLE.read_text())
        document["surfaces"][0]["cohortTags"] = ["customer-tier"]
        v2 = register(first, document)
        wait_until(
            lambda: (
                (active := second.service.contracts.active("default", "billing-triage")) is not None
                and active.version_id == v2["versionId"]
            ),
            timeout=5,
            what="the replacement",
        )
        read = requests.get(
            f"{second.http_endpoint}/holonograph/contract",
            params={"agentId": "billing-triage"},
            headers={"x-holonograph-run-mode": "production"},
            timeout=30,
        ).json()
        assert read["removed"] == [
            {"altitude": "tag", "surfaceId": "classify-intent", "id": "fix_tier",
             "supersededBy": None}
        ]  # fmt: skip
        # a receiver started now reads the topic before it serves
        late = KafkaReceiver(broker, names)
        active = late.service.contracts.active("default", "billing-triage")
        assert active is not None and active.version_id == v2["versionId"]
        # the sink keeps every version in the store
        wait_until(
            lambda: (
                [v.version_id for v in history(store, "default", "billing-triage")]
                == [v2["versionId"], v1["versionId"]]
            ),
            what="the sink to store both versions",
        )
        # the store derives their change events, whoever wrote them: here the sink
        changes = list_changes(store, ChangeQuery("default", kinds=("contract",)))
        assert [(c.artifact_version, c.details["state"]) for c in changes] == [
            (v1["versionId"], "registered"), (v2["versionId"], "changed")
        ]  # fmt: skip
        assert changes[1].details["retired"] == ["tag:fix_tier"]
        # a receiver holding no store cannot record one: 501, and where to record it
        deploy = {"surfaceId": "classify-intent", "kind": "deploy", "at": "2026-06-01T00:00:00Z",
                  "description": "v2"}  # fmt: skip
        refused = requests.post(
            f"{first.http_endpoint}/holonograph/changes", json=deploy,
            headers={"x-holonograph-run-mode": "production"}, timeout=30,
        )  # fmt: skip
        assert refused.status_code == 501 and refused.json()["code"] == "not_wired"
    finally:
        for running in (late, first, second):
            if running is not None:
                running.stop()
        sink.stop()


def test_contract_register_with_kafka_reaches_running_receivers(
    broker: Broker, names: dict[str, str]
) -> None:
    receiver = KafkaReceiver(broker, names)
    try:
        done = CliRunner().invoke(
            cli,
            ["contract", "register", str(EXAMPLE), "--kafka", broker.bootstrap,
             "--kafka-contracts-topic", names["kafka_contracts_topic"], "--json"],
            env={"HOLONOGRAPH_KAFKA_IDEMPOTENCE": "false"},
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        version = json.loads(done.output)["versionId"]
        wait_until(
            lambda: (
                (active := receiver.service.contracts.active("default", "billing-triage"))
                is not None
                and active.version_id == version
            ),
            timeout=5,
            what="the receiver to enforce the CLI's registration",
        )
    finally:
        receiver.stop()
