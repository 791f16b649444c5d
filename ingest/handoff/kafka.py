"""Hand-off for the scale-out path: publish a validated batch to Kafka, answer once
the broker acknowledged every record of it.

Records are produced with `acks=all` (and the idempotent producer where the broker
supports it), compressed (`compression_type`: zstd when its codec is installed,
else gzip; see `default_compression`), keyed by emission stream; the default partitioner
(murmur2 of the key modulo the partition count, as the Java client does) keeps a
stream's records in order on one partition. Each request is packed into records
under the broker's message limit (`ingest.handoff.kafka_packing`: screened and
serialized in `prepare`, on the decode thread, joined in `submit`); its quarantined
spans go to the dead-letter topic. Failure to get every acknowledgement within
`timeout_seconds` raises `Unavailable`; bytes in flight past `max_inflight_bytes`
raise `Backpressure`, so a slow broker costs retries, never unbounded memory.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, get_args

from aiokafka import AIOKafkaProducer
from aiokafka.codec import has_zstd
from aiokafka.errors import KafkaError

from ingest.errors import Backpressure, Unavailable
from ingest.export.fast import FastBatch
from ingest.handoff.kafka_metrics import ProducerMetrics
from ingest.handoff.kafka_packing import (
    OutRecord,
    Screened,
    pack,
    screen,
    screen_columns,
    screen_fast,
    screen_rows,
)
from ingest.handoff.kafka_producer import BrokerRefused, start_producer
from ingest.handoff.kafka_topics import ensure_topics
from ingest.handoff.protocol import AnyBatch
from schemas.records import COLUMNS_VERSION, ROWS_VERSION, SCHEMA_VERSION, headers
from schemas.times import Clock, utc_now
from schemas.topics import Compression, Topics

log = logging.getLogger(__name__)

ProducerFactory = Callable[..., Any]
COMPRESSION_TYPES: tuple[str, ...] = get_args(Compression)
# The record versions written for a request the hot path took: 8 (its rows as columns,
# or as rows (7) when of several streams or too large for one record), 7 (its rows,
# which a sink stores without decoding models again) or 4 (its models' JSON): 7 and 4
# for sinks older than version 8 (7) during an upgrade; see schemas/RECORDS.md.
RECORD_VERSIONS = (COLUMNS_VERSION, ROWS_VERSION, SCHEMA_VERSION)


def default_compression() -> str:
    """zstd: on our records it compresses nearly as well as gzip for a fraction of the
    CPU (aiokafka gzips at level 9, on the event loop; the figures: bench/RESULTS.md).
    It needs the `cramjam` codec package; without
    it, gzip. Every broker since Kafka 2.1 (and Tansu) takes zstd batches."""
    return "zstd" if has_zstd() else "gzip"


class KafkaHandoff:
    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        *,
        max_inflight_bytes: int,
        max_message_bytes: int,
        timeout_seconds: float = 5.0,
        linger_ms: int = 5,
        compression_type: str | None = None,
        idempotence: bool = True,
        client_id: str = "holonograph",
        retry_after_seconds: float = 1.0,
        clock: Clock = utc_now,
        metrics: ProducerMetrics | None = None,
        record_version: int = COLUMNS_VERSION,
    ) -> None:
        """`record_version`: what a hot-path request is written as (`RECORD_VERSIONS`;
        the setting `kafka_record_version`). Other requests are written as version 4
        (5, 6) either way."""
        if record_version not in RECORD_VERSIONS:
            raise ValueError(f"record version {record_version}: use 8, 7 or 4")
        self.record_version = record_version
        # Version 7 (8) records hold rows: the hot path need not make the models' JSON.
        self.fast_batch_json = record_version == SCHEMA_VERSION
        # Nor lay out the dimension rows: a version 7 record holds their own values.
        self.fast_batch_layers = record_version == SCHEMA_VERSION
        self._bootstrap = bootstrap
        self._topics = topics
        self._max_inflight = max_inflight_bytes
        self._configured_limit = max_message_bytes
        self._limit = max_message_bytes
        self._timeout = timeout_seconds
        self._linger_ms = linger_ms
        compression = compression_type or default_compression()
        if compression not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression {compression!r}: use one of {', '.join(COMPRESSION_TYPES)}"
            )
        self._compression = None if compression == "none" else compression
        self._idempotence = idempotence
        self._client_id = client_id
        self._retry_after = retry_after_seconds
        self._clock = clock
        self._metrics = metrics
        self._producer: AIOKafkaProducer | None = None
        self._topics_checked = False
        self._connect_lock = asyncio.Lock()
        self._inflight_bytes = 0
        self._closing = False
        self._last_received: dt.datetime | None = None

    @property
    def inflight_bytes(self) -> int:
        return self._inflight_bytes

    @property
    def compression(self) -> str:
        return self._compression or "none"

    @property
    def message_limit(self) -> int:
        return self._limit

    async def start(self) -> None:
        """Connect now if the broker is there; otherwise the first request retries."""
        try:
            await asyncio.wait_for(self._connected(), self._timeout)
        except BrokerRefused:
            raise  # a setting, not a broker still starting: no request would succeed
        except (TimeoutError, KafkaError, OSError) as err:
            log.warning("Kafka at %s not reachable yet: %s", self._bootstrap, err)

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """Nothing waits for requests still being validated: records go out per request."""
        yield

    # A `FastBatch` is packed as it is, without models: its rows (version 7), or with
    # its events' JSON (`fast_batch(with_json=True)`, version 4).
    takes_fast_batches = True
    fast_batch_json: bool
    fast_batch_layers: bool

    def prepare(self, batch: AnyBatch) -> Screened:
        """Quarantine what cannot fit one message, before the client is answered; the
        events' JSON made for measuring them travels on to `submit`."""
        if isinstance(batch, FastBatch):
            if self.record_version == COLUMNS_VERSION:
                screened = screen_columns(batch, self._limit) or screen_rows(batch, self._limit)
            elif self.record_version == ROWS_VERSION:
                screened = screen_rows(batch, self._limit)
            else:
                screened = screen_fast(batch, self._limit) if batch.with_json else None
            if screened is not None:
                return screened
            batch = batch.materialize()  # something to quarantine: the models say what
        return screen(batch, self._limit)

    async def submit(self, prepared: Screened, receipt_id: str, size_bytes: int) -> AnyBatch:
        """Nothing is refused after `prepare`: the sink isolates what the store refuses."""
        if self._closing:
            raise Unavailable("receiver is shutting down", self._retry_after)
        records = pack(prepared, receipt_id, self._received_at(), self._limit)
        size = sum(len(r.value) for r in records)
        if self._inflight_bytes and self._inflight_bytes + size > self._max_inflight:
            raise Backpressure(
                f"{self._inflight_bytes} bytes are waiting for the broker"
                f" (limit {self._max_inflight}); retry later",
                self._retry_after,
            )
        self._set_inflight(size)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await asyncio.wait_for(self._send_all(records), self._timeout)
        except TimeoutError:
            self._failed("timeout")
            raise Unavailable(
                f"Kafka did not acknowledge within {self._timeout:g}s", self._retry_after
            ) from None
        except (KafkaError, OSError) as err:
            self._failed(type(err).__name__)
            raise Unavailable(f"Kafka: {err}", self._retry_after) from None
        finally:
            self._set_inflight(-size)
        if self._metrics is not None:
            self._metrics.latency.observe(loop.time() - started)
            for topic, dead in ((self._topics.records, False), (self._topics.dead_letter, True)):
                sent = [r for r in records if r.dead_letter is dead]
                self._metrics.produced(topic, len(sent), sum(len(r.value) for r in sent))
        return prepared.batch

    def _received_at(self) -> dt.datetime:
        """Strictly increasing per receiver: of two versions of one event id it received,
        the later one's `received_at` (the version the store keeps) is higher."""
        now = self._clock()
        if self._last_received is not None and now <= self._last_received:
            now = self._last_received + dt.timedelta(microseconds=1)
        self._last_received = now
        return now

    async def _send_all(self, records: list[OutRecord]) -> None:
        """Append in order (a stream's records must stay in order on its partition),
        then wait for every acknowledgement at once."""
        producer = await self._connected()
        acks = []
        for record in records:
            topic = self._topics.dead_letter if record.dead_letter else self._topics.records
            acks.append(
                await producer.send(
                    topic, record.value, key=record.key, headers=headers(record.record)
                )
            )
        await asyncio.gather(*acks)

    async def _connected(self) -> AIOKafkaProducer:
        async with self._connect_lock:
            if not self._topics_checked:
                self._limit = await ensure_topics(
                    self._bootstrap,
                    self._topics,
                    self._configured_limit,
                    int(self._timeout * 1000),
                    self._client_id,
                )
                self._topics_checked = True
            if self._producer is None:
                producer = self._new_producer()
                await start_producer(producer, self._bootstrap, self._idempotence)
                self._producer = producer
            return self._producer

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            client_id=self._client_id,
            acks="all",
            enable_idempotence=self._idempotence,
            compression_type=self._compression,
            linger_ms=self._linger_ms,
            max_request_size=self._limit,
            max_batch_size=min(self._limit, 256 * 1024),
            request_timeout_ms=int(self._timeout * 1000),
            metadata_max_age_ms=30_000,
        )

    def _failed(self, kind: str) -> None:
        # A broker that lost its log (or a re-created cluster) needs the topics again.
        self._topics_checked = False
        if self._metrics is not None:
            self._metrics.failures.labels(kind=kind).inc()

    def _set_inflight(self, delta: int) -> None:
        self._inflight_bytes += delta
        if self._metrics is not None:
            self._metrics.inflight_bytes.set(self._inflight_bytes)

    async def readiness(self) -> str | None:
        """None when the broker answers metadata for the records topic."""
        try:
            producer = await asyncio.wait_for(self._connected(), self._timeout)
            partitions = await asyncio.wait_for(
                producer.partitions_for(self._topics.records), self._timeout
            )
        except (TimeoutError, KafkaError, OSError) as err:
            return f"kafka: {err or type(err).__name__}"
        return None if partitions else f"kafka: topic {self._topics.records} has no partitions"

    async def close(self) -> None:
        """Refuse new requests, let in-flight sends finish, then disconnect."""
        self._closing = True
        if self._producer is not None:
            try:
                await asyncio.wait_for(self._producer.flush(), self._timeout)
            except (TimeoutError, KafkaError) as err:
                log.warning("Kafka flush at shutdown failed: %s", err)
            await self._producer.stop()
            self._producer = None
