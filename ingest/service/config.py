"""Typed configuration of the services (`serve`, `sink`) and of `replay`'s Kafka side:
defaults in code, validated before any socket opens. Every field can be set by a
`HOLONOGRAPH_*` environment variable; CLI flags override the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ingest.store.limits import DEFAULT_READ_LIMITS, ReadLimits
from ingest.store.retention import parse_retention
from ingest.store.url import DEFAULT_DATA_DIR, store_url
from schemas.topics import (
    CONTRACTS_TOPIC,
    DEAD_LETTER_TOPIC,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PARTITIONS,
    DEFAULT_REPLICATION_FACTOR,
    RECORDS_TOPIC,
    SINK_GROUP,
    Compression,
    Topics,
)

MIB = 1024 * 1024

# The vocabulary the CLI builds its choice from.
TLSVersion = Literal["1.2", "1.3"]


class KafkaSettings(BaseSettings):
    """The Kafka side shared by `serve --kafka`, `sink` and `replay`.

    `kafka` is the bootstrap list (`host:port[,host:port...]`); None means the
    embedded path. `kafka_max_message_bytes` must not exceed the broker's
    `message.max.bytes` (and the topics' `max.message.bytes`)."""

    model_config = SettingsConfigDict(env_prefix="HOLONOGRAPH_", extra="forbid")

    kafka: str | None = None
    kafka_records_topic: str = Field(RECORDS_TOPIC, min_length=1)
    kafka_dead_letter_topic: str = Field(DEAD_LETTER_TOPIC, min_length=1)
    kafka_contracts_topic: str = Field(CONTRACTS_TOPIC, min_length=1)
    kafka_partitions: int = Field(DEFAULT_PARTITIONS, gt=0)
    kafka_replication_factor: int = Field(DEFAULT_REPLICATION_FACTOR, gt=0)
    kafka_idempotence: bool = True
    kafka_max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=4096)
    kafka_timeout_ms: int = Field(5_000, gt=0)
    kafka_linger_ms: int = Field(5, ge=0)
    # Producer batch compression; None: zstd when the cramjam codec is installed, else gzip.
    kafka_compression: Compression | None = None
    kafka_client_id: str = "holonograph"
    # What a request the receiver's hot path took is written as: 8 (its rows, as columns
    # when of one stream), 7 (its rows) or 4 (its models' JSON), 7 or 4 while some sinks
    # predate version 8 (7); schemas/RECORDS.md.
    kafka_record_version: int = 8

    @field_validator("kafka_record_version")
    @classmethod
    def _check_record_version(cls, value: int) -> int:
        if value not in (8, 7, 4):
            raise ValueError(
                "use 8 (rows as columns), 7 (rows, for sinks older than 8) or 4 (models'"
                " JSON, for sinks older than 7)"
            )
        return value

    @field_validator("kafka")
    @classmethod
    def _check_bootstrap(cls, value: str | None) -> str | None:
        if value is None:
            return None
        servers = [s.strip() for s in value.split(",") if s.strip()]
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"kafka bootstrap {server!r}: use host:port[,host:port...]")
        if not servers:
            raise ValueError("kafka bootstrap is empty")
        return ",".join(servers)

    @model_validator(mode="after")
    def _distinct_topics(self) -> KafkaSettings:
        names = (self.kafka_records_topic, self.kafka_dead_letter_topic, self.kafka_contracts_topic)
        if len(set(names)) != len(names):
            raise ValueError("the records, dead-letter and contracts topics must differ")
        return self

    def topics(self) -> Topics:
        return Topics(
            records=self.kafka_records_topic,
            dead_letter=self.kafka_dead_letter_topic,
            partitions=self.kafka_partitions,
            replication_factor=self.kafka_replication_factor,
        )


