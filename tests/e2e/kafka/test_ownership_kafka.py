"""Identity owned by the agent on the scale-out path: `serve --kafka` has no store, so
it answers a forgery as it answers any valid span (packed by the hot path, as every
all-valid request is), and the sink, checking the records (version 4 carries the
token's agents) against the owners in the store, quarantines it with the reason; the
victim's rows and completeness stay as they were."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import STREAM_OWNED
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ownership_cases import (
    FORGERIES,
    VICTIM,
    VICTIM_EVENT,
    VICTIM_TOKEN,
    HotPathSpy,
    quarantined,
    send,
    tokens_file,
    victim_view,
)

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture
def token_receiver(
    broker: Broker, names: dict[str, str], tmp_path: Path
) -> Iterator[KafkaReceiver]:
    running = KafkaReceiver(broker, names, auth_tokens_file=tokens_file(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


def test_every_forgery_through_kafka_is_quarantined_by_the_sink_and_changes_nothing(
    token_receiver: KafkaReceiver,
    sink: RunningSink,
    store: ClickHouseStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = HotPathSpy(monkeypatch)
    assert send(token_receiver.grpc_endpoint, VICTIM, VICTIM_TOKEN, seed=1)[0] == 0
    wait_until(lambda: count(store, "emission_receipts") == 3, what="the victim's spans stored")
    before = victim_view(store)
    assert before["grades"] == [(VICTIM_EVENT, "correctness", True)]
    for seed, forgery in enumerate(FORGERIES, start=2):
        rejected, _ = send(token_receiver.grpc_endpoint, forgery.items, forgery.token, seed)
        assert rejected == (len(forgery.items) if forgery.door_rejected else 0), forgery.name
        wait_until(
            lambda f=forgery: any(  # type: ignore[misc]
                reason.startswith(f.reason) and (not f.door_rejected or STREAM_OWNED in reason)
                for _, reason in quarantined(store)
            ),
            what=f"the sink to quarantine {forgery.name}",
        )
        assert victim_view(store) == before, forgery.name
    # the valid forgeries travelled as hot-path records (carrying the token's agents)
    assert spy.taken == [True] + [not f.door_rejected for f in FORGERIES]
    assert len(quarantined(store)) == sum(len(f.items) for f in FORGERIES)
    metrics = sink.service.metrics.exposition().decode()
    rejected_by_sink = sum(len(f.items) for f in FORGERIES if not f.door_rejected)
    assert f"holonograph_sink_ownership_rejected_spans_total {rejected_by_sink}.0" in metrics
