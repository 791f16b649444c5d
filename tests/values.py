"""Values the store cannot hold, as clients send them: spans built with the SDK, then
the OTLP shapes the SDK cannot make (kvlists, deep nesting) set on the protobuf.

Shared by the embedded and the Kafka tests: each case names the span it spoils and
the exact start of the reason its quarantine row must carry."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue as PB2AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from schemas.store import Store
from tests.ingest.helpers import grpc_export, http_export, http_response, to_otlp_json
from tests.otel_emit import Dim, Evaluation, Item, Sentinel, export_request, record_spans

NAN, INF = float("nan"), float("inf")
OUTSIDE = (
    "is outside the times the store holds (1900-01-01T00:00:00Z to 2262-04-11T23:47:16.854775Z)"
)


def nested(levels: int, leaf: PB2AnyValue | None = None) -> PB2AnyValue:
    """A kvlist `levels` deep (1: a kvlist of one string)."""
    value = leaf or PB2AnyValue(string_value="leaf")
    for _ in range(levels):
        outer = PB2AnyValue()
        pair = outer.kvlist_value.values.add()
        pair.key = "k"
        pair.value.CopyFrom(value)  # (a constructor keyword would re-parse, depth-limited)
        value = outer
    return value


def set_attribute(span: PB2Span, key: str, value: PB2AnyValue) -> None:
    pair = span.attributes.add()
    pair.key = key
    pair.value.CopyFrom(value)


@dataclass
class Case:
    """One spoiled span: `item` as the SDK builds it, then `spoil` on its protobuf."""

    name: str
    item: Item
    reason: str
    spoil: Callable[[PB2Span], None] | None = None


def cases(stream: str) -> list[Case]:
    """Every value class, each on its own seq of `stream`."""

    def at(seq: int, **kw: Any) -> Evaluation:
        return Evaluation(stream, seq, **kw)

    def ts(text: str) -> dict[str, Any]:
        return {"holonograph.timestamp": text}

    def deep(levels: int) -> Callable[[PB2Span], None]:
        return lambda span: set_attribute(span, "holonograph.custom.tree", nested(levels))

    return [
        Case("after 2262", at(0, extra=ts("2500-01-01T00:00:00Z")),
             f"holonograph.timestamp: '2500-01-01T00:00:00Z' {OUTSIDE}"),
        Case("year 9999 west of UTC", at(1, extra=ts("9999-12-31T23:30:00-05:00")),
             f"holonograph.timestamp: '9999-12-31T23:30:00-05:00' {OUTSIDE}"),
        Case("year 1 east of UTC", at(2, extra=ts("0001-01-01T00:30:00+01:00")),
             f"holonograph.timestamp: '0001-01-01T00:30:00+01:00' {OUTSIDE}"),
        Case("before 1900", at(3, extra=ts("1899-12-31T23:59:59Z")),
             f"holonograph.timestamp: '1899-12-31T23:59:59Z' {OUTSIDE}"),
        Case("end time 2^64-1", at(4, end_ns=2**64 - 1),
             "end_time_unix_nano: after the last time the store holds"
             " (2262-04-11T23:47:16.854775807Z), got 18446744073709551615"),
        Case("interval -1", Sentinel(stream, 5, interval_ms=-1),
             "holonograph.sentinel.interval_ms: must be >= 0, got -1"),
        Case("window after 2262",
             Sentinel(stream, 6, counters={"window_end": "2500-01-01T00:00:00Z"}),
             f"holonograph.completeness.window_end: '2500-01-01T00:00:00Z' {OUTSIDE}"),
        Case("NaN latency", at(7, extra={"holonograph.latency_ms": NAN}),
             "holonograph.latency_ms: NaN is not a finite number"),
        Case("Infinity cost", at(8, extra={"holonograph.cost.usd": INF}),
             "holonograph.cost.usd: Infinity is not a finite number"),
        Case("-Infinity score", at(9, dims=[Dim("quality", score=-INF)]),
             "event 0 (holonograph.dimension): holonograph.dimension.score:"
             " -Infinity is not a finite number"),
        Case("NaN score", at(10, dims=[Dim("quality", score=NAN)]),
             "event 0 (holonograph.dimension): holonograph.dimension.score:"
             " NaN is not a finite number"),
        Case("NaN in an extra array", at(11, extra={"holonograph.custom.ratios": [0.5, NAN]}),
             "holonograph.custom.ratios: NaN is not a finite number"),
        Case("extra nested 17 levels", at(12), "holonograph.custom.tree: nested deeper than 16"
             " levels of arrays and kvlists", spoil=deep(17)),
        # Past the decoder's own limit: the span cannot even be read (same reason
        # start on protobuf and JSON).
        Case("extra nested 40 levels", at(13), "span: not a decodable OTLP", spoil=deep(40)),
        Case("Infinity deep in an extra", at(14),
             "holonograph.custom.tree: Infinity is not a finite number",
             spoil=lambda span: set_attribute(
                 span, "holonograph.custom.tree", nested(3, PB2AnyValue(double_value=INF))
             )),
    ]  # fmt: skip


@dataclass
class Mix:
    """A request of valid spans around spoiled ones, on `stream`; valid ones on
    `stream`-ok (seqs 0, 1 before, 2, 3 after the spoiled ones)."""

    stream: str
    spoiled: list[Case] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.spoiled = self.spoiled or cases(self.stream)

    @property
    def ok(self) -> str:
        return f"{self.stream}-ok"

    def valid(self) -> list[Item]:
        return [Evaluation(self.ok, 0), Sentinel(self.ok, 1)]

    def valid_after(self) -> list[Item]:
        return [Evaluation(self.ok, 2, dims=[Dim("tone", score=0.25)]), Sentinel(self.ok, 3)]

    def request(self, seed: int = 11) -> PB2ExportTraceServiceRequest:
        items = [*self.valid(), *(c.item for c in self.spoiled), *self.valid_after()]
        request = export_request(record_spans(items, seed=seed))
        spans = request.resource_spans[0].scope_spans[0].spans
        first = len(self.valid())
        for offset, case in enumerate(self.spoiled):
            if case.spoil is not None:
                case.spoil(spans[first + offset])
        return request

    def valid_events(self) -> set[str]:
        return {f"evt_{self.ok}_0", f"evt_{self.ok}_2"}

    def reasons(self) -> dict[int, str]:
        return {c.item.seq: c.reason for c in self.spoiled}


def send(transport: str, endpoint: str, request: PB2ExportTraceServiceRequest) -> tuple[str, Any]:
    """(status, ExportTraceServiceResponse or error message) through `transport`."""
    if transport == "grpc":
        reply = grpc_export(endpoint, request.SerializeToString())
        if reply.code.name != "OK":
            return reply.code.name, reply.details
        return "OK", reply.response()
    if transport == "http-json":
        answer = http_export(endpoint, to_otlp_json(request), "application/json")
    else:
        answer = http_export(endpoint, request.SerializeToString())
    if answer.status_code != 200:
        return str(answer.status_code), answer.content
    return "OK", http_response(answer)


def valid_traffic(stream: str, clients: int, spans: int) -> list[PB2ExportTraceServiceRequest]:
    """One request of `spans` valid evaluations per client, each on its own stream."""
    return [
        export_request(
            record_spans([Evaluation(f"{stream}-{c}", s) for s in range(spans)], seed=100 + c)
        )
        for c in range(clients)
    ]


def send_concurrently(
    sends: Sequence[Callable[[], tuple[str, Any]]],
) -> list[tuple[str, Any]]:
    with concurrent.futures.ThreadPoolExecutor(len(sends)) as pool:
        return list(pool.map(lambda f: f(), sends))


def stored_once(store: Store, streams: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per stream: (events, read with FINAL as every query does; ordinals whose
    receipt arrived exactly once and not quarantined). A part written twice while a
    refused commit was bisected collapses like any redelivery."""
    out: dict[str, tuple[int, int]] = {}
    for stream in streams:
        bind = {"s": stream}
        events = store.query(
            "SELECT count() FROM holonograph.evaluation_events FINAL"
            " WHERE emission_stream = {s:String}",
            bind,
        ).scalar()
        receipts = store.query(
            "SELECT count() FROM holonograph.emission_records"
            " WHERE emission_stream = {s:String} AND received_count = 1 AND NOT quarantined",
            bind,
        ).scalar()
        duplicates = store.query(
            "SELECT count() FROM holonograph.emission_records"
            " WHERE emission_stream = {s:String} AND received_count > 1",
            bind,
        ).scalar()
        assert duplicates == 0, f"{stream}: {duplicates} ordinals received more than once"
        out[stream] = (int(events), int(receipts))
    return out


def quarantine_reasons(store: Store, stream: str) -> dict[int, str]:
    rows = store.query(
        "SELECT emission_seq, reason FROM holonograph.quarantine FINAL"
        " WHERE emission_stream = {s:String}",
        {"s": stream},
    ).rows
    return {int(seq): str(reason) for seq, reason in rows}


def quarantine_by_reason(store: Store, reason: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT * FROM holonograph.quarantine FINAL WHERE startsWith(reason, {r:String})",
        {"r": reason},
    ).dicts()


def arrived_quarantined(store: Store, stream: str) -> set[int]:
    rows = store.query(
        "SELECT emission_seq FROM holonograph.emission_records"
        " WHERE emission_stream = {s:String} AND quarantined",
        {"s": stream},
    ).rows
    return {int(seq) for (seq,) in rows}
