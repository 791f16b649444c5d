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
import contextlib
import ipaddress
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web

from ingest.edge.admission import Admission, MinimumRate, ReadGate
from ingest.edge.auth import Authenticator
from ingest.edge.change_api import ChangeApi
from ingest.edge.contract_api import ContractApi, Registrar
from ingest.edge.grpc_server import start_grpc_server
from ingest.edge.http_server import (
    ConnectionTable,
    ServerLog,
    build_http_app,
    start_http_site,
)
from ingest.edge.ratelimit import TenantRateLimiter
from ingest.edge.steps import Edge
from ingest.edge.tls import ServerTls, TlsFiles
from ingest.export.contracts import ContractBook
from ingest.export.handler import ExportHandler, ExportObservers
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.handoff.kafka import KafkaHandoff
from ingest.handoff.kafka_metrics import ProducerMetrics
from ingest.handoff.protocol import Handoff
from ingest.handoff.segments import LOG_DIRECTORY
from ingest.handoff.smalllog import SmallLog
from ingest.metrics import PipelineMetrics
from ingest.service.admin import AdminEndpoint
from ingest.service.background import Background
from ingest.service.changes import StoreChangeLog
from ingest.service.config import ServeConfig
from ingest.service.contracts import StoreRegistrar, TopicRegistrar
from ingest.service.logged import DrainedStore, LoggedSessions
from ingest.service.memory import Trimmer
from ingest.service.periodic import Periodic, PeriodicJobs, describe
from ingest.service.rejections import IgnoredSpans, RefusalLog, RejectionLog
from ingest.service.routes import ApiContext, Mount
from ingest.service.workers import Sessions, StoreWorkers
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.reader import StoreSessions
from ingest.store.retention import apply_retention
from ingest.store.url import chdb_path, is_embedded
from schemas.migrations import apply_migrations
from schemas.registry import active_versions
from schemas.store import Store
from schemas.times import Clock, utc_now

log = logging.getLogger(__name__)


@dataclass
class Listeners:
    grpc_port: int = 0
    http_port: int = 0
    api_port: int | None = None  # None: the API is on http_port
    admin_port: int = 0
    metrics_port: int = 0


