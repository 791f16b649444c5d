"""The hot path of the export path: an all-valid request straight from protobuf to the
store's rows, without a pydantic model per span.

Almost every request a receiver sees is all valid: every span keeps the wire
contract, no event id or ordinal repeats, no contract governs its agents. For such a
request `fast_batch` reads each attribute once, checks it inline and appends the
row values the store takes (`ingest.store.rows` lays out the same columns from the
models); the pydantic models of `schemas.events` are not built. Anything else (a
span to reject, a repeat, a contract to check, a salvaged body, a value of an
unusual type even where the contract would allow it, an OpenTelemetry GenAI evaluation
result on any span) makes `fast_batch` return None,
and the request takes `ingest.export.request.validate_request`, the reference, which
says what is wrong. So the fast path never accepts what the reference rejects, and
for what it accepts it builds the reference's rows (`tests/ingest/export/test_fast.py`
compares them on the fuzz corpus and the wire fixtures).

A `FastBatch` carries those rows to the hand-off, less the columns only the commit
knows (receipt id, receipt time, version), and can always become the reference's
`ValidatedBatch` (`materialize`: the request validated again), for what needs the
models: the store refusing a commit, a hand-off without a fast form.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from pydantic_core import to_json

from ingest.export import flat
from ingest.export.contracts import NO_CONTRACT, ContractBook
from ingest.export.decode import attributes, jsonable
from ingest.export.domain import INT64_MAX, attributes_problem
from ingest.export.genai import carries_results
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import validate_request
from ingest.export.salvage import is_salvaged
from ingest.export.validate import (
    _EVALUATION_KEYS,
    CORRELATION_BAGGAGE,
    MARKER_PREFIX,
    PREFIX,
    RUN_MODE_BAGGAGE,
    SUBSTRATE_PREFIX,
    SpanRejected,
    _rfc3339,
    derive_event_id,
)
from ingest.store.rows import SharedRows, TableRows, ingest_version, ticks_ms
from ingest.store.rows import time_of_ticks_ns as _time
from schemas.events import (
    DIMENSION_EVENT,
    EVALUATION_SPAN,
    PROVENANCES,
    RUN_MODES,
    SENTINEL_SPAN,
    ValidatedBatch,
)

_SUBSTRATE_CUT = len(SUBSTRATE_PREFIX)
_MARKER_CUT = len(MARKER_PREFIX)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Positions in a receipt row of the columns only the commit knows.
RECEIPT_ID_AT = 3
RECEIVED_AT = 10


class _Slow(Exception):
    """This request takes the reference path."""


def _ticks(value: dt.datetime) -> int:
    """`ingest.store.rows.ticks_ns` of an aware datetime."""
    delta = value - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1000


def _str(value: Any) -> str:
    """A string attribute, absent ones empty; anything else is the reference's to judge."""
    if value is None:
        return ""
    if type(value) is not str:
        raise _Slow
    return value


def _integer(value: Any) -> int | None:
    if value is None or type(value) is int:
        return value
    raise _Slow


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if type(value) is str:
        return [value]
    if type(value) is list and all(type(v) is str for v in value):
        return list(value)
    raise _Slow


def _ids(span: Any) -> tuple[str, str]:
    trace_id, span_id = span.trace_id, span.span_id
    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
        raise _Slow
    return trace_id.hex(), span_id.hex()


def _ordinal(attrs: dict[str, Any]) -> tuple[str, int, bool]:
    stream = attrs.get("holonograph.emission.stream")
    seq = attrs.get("holonograph.emission.seq")
    final = attrs.get("holonograph.emission.final")
    if type(stream) is not str or not stream or type(seq) is not int or seq < 0:
        raise _Slow
    if final is None:
        return stream, seq, False
    if type(final) is not bool:
        raise _Slow
    return stream, seq, final


