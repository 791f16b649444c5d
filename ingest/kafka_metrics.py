"""Prometheus metrics of the Kafka side: producing (receiver) and consuming (sink).

They register on the registry of the service that owns them, beside its
`PipelineMetrics`, so one `/metrics` shows the whole process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ingest.metrics import reason_label


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
