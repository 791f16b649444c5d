"""Every Prometheus metric the services export, on a registry owned by each service
(no module-level globals), exposed on the admin endpoint's `/metrics`: the export
path and the embedded writer (`PipelineMetrics`), the Kafka producer
(`ProducerMetrics`) and the sink (`SinkMetrics`), which register beside it so one
`/metrics` shows the whole process."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ingest.export.handler import ExportOutcome
from schemas.events import QuarantineRecord

_REASON_WIDTH = 60


def reason_label(reason: str) -> str:
    """Group reasons by attribute and cause, not by the offending value."""
    head = reason.split("'", 1)[0].split('"', 1)[0]
    return head.strip().rstrip(":")[:_REASON_WIDTH] or "unknown"


class PipelineMetrics:
    """An `ExportObserver` and the embedded hand-off's `WriteObserver`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.spans_received = Counter(
            "holonograph_spans_received",
            "Spans received in export requests.",
            registry=self.registry,
        )
        self.spans_accepted = Counter(
            "holonograph_spans_accepted", "Holonograph spans accepted.", registry=self.registry
        )
        self.spans_rejected = Counter(
            "holonograph_spans_rejected",
            "Spans quarantined, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.spans_ignored = Counter(
            "holonograph_spans_ignored", "Non-holonograph spans ignored.", registry=self.registry
        )
        self.contract_findings = Counter(
            "holonograph_contract_findings",
            "Accepted evaluations flagged by their contract check, by finding kind.",
            ["kind"],
            registry=self.registry,
        )
        self.batches_written = Counter(
            "holonograph_store_batches",
            "Store writes, by result.",
            ["result"],
            registry=self.registry,
        )
        self.rows_written = Counter(
            "holonograph_store_rows", "Rows written to the store.", registry=self.registry
        )
        self.insert_seconds = Histogram(
            "holonograph_store_insert_seconds", "Store write latency.", registry=self.registry
        )
        self.auth_failures = Counter(
            "holonograph_auth_failures",
            "OTLP requests refused as unauthenticated, by reason (missing, unknown token).",
            ["reason"],
            registry=self.registry,
        )

    def observe_export(self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]) -> None:
        total = outcome.accepted_spans + outcome.rejected_spans + outcome.ignored_spans
        self.spans_received.inc(total)
        self.spans_accepted.inc(outcome.accepted_spans)
        self.spans_ignored.inc(outcome.ignored_spans)
        for record in rejected:
            self.spans_rejected.labels(reason=reason_label(record.reason)).inc()
        for kind, count in outcome.contract_findings.items():
            self.contract_findings.labels(kind=kind).inc(count)

    def observe_auth_failure(self, reason: str) -> None:
        self.auth_failures.labels(reason=reason).inc()

    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None:
        self.batches_written.labels(result="ok" if ok else "error").inc()
        if ok:
            self.rows_written.inc(rows)
        self.insert_seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class ProducerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Counter(
            "holonograph_kafka_records_produced",
            "Records acknowledged by the broker, by topic.",
            ["topic"],
            registry=registry,
        )
        self.bytes = Counter(
            "holonograph_kafka_bytes_produced",
            "Record value bytes acknowledged by the broker.",
            registry=registry,
        )
        self.failures = Counter(
            "holonograph_kafka_produce_failures",
            "Requests answered with a retryable error because the broker failed, by kind.",
            ["kind"],
            registry=registry,
        )
        self.latency = Histogram(
            "holonograph_kafka_produce_seconds",
            "Time from send to the broker's acknowledgement of every record of a request.",
            registry=registry,
        )
        self.inflight_bytes = Gauge(
            "holonograph_kafka_inflight_bytes",
            "Record bytes sent and not yet acknowledged.",
            registry=registry,
        )

    def produced(self, topic: str, count: int, size: int) -> None:
        self.records.labels(topic=topic).inc(count)
        self.bytes.inc(size)


class SinkMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.consumed = Counter(
            "holonograph_sink_records_consumed",
            "Records read from Kafka, by topic.",
            ["topic"],
            registry=registry,
        )
        self.batches = Counter(
            "holonograph_sink_batches",
            "Store writes by the sink, by result.",
            ["result"],
            registry=registry,
        )
        self.rows = Counter(
            "holonograph_sink_rows_written", "Rows written by the sink.", registry=registry
        )
        self.insert_seconds = Histogram(
            "holonograph_sink_insert_seconds", "Sink store write latency.", registry=registry
        )
        self.dead_lettered = Counter(
            "holonograph_sink_dead_lettered",
            "Poison records sent to the dead-letter topic, by reason.",
            ["reason"],
            registry=registry,
        )
        self.lag = Gauge(
            "holonograph_sink_consumer_lag",
            "Records behind the log end, summed over assigned partitions, by topic.",
            ["topic"],
            registry=registry,
        )
        self.commits = Counter(
            "holonograph_sink_commits", "Offset commits, by result.", ["result"], registry=registry
        )
        self.abandoned = Counter(
            "holonograph_sink_abandoned_records",
            "Buffered records given up at a rebalance (redelivered to the new owner).",
            registry=registry,
        )

    def poison(self, reason: str) -> None:
        self.dead_lettered.labels(reason=reason_label(reason)).inc()