def _event_ticks(span: Any, value: Any) -> int:
    """The event's time in DateTime64(9) ticks, as the reference's datetime gives it
    (microseconds), from its `holonograph.timestamp` (None: absent)."""
    if value is None:
        end = span.end_time_unix_nano
        if end == 0 or end > INT64_MAX:
            raise _Slow
        return end // 1000 * 1000  # type: ignore[no-any-return]
    if type(value) is str:
        try:
            return _ticks(_rfc3339("holonograph.timestamp", value))
        except SpanRejected:
            raise _Slow from None
    if type(value) is int and 0 < value <= INT64_MAX:
        return value // 1000 * 1000
    raise _Slow


def _json(value: Any) -> str:
    if not value:
        return "{}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class FastBatch:
    """An all-valid request's rows, less the commit's columns, for one tenant: what the
    fast path hands the hand-off instead of a `ValidatedBatch`.

    `events`: event rows up to `extras` (the last columns, ingestion and contract,
    are added per commit); `dimensions`: dimension rows up to `emission_stream`;
    `receipts`: whole receipt rows with the receipt id and time left to fill.

    Without `layers` (`fast_batch(layers=False)`, what a version 7 record needs), the
    dimension rows are not laid out: `dimension_values` holds each dimension's own
    values (`dimension_id`, `passed`, `score`, `expected`, `actual`, `judge`), the
    events' in order, and `dimensions` stays empty until `layer` lays them out from
    the event rows (the same rows; `add_to` and `add_shared` do it)."""

    __slots__ = (
        "_materialized",
        "_source",
        "agents",
        "collapsed_spans",
        "contract_findings",
        "dimension_values",
        "dimensions",
        "event_ids",
        "event_json",
        "events",
        "ignored_spans",
        "layers",
        "quarantined",
        "receipt_json",
        "receipts",
        "sentinels",
        "tenant_id",
        "wire",
        "with_json",
    )

    def __init__(
        self,
        tenant_id: str,
        findings: tuple[str, ...],
        with_json: bool = False,
        agents: frozenset[str] | None = None,
        layers: bool = True,
    ) -> None:
        self.tenant_id = tenant_id
        # What the request's token may write (None: any agent), as `ValidatedBatch.agents`.
        self.agents = agents
        self.contract_findings = findings
        # With `with_json`: every event's and arrival's JSON as their models serialize (the
        # Kafka records' units), `event_json[i]` for `events[i]`, `receipt_json[j]`
        # for `receipts[j]`.
        self.with_json = with_json
        self.event_json: list[bytes] = []
        self.receipt_json: list[bytes] = []
        self.events: list[list[Any]] = []
        self.dimensions: list[list[Any]] = []
        self.layers = layers
        self.dimension_values: list[list[Any]] = []
        self.receipts: list[list[Any]] = []
        self.event_ids: set[str] = set()
        self.sentinels = 0
        self.ignored_spans = 0
        self.collapsed_spans = 0
        self.quarantined: tuple[()] = ()
        # The protobuf bytes the batch was decoded from, when the caller had them
        # (`fast_batch(wire=...)`): what the small-request log keeps of it.
        self.wire: bytes | None = None
        # What gives the same batch as models (`materialize`).
        self._source: Callable[[], ValidatedBatch] | None = None
        self._materialized: ValidatedBatch | None = None

    @property
    def rejected(self) -> int:
        return 0

    @property
    def accepted_spans(self) -> int:
        return len(self.events) + self.sentinels

    @property
    def rows(self) -> int:
        """What a commit's row budget counts (events and arrivals, as for a batch)."""
        return len(self.events) + len(self.receipts)

    def finding_counts(self) -> dict[str, int]:
        """Contract findings of the accepted events, by kind (as `ExportOutcome` has them)."""
        if not self.events or not self.contract_findings:
            return {}
        return {finding: len(self.events) for finding in self.contract_findings}

    def layer(self) -> None:
        """Lay the dimension rows out (`dimensions`) when the batch was decoded without
        `layers`: each dimension's values after its event's tenant and id, then the
        event's layer columns, as `_dimensions` lays them out."""
        if self.layers:
            return
        values = iter(self.dimension_values)
        out = self.dimensions
        for event in self.events:
            head = event[:2]
            tail = [*event[2:13], event[23]]
            out.extend([*head, *next(values), *tail] for _ in event[22])
        self.layers = True
        self.dimension_values = []

    def add_to(
        self, rows: TableRows, receipt_id: str, received_at: dt.datetime, order: int = 0
    ) -> None:
        """Complete the rows with the commit's columns (`TableRows.add`'s for a batch)."""
        self.layer()
        received = ticks_ms(received_at)
        version = ingest_version(received_at, order)
        tail = [received, version, "", list(self.contract_findings)]
        rows.events.extend([*row, *tail] for row in self.events)
        stamps = [received, version]
        rows.dimensions.extend([*row, *stamps] for row in self.dimensions)
        for row in self.receipts:
            receipt = row.copy()
            receipt[RECEIPT_ID_AT] = receipt_id
            receipt[RECEIVED_AT] = received
            rows.receipts.append(receipt)

    def add_shared(
        self, rows: TableRows, receipt_id: str, received_at: dt.datetime, order: int = 0
    ) -> None:
        """`add_to`, the event and dimension rows handed over as they are, with the
        commit's columns as their shared tails (`ingest.store.rows.SharedRows`): what a
        commit writes column by column, or logs, needs no row copied."""
        received = ticks_ms(received_at)
        version = ingest_version(received_at, order)
        tail = [received, version, "", list(self.contract_findings)]
        self.layer()
        rows.shared.append(SharedRows(self.events, tail, self.dimensions, [received, version]))
        for row in self.receipts:
            receipt = row.copy()
            receipt[RECEIPT_ID_AT] = receipt_id
            receipt[RECEIVED_AT] = received
            rows.receipts.append(receipt)

    def identities(self) -> list[tuple[str, str]]:
        """(event id, agent id) of each event, for the ownership check."""
        return [(row[1], row[3]) for row in self.events]

    def streams(self) -> list[str]:
        """The streams of the batch, in order: every span has an arrival on its stream."""
        return list(dict.fromkeys(row[1] for row in self.receipts))

    def materialize(self) -> ValidatedBatch:
        """The same request as the reference path validates it (models and all)."""
        if self._materialized is None:
            assert self._source is not None
            self._materialized = self._source()
        return self._materialized