class ServiceSettings(KafkaSettings):
    """What every long-running service (`serve`, `sink`) has: its store, its admin and
    metrics endpoints, its periodic jobs and its rejection log."""

    model_config = SettingsConfigDict(env_prefix="HOLONOGRAPH_", extra="forbid")

    store: str | None = None
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    host: str = "127.0.0.1"
    admin_port: int = Field(0, ge=0, le=65535)
    # /healthz, /readyz, /metrics on `host` for scrapers and probes; None: loopback admin only.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    status_refresh_seconds: float = Field(60.0, gt=0)
    # At most one log line per this many seconds summarising rejected spans (the sink:
    # dead-lettered records).
    rejection_log_seconds: float = Field(60.0, gt=0)
    # Queries through the admin endpoint: how many run at once (on threads of their own,
    # never the commit path's), and the limits of each read-only one (0: none).
    read_workers: int = Field(4, gt=0, le=64)
    read_max_execution_time: float = Field(DEFAULT_READ_LIMITS.max_execution_time, ge=0)
    read_max_memory_usage: int = Field(DEFAULT_READ_LIMITS.max_memory_usage, ge=0)
    read_max_rows_to_read: int = Field(DEFAULT_READ_LIMITS.max_rows_to_read, ge=0)
    read_max_result_rows: int = Field(DEFAULT_READ_LIMITS.max_result_rows, ge=0)
    # After SIGTERM or Ctrl-C the process is gone within this long, whatever the broker
    # or the store is doing (a second signal: at once); see holonograph/cli/stopping.py.
    stop_timeout_seconds: float = Field(10.0, gt=0)

    def store_url(self) -> str:
        return store_url(self.store, self.data_dir)

    def read_limits(self) -> ReadLimits:
        return ReadLimits(
            max_execution_time=self.read_max_execution_time,
            max_memory_usage=self.read_max_memory_usage,
            max_rows_to_read=self.read_max_rows_to_read,
            max_result_rows=self.read_max_result_rows,
        )


class ServeConfig(ServiceSettings):
    """`holonograph serve`: the OTLP listeners, the receiver edge and the hand-off."""

    model_config = SettingsConfigDict(env_prefix="HOLONOGRAPH_", extra="forbid")

    grpc_port: int = Field(4317, ge=0, le=65535)
    http_port: int = Field(4318, ge=0, le=65535)
    # The HTTP API (analyses, contracts, change events, /openapi.json) on a listener of
    # its own, same TLS and tokens; None: on the OTLP/HTTP port (docs/api.md).
    api_port: int | None = Field(None, ge=0, le=65535)
    max_request_bytes: int = Field(64 * MIB, gt=0)
    max_inflight_bytes: int = Field(64 * MIB, gt=0)
    # Spans in one request: what a request alone may cost in memory is bounded by this
    # and max_request_bytes (about 8 KiB a span); more is refused 413.
    max_request_spans: int = Field(50_000, gt=0)
    max_batch_rows: int = Field(50_000, gt=0)
    # How long a small commit after a shared one waits for more requests to join.
    linger_ms: float = Field(10.0, ge=0)
    # How long a group commit waits for requests already received (being decoded).
    commit_wait_ms: float = Field(100.0, ge=0)
    # The small-request log (a chDB store this process holds): commits are answered
    # once fsynced to `<data dir>/ingest-log` and drained into the store in large
    # inserts (decision 0010); bytes logged and not drained are bounded, past it a
    # retry delay (24 MiB: as many spans as 16 MiB held when frames were the rows'
    # marshal; a hot-path frame is its request's bytes, ~1.45x as many). False: every
    # commit is inserted before its answer.
    ingest_log: bool = True
    ingest_log_max_bytes: int = Field(24 * MIB, gt=0)
    ingest_log_drain_ms: float = Field(3000.0, ge=0)
    retention: str | None = None
    # The receiver edge: TLS, bearer tokens, read limits and admission.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None  # set: clients must present a certificate it signed
    tls_min_version: TLSVersion = "1.2"
    auth_tokens_file: Path | None = None
    # How often the TLS and tokens files are checked for changes (rotation without restart).
    reload_interval_seconds: float = Field(5.0, gt=0)
    # Longest wait, once admitted, a request is expected to queue before it is answered:
    # past it, 429 / RESOURCE_EXHAUSTED with a retry delay instead of a client timeout.
    max_queue_seconds: float = Field(3.0, gt=0)
    # Request bodies being received at once (both transports); the rest wait their turn.
    max_concurrent_reads: int = Field(4, gt=0)
    # Of those, at most this many for one principal (a token; without tokens, a client
    # address): its slow bodies hold only its own share.
    max_concurrent_reads_per_client: int = Field(2, gt=0)
    # A body arriving slower than this on average (bytes/s, once the grace period has
    # passed) is cut with 408; 0: no minimum. HTTP only: grpcio shows no progress.
    min_body_rate: float = Field(16 * 1024, ge=0)
    body_rate_grace_seconds: float = Field(5.0, ge=0)
    grpc_max_concurrent_rpcs: int = Field(512, gt=0)
    # Calls one gRPC connection may have open at once (HTTP/2 max concurrent streams).
    grpc_max_streams_per_connection: int = Field(16, gt=0)
    http_max_connections: int = Field(256, gt=0)
    # Open HTTP connections from one client address; past it (or past the global cap)
    # connections that sent no complete request or no token are shed first.
    http_max_connections_per_client: int = Field(64, gt=0)
    # An HTTP connection must send a complete request header within this long after it
    # opened (or after its previous answer); a request body (either transport) must
    # arrive whole within the body timeout.
    http_header_timeout_seconds: float = Field(10.0, gt=0)
    body_timeout_seconds: float = Field(30.0, gt=0)
    # How often the receiver reloads the active contracts from its store (registrations
    # made elsewhere, e.g. `holonograph contract register`, are enforced within it).
    contract_refresh_seconds: float = Field(1.0, gt=0, le=5)

    @field_validator("retention")
    @classmethod
    def _check_retention(cls, value: str | None) -> str | None:
        parse_retention(value)
        return value

    @model_validator(mode="after")
    def _check_limits(self) -> ServeConfig:
        if self.max_inflight_bytes < self.max_request_bytes:
            raise ValueError("max_inflight_bytes must be at least max_request_bytes")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("TLS needs both tls_cert_file and tls_key_file")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError("tls_client_ca_file (mTLS) needs tls_cert_file and tls_key_file")
        for name in ("tls_cert_file", "tls_key_file", "tls_client_ca_file", "auth_tokens_file"):
            path: Path | None = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: {path} is not a readable file")
        return self


