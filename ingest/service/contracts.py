"""Where the receiver's contract registrations go: the registrars the HTTP endpoint
(`ingest.edge.contract_api`) calls, one per delivery path.

Embedded (`StoreRegistrar`): the store is the registry; a registration is written
there and put into the receiver's `ContractBook` at once, and the receiver's refresh
brings registrations made elsewhere within `--contract-refresh-seconds`.

With Kafka (`TopicRegistrar`): receivers hold no store, so registrations travel on a
compacted contracts topic every receiver follows (`ContractFeed`) from its start; the
sink follows it too and writes every version to the store.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ingest.errors import Unavailable
from ingest.export.contracts import ContractBook
from ingest.store.errors import describe
from schemas.contracts import Contract, ContractRecord, ContractSummary, removed_items
from schemas.registry import active_version, find_version, new_version, register, summary_of
from schemas.store import Store
from schemas.times import Clock, utc_now

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36


class StoreRegistrar:
    """Registrations into the store the receiver owns."""

    def __init__(self, store: Store, book: ContractBook, clock: Clock = utc_now) -> None:
        self._store = store
        self._book = book
        self._clock = clock
        # One registration at a time: each reads the active version it replaces.
        self._lock = threading.Lock()

    def _register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        with self._lock:
            registration = register(self._store, tenant_id, contract, self._clock())
        self._book.put(registration.version)
        return registration.summary, registration.created

    def _summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None:
        found = (
            find_version(self._store, tenant_id, agent_id, version_id)
            if version_id
            else active_version(self._store, tenant_id, agent_id)
        )
        return summary_of(self._store, found) if found is not None else None

    async def register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        try:
            return await asyncio.to_thread(self._register, tenant_id, contract)
        except Exception as err:
            raise Unavailable(f"the contract registry is unavailable: {describe(err)}") from err

    async def summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None:
        try:
            return await asyncio.to_thread(self._summary, tenant_id, agent_id, version_id)
        except Exception as err:
            raise Unavailable(f"the contract registry is unavailable: {describe(err)}") from err


# --- with Kafka: the contracts topic ------------------------------------------------


async def ensure_contracts_topic(
    bootstrap: str, topic: str, timeout_ms: int, client_id: str
) -> None:
    """Create the contracts topic when absent: one partition (registrations in order),
    compacted (the latest registration of every agent stays, whatever the retention)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms, client_id=client_id
    )
    await admin.start()
    try:
        if topic in set(await admin.list_topics()):
            return
        response = await admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})]
        )
        for name, code, message in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"cannot create topic {name}: {message} (error {code})")
    finally:
        await admin.close()


OnRecord = Callable[[ContractRecord], Awaitable[None]]


class ContractFeed:
    """Reads the contracts topic from its start and follows it: every receiver (and the
    sink) sees every registration. `start` returns once what the topic held at start is
    read, so a receiver enforces the registered contracts before it takes a request."""

    def __init__(
        self, bootstrap: str, topic: str, on_record: OnRecord, timeout_ms: int, client_id: str
    ) -> None:
        from aiokafka import AIOKafkaConsumer

        self._topic = topic
        self._on_record = on_record
        self._timeout = timeout_ms / 1000
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            client_id=f"{client_id}-contracts",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=timeout_ms,
            metadata_max_age_ms=5_000,
        )
        self._task: asyncio.Task[None] | None = None
        self._problem = ""

    async def start(self) -> None:
        from aiokafka import TopicPartition

        consumer = self._consumer
        await consumer.start()
        partitions = [
            TopicPartition(self._topic, p)
            for p in consumer.partitions_for_topic(self._topic) or {0}
        ]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        deadline = asyncio.get_running_loop().time() + self._timeout
        while not await self._caught_up(ends):
            if asyncio.get_running_loop().time() > deadline:
                raise Unavailable(f"the contracts topic {self._topic} was not read in time")
            await self._poll(200)
        self._task = asyncio.create_task(self._follow(), name="contract-feed")

    async def _caught_up(self, ends: dict[Any, int]) -> bool:
        for partition, end in ends.items():
            if await self._consumer.position(partition) < end:
                return False
        return True

    async def _follow(self) -> None:
        """Until stopped. A broker that does not answer is retried; the contracts read
        so far stay enforced meanwhile."""
        while True:
            try:
                await self._poll(500)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self._say(f"reading {self._topic} failed, retrying: {describe(err)}")
                await asyncio.sleep(1.0)

    def _say(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("%s", problem)
        self._problem = problem

    async def _poll(self, timeout_ms: int) -> None:
        batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=500)
        for messages in batches.values():
            for message in messages:
                await self._take(message.value)

    async def _take(self, value: bytes | None) -> None:
        try:
            record = ContractRecord.model_validate_json(value or b"")
        except ValueError as err:  # not ours, or a newer format: skip it, say so once
            self._say(f"skipped an unreadable record of {self._topic}: {describe(err)}")
            return
        await self._on_record(record)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
            self._task = None
        try:
            await self._consumer.stop()
        except asyncio.CancelledError:
            # aiokafka's fetcher re-raises the cancellation of its own retry sleep when
            # it closes after failed fetches; only a cancellation of this task counts.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise


class TopicRegistrar:
    """Registrations of a receiver that holds no store: published to the contracts
    topic (acks=all), enforced here at once and by every other receiver when its feed
    reads the record; the sink writes every version to the store."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        book: ContractBook,
        timeout_ms: int,
        client_id: str,
        clock: Clock = utc_now,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._book = book
        self._timeout_ms = timeout_ms
        self._client_id = client_id
        self._clock = clock
        self._summaries: dict[tuple[str, str, str], ContractSummary] = {}
        self._lock = asyncio.Lock()
        self._producer: Any = None
        self.feed = ContractFeed(bootstrap, topic, self.take, timeout_ms, client_id)

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer

        await ensure_contracts_topic(
            self._bootstrap, self._topic, self._timeout_ms, self._client_id
        )
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            client_id=f"{self._client_id}-contracts",
            acks="all",
            request_timeout_ms=self._timeout_ms,
        )
        await self._producer.start()
        await self.feed.start()

    async def stop(self) -> None:
        await self.feed.stop()
        if self._producer is not None:
            await self._producer.stop()

    async def take(self, record: ContractRecord) -> None:
        """A registration read from the topic (ours or another receiver's)."""
        version = record.version
        self._summaries[version.tenant_id, version.agent_id, version.version_id] = record.summary()
        self._book.put(version)

    async def register(self, tenant_id: str, contract: Contract) -> tuple[ContractSummary, bool]:
        async with self._lock:
            active = self._book.active(tenant_id, contract.agent_id)
            if active is not None and active.contract.digest() == contract.digest():
                known = self._summaries.get((tenant_id, active.agent_id, active.version_id))
                if known is not None:
                    return known, False
            version = new_version(tenant_id, contract, active, self._clock())
            removed = removed_items(active.contract if active else None, contract)
            record = ContractRecord(version=version, removed=tuple(removed))
            try:
                await self._producer.send_and_wait(self._topic, record.encode(), key=record.key())
            except Exception as err:
                raise Unavailable(f"the contracts topic is unavailable: {describe(err)}") from err
            await self.take(record)
            return record.summary(), True

    async def summary(
        self, tenant_id: str, agent_id: str, version_id: str | None
    ) -> ContractSummary | None:
        if version_id is None:
            active = self._book.active(tenant_id, agent_id)
            if active is None:
                return None
            version_id = active.version_id
        return self._summaries.get((tenant_id, agent_id, version_id))