def fast_batch(
    request: PB2ExportTraceServiceRequest,
    principal: Principal = ANONYMOUS,
    contracts: ContractBook | None = None,
    with_json: bool = False,
    layers: bool = True,
    wire: bytes | None = None,
) -> FastBatch | None:
    """The rows of `request` for `principal` when every span is valid and nothing needs
    the reference path (see the module); None otherwise. `with_json`: also the JSON of the
    models the reference would build (`FastBatch.event_json`, `receipt_json`). Without
    `layers` (and without `with_json`), the dimension rows are left to `FastBatch.layer`:
    what a version 7 record holds of them is `FastBatch.dimension_values`. `wire`: the
    protobuf bytes `request` was parsed from, if the caller has them (`flat.spans`)."""
    if is_salvaged(request):
        return None
    findings = (NO_CONTRACT,) if contracts is not None else ()
    layers = layers or with_json
    batch = FastBatch(principal.tenant_id, findings, with_json, principal.agents, layers)
    try:
        _decode(request, principal, contracts, batch, wire)
    except _Slow:
        return None
    batch._source = functools.partial(
        validate_request, request, principal=principal, contracts=contracts
    )
    batch.wire = wire
    return batch


def _decode(
    request: PB2ExportTraceServiceRequest,
    principal: Principal,
    contracts: ContractBook | None,
    batch: FastBatch,
    wire: bytes | None = None,
) -> None:
    tenant = batch.tenant_id
    agents = principal.agents
    arrived: set[tuple[str, int]] = set()
    event_ids = batch.event_ids
    events, receipts = batch.events, batch.receipts
    read = flat.spans(request, LAYOUT, wire)
    if read is None:
        raise _Slow
    parsed, form = read
    reader = _Reader(request, form)
    compiled = reader.compiled
    with_json = batch.with_json
    dimensions = batch.dimensions
    for r, (resource_spans, flat_resource_spans) in enumerate(
        zip(request.resource_spans, parsed, strict=True)
    ):
        resource = jsonable(attributes(resource_spans.resource.attributes))
        resource_json: str | None = None
        for s, scope_spans in enumerate(flat_resource_spans):
            for n, span in enumerate(scope_spans):
                name = span.name
                if not name.startswith(PREFIX):
                    if carries_results(span):
                        raise _Slow  # a GenAI evaluation: the reference maps it
                    batch.ignored_spans += 1
                    continue
                reader.at = (r, s, n)
                values = span.values if compiled else None  # `_Reader.span`'s, inline
                if values is not None:
                    rest = span.rest
                else:
                    values, rest = reader.span(span)
                if name == EVALUATION_SPAN:
                    if values is None:
                        raise _Slow  # a value not of its kind: the reference judges it
                    if resource_json is None:
                        if attributes_problem(resource) is not None:
                            raise _Slow
                        resource_json = _json(resource)
                    dims_before = len(dimensions)
                    event, extras = _evaluation(
                        tenant, span, values, rest, resource_json, batch, reader
                    )
                    event_id, agent_id, surface_id = event[1], event[3], event[2]
                    if event_id in event_ids:
                        raise _Slow  # a repeat: the reference collapses or rejects it
                    event_ids.add(event_id)
                    if agents is not None and agent_id not in agents:
                        raise _Slow
                    if contracts is not None and contracts.governs(tenant, agent_id, surface_id):
                        raise _Slow
                    stream, seq = event[23], event[24]
                    receipt = [
                        tenant, stream, seq, None, "evaluation", event[25], False, event_id,
                        surface_id, event[7], None, None, None, None, None, None, None, None,
                    ]  # fmt: skip
                    events.append(event)
                    if with_json:
                        dims = dimensions[dims_before:]
                        batch.event_json.append(
                            _event_json(event, dims, resource, extras, batch.contract_findings)
                        )
                        batch.receipt_json.append(_receipt_json(receipt, None))
                elif name == SENTINEL_SPAN:
                    if values is not None:  # the span's attributes as one dict again
                        attrs = dict(zip(LAYOUT.span_keys, values, strict=True))
                        if rest is not None:
                            attrs.update(rest)
                        rest = attrs
                    assert rest is not None
                    receipt = _sentinel(tenant, span, rest)
                    stream, seq = receipt[1], receipt[2]
                    batch.sentinels += 1
                    if with_json:
                        batch.receipt_json.append(_receipt_json(receipt, receipt[11:]))
                else:
                    raise _Slow
                key = (stream, seq)
                if key in arrived:
                    raise _Slow
                arrived.add(key)
                receipts.append(receipt)
    for rows in (events, dimensions, batch.dimension_values, receipts):
        flat.untrack(rows)  # plain values until their commit (`flat.untrack`)