@dataclass
class ReceiverService:
    config: ServeConfig
    store: ClickHouseStore | None
    handoff_store: Store | None = None
    periodic: list[Periodic] = field(default_factory=list)
    clock: Clock = utc_now
    handoff: Handoff[Any] | None = None
    # The store periodic jobs run on; default: a second connection to `store`.
    job_store: Store | None = None
    monotonic: Callable[[], float] = time.monotonic
    # Routes the wiring adds to the HTTP port (`ingest.service.routes`): the analyses.
    routes: Sequence[Mount] = ()
    # Services the wiring runs beside it (`ingest.service.background`): the scheduler.
    background: Sequence[Background] = ()

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
        self.refusals = RefusalLog(
            self.metrics, self.config.rejection_log_seconds, self.clock, self.monotonic
        )
        self.ignored = IgnoredSpans(
            RejectionLog(
                "span(s) ignored",
                self.config.rejection_log_seconds,
                "only holonograph.* and OpenTelemetry GenAI spans are stored",
                clock=self.clock,
                level=logging.INFO,
            )
        )
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._api: web.AppRunner | None = None
        self._admin: AdminEndpoint | None = None
        self._workers: StoreWorkers | None = None
        self._side: ClickHouseStore | None = None
        self.small_log: SmallLog | None = None
        self._exporter: ExportHandler[Any] | None = None
        self.tls: ServerTls | None = None
        self.authenticator: Authenticator | None = None
        self.edge: Edge | None = None
        self.http_connections = ConnectionTable(
            self.config.http_max_connections, self.config.http_max_connections_per_client
        )
        self._reloader: asyncio.Task[None] | None = None
        # The active contracts this receiver enforces (docs/contracts.md).
        self.contracts = ContractBook()
        self._contract_refresher: asyncio.Task[None] | None = None
        self._contract_problem = ""
        self._registry_store: ClickHouseStore | None = None
        self._topic_registrar: TopicRegistrar | None = None

    def _runner(self, app: web.Application) -> web.AppRunner:
        """An HTTP listener's runner: bodies stay compressed until our bounded inflater
        sees them; an idle connection is closed after the header timeout."""
        assert self.edge is not None
        return web.AppRunner(
            app,
            access_log=None,
            logger=ServerLog(self.edge),
            auto_decompress=False,
            keepalive_timeout=self.config.http_header_timeout_seconds,
        )

    def _load_edge_files(self) -> None:
        """TLS material and tokens, before any socket opens (`TlsError`, `TokensFileError`
        are configuration errors)."""
        config = self.config
        if config.tls_cert_file is not None and config.tls_key_file is not None:
            self.tls = ServerTls(
                TlsFiles(
                    config.tls_cert_file,
                    config.tls_key_file,
                    config.tls_client_ca_file,
                    config.tls_min_version,
                )
            )
            if config.tls_min_version == "1.3":
                log.warning("TLS 1.3 minimum applies to OTLP/HTTP; grpcio keeps 1.2 as its floor")
        self.authenticator = Authenticator(
            config.auth_tokens_file, on_failure=self.metrics.observe_auth_failure
        )
        if not self.authenticator.enabled and not is_loopback(config.host):
            log.warning(
                "OTLP listeners on %s accept every client as tenant 'default', and answer"
                " its analyses: set --auth-tokens-file to require bearer tokens",
                config.host,
            )

    async def start(self) -> Listeners:
        config = self.config
        self._load_edge_files()
        assert self.authenticator is not None
        if self.store is not None:
            await asyncio.to_thread(apply_migrations, self.store)
            await asyncio.to_thread(apply_retention, self.store, config.retention)
            # Periodic jobs get their own connection (see reopen); admin requests never use it.
            self._side = await asyncio.to_thread(self.store.reopen)
            # The registry's own connection: a long periodic job never delays a refresh.
            self._registry_store = await asyncio.to_thread(self.store.reopen)
            self.contracts.replace(await asyncio.to_thread(active_versions, self._registry_store))
        if self.handoff is None:
            self.handoff = await self._build_handoff()
        if config.kafka and self._registry_store is None:
            # No store: registrations travel on the contracts topic, read before serving.
            self._topic_registrar = TopicRegistrar(
                config.kafka,
                config.kafka_contracts_topic,
                self.contracts,
                config.kafka_timeout_ms,
                config.kafka_client_id,
                self.clock,
            )
            await self._topic_registrar.start()
        admission = Admission(
            config.max_inflight_bytes,
            max_queue_seconds=config.max_queue_seconds,
            monotonic=self.monotonic,
        )
        admission.on_idle = Trimmer(lambda: not admission.inflight_bytes).soon
        self._exporter = exporter = ExportHandler(
            self.handoff,
            observer=ExportObservers(self.metrics, self.rejections, self.ignored),
            contracts=self.contracts,
        )
        self.edge = edge = Edge(
            exporter,
            self.authenticator,
            ReadGate(
                config.max_concurrent_reads,
                config.max_queue_seconds,
                per_principal=config.max_concurrent_reads_per_client,
            ),
            admission,
            TenantRateLimiter(self.monotonic),
            config.max_request_bytes,
            config.body_timeout_seconds,
            refusals=self.refusals,
            min_body_rate=MinimumRate(config.min_body_rate, config.body_rate_grace_seconds),
            max_request_spans=config.max_request_spans,
        )
        sessions: Sessions | None = (
            StoreSessions(self.store.url, limits=config.read_limits())
            if self.store is not None
            else None
        )
        if sessions is not None and self.small_log is not None:
            sessions = LoggedSessions(sessions, self.small_log)
        # The read executor: the admin endpoint's queries and the mounted analyses.
        self._workers = StoreWorkers(sessions, config.read_workers)
        self._admin = AdminEndpoint(
            sessions,
            self.metrics.exposition,
            self._readiness,
            degraded=self._degraded,
            store_workers=self._workers,
            status=self._background_status,
        )
        self.listeners.admin_port = await self._admin.start(config.admin_port)
        if config.metrics_port is not None:
            self.listeners.metrics_port = await self._admin.start_public(
                config.host, config.metrics_port
            )
        if self.store is not None and is_embedded(self.store.url):
            self._admin.publish(chdb_path(self.store.url))
        self._grpc, self.listeners.grpc_port = await start_grpc_server(
            edge,
            config.host,
            config.grpc_port,
            config.grpc_max_concurrent_rpcs,
            self.tls.grpc_credentials() if self.tls else None,
            config.grpc_max_streams_per_connection,
        )
        # Bodies stay compressed until our bounded inflater sees them (gzip bombs). An
        # idle connection (no complete header yet, or none since its last answer) is
        # closed after the header timeout.
        context = ApiContext(self.authenticator, self._workers, self.clock)
        mounts = [_bound(mount, context) for mount in self.routes]
        separate = config.api_port is not None
        self._http = self._runner(
            build_http_app(
                edge,
                None if separate else self._contract_api(),
                self.http_connections,
                None if separate else self._change_api(),
                [] if separate else mounts,
            )
        )
        _, self.listeners.http_port = await start_http_site(
            self._http,
            config.host,
            config.http_port,
            config.http_header_timeout_seconds,
            self.tls.ssl_context() if self.tls else None,
        )
        if config.api_port is not None:
            # The API on a listener of its own: the same TLS, tokens and connection
            # limits (a table of its own), no OTLP paths.
            api_connections = ConnectionTable(
                config.http_max_connections, config.http_max_connections_per_client
            )
            self._api = self._runner(
                build_http_app(
                    edge, self._contract_api(), api_connections, self._change_api(), mounts,
                    otlp=False,
                )
            )  # fmt: skip
            _, self.listeners.api_port = await start_http_site(
                self._api,
                config.host,
                config.api_port,
                config.http_header_timeout_seconds,
                self.tls.ssl_context() if self.tls else None,
                "HTTP API",
            )
        jobs_store = self.job_store or self._side
        if jobs_store is not None and self.small_log is not None:
            jobs_store = DrainedStore(jobs_store, self.small_log)
        if jobs_store is not None:
            self.jobs.start(jobs_store)
        self.rejections.start()
        self.ignored.log.start()
        self.refusals.start()
        for service in self.background:
            await service.start(self.metrics.registry)
        self._reloader = asyncio.create_task(self._reload_files(), name="reload-edge-files")
        if self._registry_store is not None:
            self._contract_refresher = asyncio.create_task(
                self._refresh_contracts(self._registry_store), name="refresh-contracts"
            )
        return self.listeners

    def _contract_api(self) -> ContractApi | None:
        registrar: Registrar | None = self._topic_registrar
        if self._registry_store is not None:
            registrar = StoreRegistrar(self._registry_store, self.contracts, self.clock)
        if registrar is None or self.authenticator is None:
            return None
        return ContractApi(self.authenticator, registrar)

    def _change_api(self) -> ChangeApi | None:
        """Change records go to the store this receiver owns; without one (`--kafka`)
        the endpoint answers 501 and says where to record them instead."""
        if self.authenticator is None:
            return None
        store = self._registry_store
        return ChangeApi(
            self.authenticator, StoreChangeLog(store, self.clock) if store is not None else None
        )

    async def _refresh_contracts(self, store: Store) -> None:
        """Registrations made by other processes (the CLI) reach ingest within one
        period. A failed read keeps the contracts held, logged once per new reason."""
        while True:
            await asyncio.sleep(self.config.contract_refresh_seconds)
            try:
                held = self.contracts.by_version_id()
                self.contracts.replace(await asyncio.to_thread(active_versions, store, held))
            except Exception as err:
                problem = describe(err)
                if problem != self._contract_problem:
                    log.warning("contract refresh failed, enforcing the last read: %s", problem)
                self._contract_problem = problem
            else:
                self._contract_problem = ""

    async def _reload_files(self) -> None:
        """Certificate rotation and token changes without a restart."""
        while True:
            await asyncio.sleep(self.config.reload_interval_seconds)
            if self.tls is not None:
                await asyncio.to_thread(self.tls.reload_if_changed)
            if self.authenticator is not None:
                await asyncio.to_thread(self.authenticator.reload_if_changed)

    async def _build_handoff(self) -> Handoff[Any]:
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
                record_version=config.kafka_record_version,
            )
            await kafka.start()
            return kafka
        store = self.handoff_store or self.store
        if store is None:
            raise ValueError("the embedded hand-off needs a store (or set kafka)")
        small = None
        if config.ingest_log and self.handoff_store is None and is_embedded(store.url):
            small = SmallLog(
                chdb_path(store.url) / LOG_DIRECTORY,
                store,
                max_bytes=config.ingest_log_max_bytes,
                drain_seconds=config.ingest_log_drain_ms / 1000,
                clock=self.clock,
            )
        embedded = EmbeddedHandoff(
            store,
            max_inflight_bytes=config.max_inflight_bytes,
            max_batch_rows=config.max_batch_rows,
            linger_seconds=config.linger_ms / 1000,
            commit_wait_seconds=config.commit_wait_ms / 1000,
            clock=self.clock,
            observer=self.metrics,
            log=small,
        )
        await embedded.open()
        self.small_log = small
        return embedded

    async def _readiness(self) -> str | None:
        """Ready when the hand-off can take requests (its store or its broker)."""
        return "starting" if self.handoff is None else await self.handoff.readiness()

    def _degraded(self) -> str | None:
        reasons = [self.jobs.degraded(), *(service.degraded() for service in self.background)]
        return "; ".join(reason for reason in reasons if reason) or None

    def _background_status(self) -> dict[str, Any]:
        return {service.name: service.status() for service in self.background}

    async def stop(self, grace_seconds: float = 10.0) -> None:
        for service in self.background:
            await service.stop()
        await self.jobs.stop()
        for task in (self._reloader, self._contract_refresher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._reloader = self._contract_refresher = None
        if self._grpc is not None:
            await self._grpc.stop(grace_seconds)
        for runner in (self._http, self._api):
            if runner is not None:
                await runner.shutdown()
                await runner.cleanup()
        await self.rejections.stop()  # after the listeners: the last count is logged
        await self.ignored.log.stop()
        await self.refusals.stop()
        if self._exporter is not None:
            await asyncio.to_thread(self._exporter.close)
        if self.handoff is not None:
            await self.handoff.close()
        if self._topic_registrar is not None:
            await self._topic_registrar.stop()
            self._topic_registrar = None
        if self._admin is not None:
            await self._admin.stop()
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        for side in (self._side, self._registry_store):
            if side is not None:
                await asyncio.to_thread(side.close)
        self._side = self._registry_store = None


def _bound(mount: Mount, context: ApiContext) -> Callable[[web.Application], None]:
    return lambda app: mount(app, context)


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address: reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
