"""Prometheus metrics of the pipeline itself, on a registry owned by each service
(no module-level globals), exposed on the admin endpoint's `/metrics`."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ingest.export import ExportOutcome
from ingest.handoff import WriteObserver
from schemas.events import QuarantineRecord

_REASON_WIDTH = 60


def reason_label(reason: str) -> str:
    """Group reasons by attribute and cause, not by the offending value."""
    head = reason.split("'", 1)[0].split('"', 1)[0]
    return head.strip().rstrip(":")[:_REASON_WIDTH] or "unknown"


class PipelineMetrics(WriteObserver):
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

    def observe_auth_failure(self, reason: str) -> None:
        self.auth_failures.labels(reason=reason).inc()

    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None:
        self.batches_written.labels(result="ok" if ok else "error").inc()
        if ok:
            self.rows_written.inc(rows)
        self.insert_seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