# The attributes the hot path takes by place (`flat.Layout`): an evaluation span's own
# (`_evaluation` unpacks them in this order), and a dimension event's.
LAYOUT = flat.Layout(
    [
        ("holonograph.event.id", flat.TEXT),
        ("holonograph.surface.id", flat.TEXT),
        ("holonograph.run_mode", flat.ANY),
        ("holonograph.emission.stream", flat.TEXT),
        ("holonograph.emission.seq", flat.INT),
        ("holonograph.emission.final", flat.BOOL),
        ("holonograph.agent.id", flat.TEXT),
        ("holonograph.correlation.id", flat.ANY),
        ("holonograph.provenance", flat.TEXT),
        ("holonograph.lens.version", flat.TEXT),
        ("holonograph.light_source.id", flat.TEXT),
        ("holonograph.light_source.requested", flat.TEXT),
        ("holonograph.cohort_tags", flat.STRINGS),
        ("holonograph.multiplex.role", flat.TEXT),
        ("holonograph.fixture.id", flat.TEXT),
        ("holonograph.latency_ms", flat.NUMBER),
        ("holonograph.cost.usd", flat.NUMBER),
        ("holonograph.tokens.input", flat.INT),
        ("holonograph.tokens.output", flat.INT),
        ("holonograph.sdk.name", flat.TEXT),
        ("holonograph.sdk.version", flat.TEXT),
        ("holonograph.timestamp", flat.ANY),
        (RUN_MODE_BAGGAGE, flat.ANY),
        (CORRELATION_BAGGAGE, flat.ANY),
    ],
    [
        ("holonograph.dimension.id", flat.TEXT),
        ("holonograph.dimension.passed", flat.BOOL),
        ("holonograph.dimension.score", flat.NUMBER),
        ("holonograph.dimension.expected", flat.TEXT),
        ("holonograph.dimension.actual", flat.TEXT),
        ("holonograph.dimension.judge", flat.TEXT),
    ],
)
# A span's `rest` is then its attributes that are not the evaluation's own.
assert frozenset(LAYOUT.span_keys) == _EVALUATION_KEYS


