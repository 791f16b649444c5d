"""A broker that refuses what the configuration asks (an idempotent producer on Tansu):
`sink` and `serve --kafka` exit 3 with the setting that fixes it, no traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.kafka.conftest import Broker
from tests.e2e.kafka.test_cli_processes import holonograph as run

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.e2e,
    pytest.mark.tansu_only("needs a broker without an idempotent producer"),
]


@pytest.fixture
def no_idempotence(broker: Broker) -> Broker:
    if broker.idempotence:
        pytest.skip("this broker has an idempotent producer; nothing is refused")
    return broker


def _assert_refused(done: subprocess.CompletedProcess[str], broker: Broker) -> None:
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        f"error: the Kafka broker at {broker.bootstrap} refused an idempotent producer"
        " (InitProducerId: UnknownError)"
    ) in done.stderr
    assert "HOLONOGRAPH_KAFKA_IDEMPOTENCE=false" in done.stderr
    assert "--no-kafka-idempotence" in done.stderr


def test_sink_with_idempotence_on_a_broker_without_it(
    no_idempotence: Broker, names: dict[str, str], tmp_path: Path
) -> None:
    done = run(
        "sink", "--kafka", no_idempotence.bootstrap, "--kafka-idempotence",
        "--data-dir", str(tmp_path / "d"), "--group", names["sink_group"],
        "--kafka-records-topic", names["kafka_records_topic"],
        "--kafka-dead-letter-topic", names["kafka_dead_letter_topic"],
    )  # fmt: skip
    _assert_refused(done, no_idempotence)
    assert not (tmp_path / "d" / ".holonograph-admin.json").exists()


def test_serve_kafka_with_idempotence_on_a_broker_without_it(
    no_idempotence: Broker, names: dict[str, str]
) -> None:
    done = run(
        "serve", "--kafka", no_idempotence.bootstrap, "--kafka-idempotence",
        "--grpc-port", "0", "--http-port", "0",
        "--kafka-records-topic", names["kafka_records_topic"],
        "--kafka-dead-letter-topic", names["kafka_dead_letter_topic"],
    )  # fmt: skip
    _assert_refused(done, no_idempotence)
