"""The Kafka producer's metrics, registered beside the service's own
(`ingest.metrics`) on its registry. Here, not there: the hand-off is imported by the
export path, and `ingest.metrics` imports the export path (for its outcome labels)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