class _Reader:
    """Reads one span's values and other attributes (and its events' values) from the
    flat form (`flat.spans`, read by `form` with `LAYOUT`), or from the OTLP span at the
    same place where the flat form cannot say what the reference reads: a value of
    another shape or kind, or (a form not `ordered`) the order of the other attributes
    the rows keep in span order (substrate columns, markers, extras), when there are
    several."""

    __slots__ = ("_form", "_ordered", "_request", "_span", "_span_at", "at", "compiled")

    def __init__(self, request: PB2ExportTraceServiceRequest, form: flat.Form) -> None:
        self._request = request
        self._span: Any = None
        self._span_at: tuple[int, int, int] | None = None
        # The span's place (resource spans, scope spans, span): set before each span.
        self.at = (0, 0, 0)
        self._form = form
        self._ordered = form.ordered
        # The compiled form's items hold their values (None: not read): read inline.
        self.compiled = form is flat.COMPILED

    def _otlp(self) -> Any:
        if self._span_at is not self.at:
            r, s, n = self._span_at = self.at
            self._span = self._request.resource_spans[r].scope_spans[s].spans[n]
        return self._span

    def span(self, span: Any) -> tuple[tuple[Any, ...] | None, dict[str, Any] | None]:
        """The `LAYOUT` values of the span at `at` and its other attributes (`rest`, in
        the span's order); values None where one is not of its kind, `rest` then the
        span's whole attributes (the reference's)."""
        if self.compiled:
            if span.values is not None:
                return span.values, span.rest
        else:
            try:
                values, rest = self._form.span(span, LAYOUT)
            except flat.Unread:
                pass
            else:
                if rest is None or sum(key.startswith(PREFIX) for key in rest) < 2:
                    return values, rest
                # several to keep: their order is the span's, which the map does not keep
        attrs = attributes(self._otlp().attributes)
        fixed = flat.fix(attrs, LAYOUT.span_keys, LAYOUT.span_kinds)
        return fixed, attrs if fixed is None else flat.rest(attrs, LAYOUT.span_set)

    def event(self, event: Any, index: int) -> tuple[Any, ...]:
        """The `LAYOUT` values of the span's event `index` (`event`, as the flat form
        has it); `_Slow` where one is not of its kind."""
        values: tuple[Any, ...] | None
        try:
            values = self._form.event(event, LAYOUT)
        except flat.Unread:
            attrs = attributes(self._otlp().events[index].attributes)
            values = flat.fix(attrs, LAYOUT.event_keys, LAYOUT.event_kinds)
            if values is None:
                raise _Slow from None
        return values


def _spelled(value: Any, baggage: Any) -> Any:
    """An attribute that may come in its baggage spelling too (`validate._spelled`;
    None: absent): either one alone, or both the same; `_Slow` for two that differ."""
    if value is None:
        return baggage
    if type(baggage) is not type(value) or baggage != value:
        raise _Slow
    return value


_NO_TRACE = bytes(16)
_NO_SPAN = bytes(8)