class SinkConfig(ServiceSettings):
    """`holonograph sink`: consume records, batch them, write the store, commit last."""

    model_config = SettingsConfigDict(env_prefix="HOLONOGRAPH_", extra="forbid")

    sink_group: str = Field(SINK_GROUP, min_length=1)
    sink_batch_rows: int = Field(50_000, gt=0)
    sink_batch_seconds: float = Field(1.0, gt=0)
    sink_max_poll_records: int = Field(5_000, gt=0)
    sink_retry_min_seconds: float = Field(0.5, gt=0)
    sink_retry_max_seconds: float = Field(30.0, gt=0)
    sink_max_invalid_ratio: float = Field(0.1, gt=0, le=1)
    sink_invalid_ratio_min_records: int = Field(100, gt=0)
    sink_max_invalid_run: int = Field(100, gt=0)
    sink_session_timeout_ms: int = Field(10_000, gt=0)
    # Static group membership (Kafka's group.instance.id): a member restarted with the
    # same id takes its partitions back without waiting for its old session to expire.
    # Unique per member and stable across its restarts (a StatefulSet pod name); None:
    # dynamic membership, and a restart waits for the session timeout.
    sink_group_instance_id: str | None = Field(None, min_length=1, max_length=249)
    # Partitions held with lag and no progress this long (or no assignment yet this long
    # after joining): /readyz says degraded, and the log says which and why.
    sink_stall_seconds: float = Field(15.0, gt=0)

    @model_validator(mode="after")
    def _needs_kafka(self) -> SinkConfig:
        if not self.kafka:
            raise ValueError("the sink needs --kafka BOOTSTRAP (or HOLONOGRAPH_KAFKA)")
        if self.sink_retry_max_seconds < self.sink_retry_min_seconds:
            raise ValueError("sink_retry_max_seconds must be at least sink_retry_min_seconds")
        return self
