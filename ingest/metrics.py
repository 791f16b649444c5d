"""The Prometheus metrics of the services, on a registry owned by each service (no
module-level globals), exposed on the admin endpoint's `/metrics`: the export path and
the embedded writer (`PipelineMetrics`) and the sink (`SinkMetrics`); the Kafka
producer's (`ingest.handoff.kafka_metrics`) register beside them, so one `/metrics`
shows the whole process. This module labels the export path's outcomes, so it imports
`ingest.export`; the hand-off, which `ingest.export` imports, must not import it."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ingest.edge.answers import INTERNAL_ERROR, REFUSAL_REASONS
from ingest.export.contracts import CONTRACT_REJECTED
from ingest.export.genai import GENAI_REJECTED
from ingest.export.handler import ExportOutcome
from ingest.export.validate import CONTRACT_ATTRIBUTES
from schemas.events import QuarantineRecord
from schemas.genai import ATTRIBUTES as GENAI_ATTRIBUTES

# Label values are a fixed set, never request data (one series per value a client
# could choose would let any client grow /metrics without bound).
TRANSPORTS = frozenset({"grpc", "http"})
# Where a rejection's reason places the fault, besides a contract attribute: the
# span's structure, its resource, the contract, and (the sink) a record's envelope.
_PLACES = frozenset(
    {
        "trace_id",
        "span_id",
        "end_time_unix_nano",
        "span",
        "resource",
        "resource attributes",
        "time_unix_nano",
        "trace_id, span_id",
        CONTRACT_REJECTED,
        GENAI_REJECTED,
        "store refused",
        "not JSON",
        "empty record",
        "not a JSON object",
        "batch",
        "quarantined",
        "poison",
    }
)
# Reasons that name a client's value first: labelled by what kind of thing it is.
_PREFIXES = (
    ("span name ", "span name"),
    ("event ", "span event"),
    ("dimension ", "span event"),
    ("schema_version ", "schema_version"),
    ("kind ", "kind"),
    ("record of ", "record size"),
    ("holonograph.substrate.", "holonograph.substrate.*"),
    ("holonograph.marker.", "holonograph.marker.*"),
    ("holonograph.", "holonograph.* (extra)"),
)
OTHER_REASON = "other"
_BASE_LABELS = frozenset(
    CONTRACT_ATTRIBUTES
    | GENAI_ATTRIBUTES
    | _PLACES
    | {label for _, label in _PREFIXES}
    | {OTHER_REASON}
)
# A contract's rejection names what it is about after its own head.
REASON_LABELS = _BASE_LABELS | {f"{CONTRACT_REJECTED}: {label}" for label in _BASE_LABELS}


def reason_label(reason: str) -> str:
    """The label of a rejection's reason, one of `REASON_LABELS`: the attribute or
    place it names first (`holonograph.run_mode: 'x' is not one of ...` ->
    `holonograph.run_mode`), never the offending value or a key the client chose."""
    head, _, rest = reason.partition(":")
    head = head.strip()
    if head == CONTRACT_REJECTED and rest:
        return f"{CONTRACT_REJECTED}: {_label(rest.partition(':')[0].strip())}"
    return _label(head)


def _label(head: str) -> str:
    if head in CONTRACT_ATTRIBUTES or head in GENAI_ATTRIBUTES or head in _PLACES:
        return head
    for prefix, label in _PREFIXES:
        if head.startswith(prefix):
            return label
    return OTHER_REASON


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
        self.log_records_received = Counter(
            "holonograph_log_records_received",
            "Log records received in OTLP logs export requests.",
            registry=self.registry,
        )
        self.log_records_accepted = Counter(
            "holonograph_log_records_accepted",
            "GenAI evaluation log records accepted.",
            registry=self.registry,
        )
        self.log_records_rejected = Counter(
            "holonograph_log_records_rejected",
            "GenAI evaluation log records quarantined, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.log_records_ignored = Counter(
            "holonograph_log_records_ignored",
            "Log records that are not GenAI evaluation results, ignored.",
            registry=self.registry,
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
        self.requests_refused = Counter(
            "holonograph_requests_refused",
            "OTLP requests refused, by transport and reason (a fixed set).",
            ["transport", "reason"],
            registry=self.registry,
        )
        self.auth_failures = Counter(
            "holonograph_auth_failures",
            "OTLP requests refused as unauthenticated, by reason (missing, unknown token).",
            ["reason"],
            registry=self.registry,
        )

    def observe_export(self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]) -> None:
        total = outcome.accepted_spans + outcome.rejected_spans + outcome.ignored_spans
        logs = outcome.signal == "logs"
        (self.log_records_received if logs else self.spans_received).inc(total)
        (self.log_records_accepted if logs else self.spans_accepted).inc(outcome.accepted_spans)
        (self.log_records_ignored if logs else self.spans_ignored).inc(outcome.ignored_spans)
        by_reason = self.log_records_rejected if logs else self.spans_rejected
        for record in rejected:
            by_reason.labels(reason=reason_label(record.reason)).inc()
        for kind, count in outcome.contract_findings.items():
            self.contract_findings.labels(kind=kind).inc(count)

    def observe_auth_failure(self, reason: str) -> None:
        self.auth_failures.labels(reason=reason).inc()

    def observe_refusal(self, transport: str, reason: str) -> None:
        self.requests_refused.labels(
            transport=transport if transport in TRANSPORTS else "other",
            reason=reason if reason in REFUSAL_REASONS else INTERNAL_ERROR,
        ).inc()

    def observe_write(self, rows: int, requests: int, seconds: float, ok: bool) -> None:
        self.batches_written.labels(result="ok" if ok else "error").inc()
        if ok:
            self.rows_written.inc(rows)
        self.insert_seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


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
        self.partition_lag = Gauge(
            "holonograph_sink_partition_lag",
            "Records of a partition this member holds not yet in the store (log end minus"
            " the next offset to commit).",
            ["topic", "partition"],
            registry=registry,
        )
        self.partition_idle = Gauge(
            "holonograph_sink_partition_seconds_since_progress",
            "Seconds since a held partition's lag last went down or reached zero.",
            ["topic", "partition"],
            registry=registry,
        )
        self.owner_rejected = Counter(
            "holonograph_sink_ownership_rejected_spans",
            "Spans quarantined because another agent owns their event id, or another"
            " token their stream.",
            registry=registry,
        )

    def poison(self, reason: str) -> None:
        self.dead_lettered.labels(reason=reason_label(reason)).inc()