def _evaluation(
    tenant: str,
    span: Any,
    values: tuple[Any, ...],
    rest: dict[str, Any] | None,
    resource_json: str,
    batch: FastBatch,
    reader: _Reader,
) -> tuple[list[Any], dict[str, Any]]:
    """The event row (up to `extras`) of an evaluation span and its extras, its
    dimension rows added to `batch`; `_Slow` for anything the reference would reject
    or might. `values`: the span's `LAYOUT` values (their kinds checked); `rest`: its
    other attributes, in the span's order.

    The checks of `_ids`, `_ordinal` and `_event_ticks` are inline here (the same
    rules): a call each was most of a span's cost."""
    trace_id, span_id = span.trace_id, span.span_id
    if len(trace_id) != 16 or len(span_id) != 8 or trace_id == _NO_TRACE or span_id == _NO_SPAN:
        raise _Slow
    (event_id, surface_id, run_mode, stream, seq, final, agent_id, correlation_id, provenance,
     lens_version, light_source_id, requested, cohort_tags, multiplex_role, fixture_id,
     latency_ms, cost_usd, tokens_input, tokens_output, sdk_name, sdk_version, ticks,
     run_mode_baggage, correlation_baggage) = values  # fmt: skip
    if run_mode_baggage is not None:
        run_mode = _spelled(run_mode, run_mode_baggage)
    if correlation_baggage is not None:
        correlation_id = _spelled(correlation_id, correlation_baggage)
    if type(run_mode) is not str or run_mode not in RUN_MODES:
        raise _Slow
    if correlation_id is None:
        correlation_id = ""
    elif type(correlation_id) is not str:
        raise _Slow
    if not stream or seq is None or seq < 0 or not surface_id:
        raise _Slow
    if final is None:
        final = False
    if not event_id:
        event_id = derive_event_id(stream, seq)
    if not provenance:
        provenance = "production-state" if run_mode == "production" else "exploratory-state"
    elif provenance not in PROVENANCES:
        raise _Slow
    if ticks is None:
        ticks = span.end_time_unix_nano
        if ticks == 0 or ticks > INT64_MAX:
            raise _Slow
        ticks = ticks // 1000 * 1000
    else:
        ticks = _event_ticks(span, ticks)
    columns: dict[str, str] = {}
    markers: dict[str, list[str]] = {}
    extras: dict[str, Any] = {}
    if rest is not None:
        for key, value in rest.items():
            if not key.startswith(PREFIX):
                continue
            if key.startswith(SUBSTRATE_PREFIX):
                columns[key[_SUBSTRATE_CUT:]] = _str(value)
            elif key.startswith(MARKER_PREFIX):
                markers[key[_MARKER_CUT:]] = _strings(value)
            else:
                extras[key] = jsonable(value)
        if extras and attributes_problem(extras) is not None:
            raise _Slow
    events = span.events  # most spans have their dimensions; some have no events
    if batch.layers:
        layers = [surface_id, agent_id, correlation_id, run_mode, provenance, ticks, lens_version,
                  light_source_id, requested, columns, cohort_tags, stream]  # fmt: skip
        dimension_ids = _dimension_values(
            events, batch.dimensions, reader, (tenant, event_id), layers
        )
    else:
        dimension_ids = _dimension_values(events, batch.dimension_values, reader)
    return [
        tenant, event_id, surface_id, agent_id, correlation_id, run_mode, provenance, ticks,
        lens_version, light_source_id, requested, columns, cohort_tags, multiplex_role,
        fixture_id, markers, latency_ms, cost_usd, tokens_input, tokens_output, sdk_name,
        sdk_version, dimension_ids, stream, seq, final, trace_id.hex(), span_id.hex(),
        resource_json, _json(extras) if extras else "{}",
    ], extras  # fmt: skip


def _dimension_values(
    events: Sequence[Any],
    out: list[list[Any]],
    reader: _Reader,
    head: tuple[str, str] | tuple[()] = (),
    tail: Sequence[Any] = (),
) -> list[str]:
    """Each dimension event's own values (`LAYOUT`'s, their kinds checked), between
    `head` and `tail` (`FastBatch.dimension_values`: neither); their ids. The compiled
    form's values are read inline."""
    ids: list[str] = []
    compiled = reader.compiled
    for index, event in enumerate(events):
        if event.name != DIMENSION_EVENT:
            continue
        values = event.values if compiled else None
        if values is None:
            values = reader.event(event, index)
        dimension_id, passed, score = values[0], values[1], values[2]
        if not dimension_id or dimension_id in ids or (passed is None and score is None):
            raise _Slow
        ids.append(dimension_id)
        out.append([*head, *values, *tail])
    return ids


