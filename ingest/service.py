"""The receiver as one service: store, hand-off, export path, gRPC and HTTP
listeners, admin endpoint and periodic jobs, started and stopped in order.

With `config.kafka` set the hand-off publishes to Kafka and the receiver needs no
store at all (`store=None`): the sink owns the store. Without it, the embedded
hand-off writes the store in-process.

Stopping: listeners stop accepting, in-flight requests finish, the hand-off writes
what it holds, then the admin endpoint goes away.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import grpc
from aiohttp import web

from ingest.admin import AdminEndpoint
from ingest.admission import Admission
from ingest.config import ServeConfig
from ingest.export import Exporter, ExportObservers, Handoff, ScreeningHandoff
from ingest.grpc_server import start_grpc_server
from ingest.handoff import Clock, EmbeddedHandoff, utc_now
from ingest.http_server import build_http_app
from ingest.kafka_handoff import KafkaHandoff
from ingest.kafka_metrics import ProducerMetrics
from ingest.listen import start_site
from ingest.metrics import PipelineMetrics
from ingest.periodic import Periodic, PeriodicJobs
from ingest.reader import StoreSessions
from ingest.rejections import RejectionLog
from ingest.retention import apply_retention
from ingest.store import ClickHouseStore, chdb_path, is_embedded
from schemas.migrations import apply_migrations
from schemas.store import Store

log = logging.getLogger(__name__)


@dataclass
class Listeners:
    grpc_port: int = 0
    http_port: int = 0
    admin_port: int = 0
    metrics_port: int = 0


@dataclass
class ReceiverService:
    config: ServeConfig
    store: ClickHouseStore | None
    handoff_store: Store | None = None
    periodic: list[Periodic] = field(default_factory=list)
    clock: Clock = utc_now
    handoff: Handoff | None = None
    # The store periodic jobs run on; default: a second connection to `store`.
    job_store: Store | None = None

    def __post_init__(self) -> None:
        self.metrics = PipelineMetrics()
        self.listeners = Listeners()
        self.jobs = PeriodicJobs(self.periodic, self.clock, self.metrics.registry)
        self.rejections = RejectionLog(
            "span(s) rejected",
            self.config.rejection_log_seconds,
            "list them with `holonograph quarantine`",
            clock=self.clock,
        )
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._admin: AdminEndpoint | None = None
        self._side: ClickHouseStore | None = None
        self._exporter: Exporter | None = None

    async def start(self) -> Listeners:
        config = self.config
        if self.store is not None:
            await asyncio.to_thread(apply_migrations, self.store)
            await asyncio.to_thread(apply_retention, self.store, config.retention)
            # Periodic jobs get their own connection (see reopen); admin requests never use it.
            self._side = await asyncio.to_thread(self.store.reopen)
        if self.handoff is None:
            self.handoff = await self._build_handoff()
        self._exporter = exporter = Exporter(
            self.handoff,
            observer=ExportObservers(self.metrics, self.rejections),
            admission=Admission(config.max_inflight_bytes),
        )
        sessions = StoreSessions(self.store.url) if self.store is not None else None
        self._admin = AdminEndpoint(
            sessions, self.metrics.exposition, self._readiness, degraded=self.jobs.degraded
        )
        self.listeners.admin_port = await self._admin.start(config.admin_port)
        if config.metrics_port is not None:
            self.listeners.metrics_port = await self._admin.start_public(
                config.host, config.metrics_port
            )
        if self.store is not None and is_embedded(self.store.url):
            self._admin.publish(chdb_path(self.store.url))
        self._grpc, self.listeners.grpc_port = await start_grpc_server(
            exporter, config.host, config.grpc_port, config.max_request_bytes
        )
        # Bodies stay compressed until our bounded inflater sees them (gzip bombs).
        self._http = web.AppRunner(
            build_http_app(exporter, config.max_request_bytes),
            access_log=None,
            auto_decompress=False,
        )
        self.listeners.http_port = await start_site(self._http, config.host, config.http_port)
        jobs_store = self.job_store or self._side
        if jobs_store is not None:
            self.jobs.start(jobs_store)
        self.rejections.start()
        return self.listeners

    async def _build_handoff(self) -> Handoff:
        config = self.config
        if config.kafka:
            kafka = KafkaHandoff(
                config.kafka,
                config.topics(),
                max_inflight_bytes=config.max_inflight_bytes,
                max_message_bytes=config.kafka_max_message_bytes,
                timeout_seconds=config.kafka_timeout_ms / 1000,
                linger_ms=config.kafka_linger_ms,
                compression_type=config.kafka_compression,
                idempotence=config.kafka_idempotence,
                client_id=config.kafka_client_id,
                clock=self.clock,
                metrics=ProducerMetrics(self.metrics.registry),
            )
            await kafka.start()
            return kafka
        store = self.handoff_store or self.store
        if store is None:
            raise ValueError("the embedded hand-off needs a store (or set kafka)")
        return EmbeddedHandoff(
            store,
            max_inflight_bytes=config.max_inflight_bytes,
            max_batch_rows=config.max_batch_rows,
            linger_seconds=config.linger_ms / 1000,
            commit_wait_seconds=config.commit_wait_ms / 1000,
            clock=self.clock,
            observer=self.metrics,
        )

    async def _readiness(self) -> str | None:
        if isinstance(self.handoff, ScreeningHandoff):
            problem = await self.handoff.readiness()
            if problem:
                return problem
        if self.store is None:
            return None
        try:
            await asyncio.to_thread(self.store.query, "SELECT 1")
        except Exception as err:
            return f"store: {err}"
        return None

    async def stop(self, grace_seconds: float = 10.0) -> None:
        await self.jobs.stop()
        if self._grpc is not None:
            await self._grpc.stop(grace_seconds)
        if self._http is not None:
            await self._http.shutdown()
            await self._http.cleanup()
        await self.rejections.stop()  # after the listeners: the last count is logged
        if self._exporter is not None:
            await asyncio.to_thread(self._exporter.close)
        if self.handoff is not None:
            await self.handoff.close()
        if self._admin is not None:
            await self._admin.stop()
        if self._side is not None:
            await asyncio.to_thread(self._side.close)
            self._side = None
