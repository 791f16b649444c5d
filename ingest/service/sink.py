"""The sink as one service: store (migrated), topics, consumer group, dead-letter
producer, the consume loop, and the same loopback admin endpoint as `serve`
(`/admin/*` for other commands while it holds a chDB store, `/healthz`, `/readyz`,
`/metrics`).

The broker may be absent at start: the service keeps trying to connect (readiness
says so) instead of exiting, as a container orchestrator expects.

Stopping is bounded (`stop_timeout_seconds`): the loop stops taking records, writes and
commits what it holds, leaves the group; whatever of that the broker or the store has
not finished by then is abandoned uncommitted, as a crash would leave it, for the
next member to read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from ingest.handoff.kafka_producer import start_producer
from ingest.handoff.kafka_topics import ensure_topics
from ingest.metrics import PipelineMetrics, SinkMetrics
from ingest.service.admin import AdminEndpoint
from ingest.service.config import SinkConfig
from ingest.service.contracts import ContractFeed, ensure_contracts_topic
from ingest.service.memory import Trimmer
from ingest.service.periodic import Periodic, PeriodicJobs
from ingest.service.rejections import LoggedDeadLetters, RejectionLog
from ingest.sink.consume import Monotonic, Sink
from ingest.sink.dlq import KafkaDeadLetters, PoisonBrake, SinkHalted
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.reader import StoreSessions
from ingest.store.url import chdb_path, is_embedded
from schemas.contracts import ContractRecord
from schemas.migrations import apply_migrations
from schemas.registry import store_version
from schemas.store import Store
from schemas.times import Clock, utc_now

log = logging.getLogger(__name__)


@dataclass
class SinkService:
    config: SinkConfig
    store: ClickHouseStore
    write_store: Store | None = None
    clock: Clock = utc_now
    monotonic: Monotonic = time.monotonic
    periodic: list[Periodic] = field(default_factory=list)
    # The store periodic jobs run on; default: a second connection to `store`.
    job_store: Store | None = None
    # The group member's client: a seam for a broker that answers some calls and not others.
    consumer_class: type[AIOKafkaConsumer] = AIOKafkaConsumer

    def __post_init__(self) -> None:
        self.metrics = PipelineMetrics()
        self.sink_metrics = SinkMetrics(self.metrics.registry)
        self.jobs = PeriodicJobs(self.periodic, self.clock, self.metrics.registry)
        self.rejections = RejectionLog(
            "record(s) dead-lettered",
            self.config.rejection_log_seconds,
            f"read them on topic {self.config.kafka_dead_letter_topic}",
            clock=self.clock,
            monotonic=self.monotonic,
        )
        # Spans the store edge refused for ownership (another agent's event id, another
        # token's stream): quarantined, as the embedded receiver's rejections are.
        self.refusals = RejectionLog(
            "span(s) rejected for ownership",
            self.config.rejection_log_seconds,
            "list them with `holonograph quarantine`",
            clock=self.clock,
            monotonic=self.monotonic,
        )
        self.admin_port = 0
        self.metrics_port = 0
        self.sink: Sink | None = None
        # Returns freed memory to the system once the sink has held nothing for a while.
        self.trimmer = Trimmer(self._holds_nothing)
        self.halted: str | None = None
        self._admin: AdminEndpoint | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._side: ClickHouseStore | None = None
        # Set once the consume loop ended with everything it took stored and committed:
        # what is left of the stop (leaving the group, closing clients) loses nothing.
        self._drained = False

    async def start(self) -> int:
        """Migrate, open the admin endpoint, start consuming; returns the admin port."""
        await asyncio.to_thread(apply_migrations, self.store)
        # Periodic jobs get their own connection (see reopen); admin requests never use it.
        self._side = await asyncio.to_thread(self.store.reopen)
        self._admin = AdminEndpoint(
            StoreSessions(self.store.url, limits=self.config.read_limits()),
            self.metrics.exposition,
            self._readiness,
            degraded=self._degraded,
            workers=self.config.read_workers,
        )
        self.admin_port = await self._admin.start(self.config.admin_port)
        if self.config.metrics_port is not None:
            self.metrics_port = await self._admin.start_public(
                self.config.host, self.config.metrics_port
            )
        if is_embedded(self.store.url):
            self._admin.publish(chdb_path(self.store.url))
        self._task = asyncio.create_task(self._run(), name="sink")
        self._watch = asyncio.create_task(self._watch_liveness(), name="sink-liveness")
        # Jobs over the store this process owns, as `serve` runs them on the embedded path.
        self.jobs.start(self.job_store or self._side)
        self.rejections.start()
        self.refusals.start()
        return self.admin_port

    async def wait(self) -> None:
        """Until the loop ends: after `stop()`, or raising `SinkHalted` when the brake trips."""
        assert self._task is not None
        await asyncio.shield(self._task)

    async def stop(self, timeout: float | None = None) -> bool:
        """Graceful: flush what is held, commit, leave the group, close the endpoint;
        within `timeout` seconds (default `stop_timeout_seconds`). Past it, what is held
        is abandoned uncommitted, as `abort` would; returns whether the stop was graceful:
        everything taken stored (an offset commit or a group leave the broker left
        unanswered is not lost data: what is stored and uncommitted is read again and
        collapses)."""
        self._stop.set()
        limit = self.config.stop_timeout_seconds if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        graceful = True
        try:
            if self._task is not None:
                done, _ = await asyncio.wait({self._task}, timeout=limit * 0.8)
                if done:
                    with contextlib.suppress(SinkHalted):
                        self._task.result()  # the loop's own error (a refused producer)
                elif self._drained:
                    # A broker that does not answer the group leave (stopped, or holding
                    # a rebalance): the leave is best effort, as in every Kafka client.
                    log.warning(
                        "stopping: every record taken is stored%s; the broker did not"
                        " answer the group leave within %gs, so the next member waits up"
                        " to the session timeout for this one's partitions",
                        self._committed(),
                        limit * 0.8,
                    )
                    await _cancel(self._task, deadline)
                else:
                    graceful = False
                    held = self.sink.held() if self.sink is not None else 0
                    log.warning(
                        "sink did not stop within %gs: %d record(s) held stay uncommitted"
                        " for the next member",
                        limit * 0.8,
                        held,
                    )
                    await _cancel(self._task, deadline)
        finally:  # the loop may have ended in an error: close anyway
            await self._close_admin(deadline)
        return graceful

    async def abort(self) -> None:
        """As a crash would: drop everything held, commit nothing more."""
        deadline = asyncio.get_running_loop().time() + self.config.stop_timeout_seconds
        if self._task is not None:
            await _cancel(self._task, deadline)
        await self._close_admin(deadline)

    async def _close_admin(self, deadline: float | None = None) -> None:
        """Each step bounded by `deadline` (loop time): a job or a store call that hangs
        is left behind."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.config.stop_timeout_seconds if deadline is None else deadline

        async def bounded(step: Awaitable[None], what: str) -> None:
            try:
                await asyncio.wait_for(step, max(0.1, end - loop.time()))
            except TimeoutError:
                log.warning("stopping: %s did not finish in time; left behind", what)

        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        await bounded(self.jobs.stop(), "the periodic jobs")
        await bounded(self.rejections.stop(), "the rejection log")
        await bounded(self.refusals.stop(), "the ownership rejection log")
        if self._admin is not None:
            await bounded(self._admin.stop(), "the admin endpoint")
            self._admin = None
        if self._side is not None:
            await bounded(asyncio.to_thread(self._side.close), "the jobs' store connection")
            self._side = None

    async def _watch_liveness(self) -> None:
        """Look at the sink's progress often, so a stall is logged when it begins even
        while nobody asks `/readyz` (and while the loop waits on a store that hangs)."""
        period = min(self.config.sink_stall_seconds / 2, 5.0)
        while True:
            await asyncio.sleep(period)
            if self.sink is not None:
                self.sink.stalled()

    def _committed(self) -> str:
        """How far the offsets got, for the stop's message."""
        if self.sink is None or self.sink.committed:
            return " and committed"
        return (
            " (its last offset commit failed: the next member reads those"
            " records again and the store collapses them)"
        )

    def _degraded(self) -> str | None:
        """Failing periodic jobs, and partitions that make no progress."""
        problems = [self.jobs.degraded(), self.sink.stalled() if self.sink is not None else None]
        return "; ".join(p for p in problems if p) or None

    def _holds_nothing(self) -> bool:
        """Idle for the allocator: no records held between consuming and committing."""
        return self.sink is None or self.sink.held() == 0

    async def _run(self) -> None:
        config = self.config
        assert config.kafka
        if not await self._until_connected(config.kafka):
            return
        producer = AIOKafkaProducer(
            bootstrap_servers=config.kafka,
            client_id=f"{config.kafka_client_id}-sink-dlq",
            acks="all",
            enable_idempotence=config.kafka_idempotence,
            compression_type="gzip",
            max_request_size=config.kafka_max_message_bytes * 2 + 4096,
            request_timeout_ms=config.kafka_timeout_ms,
        )
        consumer = self.consumer_class(
            bootstrap_servers=config.kafka,
            group_id=config.sink_group,
            group_instance_id=config.sink_group_instance_id,
            client_id=f"{config.kafka_client_id}-sink",
            enable_auto_commit=False,
            # A committed offset the log no longer has (a log restarted or truncated)
            # resumes from the earliest record kept, never the latest: a record read
            # twice collapses in the store, one skipped would be lost.
            auto_offset_reset="earliest",
            session_timeout_ms=config.sink_session_timeout_ms,
            heartbeat_interval_ms=max(100, config.sink_session_timeout_ms // 3),
            metadata_max_age_ms=5_000,
            max_partition_fetch_bytes=config.kafka_max_message_bytes * 2 + 4096,
        )
        self.sink = Sink(
            consumer,
            self.write_store or self.store,
            LoggedDeadLetters(
                KafkaDeadLetters(producer, config.kafka_dead_letter_topic), self.rejections
            ),
            config.topics(),
            self.sink_metrics,
            batch_rows=config.sink_batch_rows,
            batch_seconds=config.sink_batch_seconds,
            max_poll_records=config.sink_max_poll_records,
            retry_min_seconds=config.sink_retry_min_seconds,
            retry_max_seconds=config.sink_retry_max_seconds,
            brake=PoisonBrake(
                config.sink_max_invalid_ratio,
                config.sink_invalid_ratio_min_records,
                config.sink_max_invalid_run,
            ),
            monotonic=self.monotonic,
            clock=self.clock,
            on_idle=self.trimmer.soon,
            on_rejected=self.refusals.observe_rejected,
            stall_seconds=config.sink_stall_seconds,
            commit_timeout_seconds=config.kafka_timeout_ms / 1000,
        )
        consumer.subscribe(list(config.topics().all()), listener=self.sink.listener())
        feed = await self._contract_feed(config.kafka)
        await start_producer(producer, config.kafka, config.kafka_idempotence)
        try:
            await consumer.start()
            try:
                await self.sink.run(self._stop)
                self._drained = self.sink.held() == 0
            except SinkHalted as err:
                self.halted = str(err)
                log.error("sink halted: %s", err)
                raise
            finally:
                await consumer.stop()
                self.sink.close()
        finally:
            await producer.stop()
            await feed.stop()

    async def _contract_feed(self, bootstrap: str) -> ContractFeed:
        """Every registration on the contracts topic becomes a version in the store
        (a version read again collapses: same key, same row)."""
        config = self.config
        store = self.write_store or self.store

        async def keep(record: ContractRecord) -> None:
            await asyncio.to_thread(store_version, store, record.version)

        await ensure_contracts_topic(
            bootstrap, config.kafka_contracts_topic, config.kafka_timeout_ms, config.kafka_client_id
        )
        feed = ContractFeed(
            bootstrap, config.kafka_contracts_topic, keep, config.kafka_timeout_ms,
            config.kafka_client_id,
        )  # fmt: skip
        await feed.start()
        return feed

    async def _until_connected(self, bootstrap: str) -> bool:
        """False when asked to stop before the broker answered."""
        config = self.config
        delay = config.sink_retry_min_seconds
        while not self._stop.is_set():
            try:
                await ensure_topics(
                    bootstrap,
                    config.topics(),
                    config.kafka_max_message_bytes,
                    config.kafka_timeout_ms,
                    config.kafka_client_id,
                )
                return True
            except (KafkaError, OSError, RuntimeError) as err:
                log.warning(
                    "Kafka at %s not reachable (retrying in %.1fs): %s", bootstrap, delay, err
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = min(delay * 2, config.sink_retry_max_seconds)
        return False

    async def _readiness(self) -> str | None:
        if self.halted:
            return f"halted: {self.halted}"
        if self.sink is None:
            return "connecting to kafka"
        if self.sink.last_error:
            return f"store: {self.sink.last_error}"
        try:
            await asyncio.to_thread(self.store.query, "SELECT 1")
        except Exception as err:
            return f"store: {err}"
        return None


async def _cancel(task: asyncio.Task[None], deadline: float) -> None:
    """Cancel `task` and wait for it until `deadline` (loop time), cancelling again
    when a cleanup step of its own waits on something that does not answer."""
    loop = asyncio.get_running_loop()
    while not task.done():
        task.cancel()
        remaining = deadline - loop.time()
        if remaining <= 0:
            log.warning("stopping: the consume loop did not end in time; left behind")
            return
        await asyncio.wait({task}, timeout=min(remaining, 1.0))
    with contextlib.suppress(asyncio.CancelledError, SinkHalted, Exception):
        task.result()