_COUNTERS = (
    "holonograph.completeness.offered",
    "holonograph.completeness.delivered",
    "holonograph.completeness.dropped",
    "holonograph.completeness.failed",
)


def _sentinel(tenant: str, span: Any, attrs: dict[str, Any]) -> list[Any]:
    _ids(span)
    stream, seq, final = _ordinal(attrs)
    window: list[dt.datetime | None] = []
    for key in ("holonograph.completeness.window_start", "holonograph.completeness.window_end"):
        text = _str(attrs.get(key))
        try:
            window.append(_rfc3339(key, text) if text else None)
        except SpanRejected:
            raise _Slow from None
    interval_ms = _integer(attrs.get("holonograph.sentinel.interval_ms"))
    if interval_ms is not None and interval_ms < 0:
        raise _Slow
    counters = [_integer(attrs.get(key)) for key in _COUNTERS]
    return [
        tenant, stream, seq, None, "sentinel", final, False, "", "",
        _event_ticks(span, attrs.get("holonograph.timestamp")),
        None, interval_ms, *counters, *window,
    ]  # fmt: skip


def _event_json(
    row: list[Any],
    dims: list[list[Any]],
    resource: dict[str, Any],
    extras: dict[str, Any],
    findings: tuple[str, ...],
) -> bytes:
    """`EvaluationEvent`'s JSON (its fields in order, as its serializer writes them)
    from the event's row and dimension rows."""
    (_, event_id, surface_id, agent_id, correlation_id, run_mode, provenance, ticks,
     lens_version, light_source_id, requested, columns, cohort_tags, multiplex_role,
     fixture_id, markers, latency_ms, cost_usd, tokens_input, tokens_output, sdk_name,
     sdk_version, _, stream, seq, final, trace_id, span_id) = row[:28]  # fmt: skip
    document = {
        "event_id": event_id, "surface_id": surface_id, "agent_id": agent_id,
        "correlation_id": correlation_id, "run_mode": run_mode, "provenance": provenance,
        "timestamp": _time(ticks), "emission": {"stream": stream, "seq": seq, "final": final},
        "trace_id": trace_id, "span_id": span_id,
        "substrate": {
            "surface_id": surface_id, "agent_id": agent_id, "run_mode": run_mode,
            "provenance": provenance, "lens_version": lens_version,
            "light_source_id": light_source_id, "columns": columns,
            "diagnostic": dict(tag.split("=", 1) for tag in cohort_tags if "=" in tag),
        },
        "light_source": {"id": light_source_id, "requested": requested},
        "lens": {"version": lens_version, "fixture_id": fixture_id},
        "outcome": {
            "dimensions": [
                {"dimension_id": d[2], "passed": d[3], "score": d[4], "expected": d[5],
                 "actual": d[6], "judge": d[7]}
                for d in dims
            ],
            "cohort_tags": cohort_tags, "markers": markers, "latency_ms": latency_ms,
            "cost_usd": cost_usd, "tokens_input": tokens_input, "tokens_output": tokens_output,
        },
        "multiplex_role": multiplex_role, "sdk_name": sdk_name, "sdk_version": sdk_version,
        "resource_attributes": resource, "extras": extras, "contract_version_id": "",
        "contract_findings": findings,
    }  # fmt: skip
    return to_json(document)


def _receipt_json(receipt: list[Any], sentinel: list[Any] | None) -> bytes:
    """`EmissionRecord`'s JSON from a receipt row (`sentinel`: its counter columns)."""
    counters = None
    if sentinel is not None:
        interval_ms, offered, delivered, dropped, failed, start, end = sentinel
        counters = {
            "interval_ms": interval_ms, "offered": offered, "delivered": delivered,
            "dropped": dropped, "failed": failed, "window_start": start, "window_end": end,
        }  # fmt: skip
    document = {
        "stream": receipt[1], "seq": receipt[2], "kind": receipt[4], "final": receipt[5],
        "quarantined": False, "event_id": receipt[7], "surface_id": receipt[8],
        "event_time": _time(receipt[9]), "sentinel": counters,
    }  # fmt: skip
    return to_json(document)
