"""The sink's hot path: a batch record as our receivers write it, straight from its
JSON to the store's rows, without a pydantic model per event.

Nearly every record a sink reads is one a receiver of this version wrote (`schemas.records`,
version 4): compact JSON, every field present, in model order. `fast_record` parses it
(pydantic-core's JSON parser, the one the models' own validation uses), checks every
field the way the models would, conservatively (exact types and keys, every constraint
of `schemas.events`), and lays out the rows `ingest.store.rows` builds from the models
(a `FastBatch`, `ingest.export.fast`). It takes a record only when serializing what it
parsed gives back the very bytes it was given: so no field was repeated, reordered or
spelled unusually, and what it checked is the whole record. Anything else (another
version: an older one, or 5, events without emission ordinals; a quarantined letter, a
value it does not check, a record the models reject) returns None and the record takes
`schemas.records.decode`, the reference, which says what is wrong.
`tests/ingest/sink/test_fast_records.py` compares the rows of both on the fuzz corpus
and the wire fixtures.

A version 7 record (the receiver's rows, `schemas.records.decode_rows`) takes the same
path in rows form (`_rows_record`): the same checks on each value, the rows completed
with the columns the record holds once; anything else goes to the reference, which
reads it as the version 4 record of the same rows. A version 8 record (the rows as
columns) is first laid out as the version 7 document of its rows, by the reference's
own `schemas.records.rows_of_columns`, then takes the same path.
`tests/ingest/sink/test_rows_records.py` compares what both versions store.

A `FastRecord` becomes its models on demand (`model`: the record decoded by the
reference), for what needs them: a record the store refuses (its dead letter), an
ownership rejection (`FastBatch.materialize`).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic_core import from_json

from ingest.export.fast import FastBatch
from ingest.store.rows import _json as rows_json
from ingest.store.rows import ticks_ns
from schemas.events import PROVENANCES, RUN_MODES, ValidatedBatch
from schemas.records import (
    COLUMNS_VERSION,
    DIMENSION_ROW,
    EMISSION_ROW,
    EVENT_ROW,
    ROWS_VERSION,
    BatchRecord,
    decode,
    decode_batch_fast,
    rows_of_columns,
)

_RECORD_KEYS = (
    "schema_version", "kind", "tenant_id", "agents", "receipt_id", "received_at", "stream",
    "events", "emissions",
)  # fmt: skip
_EVENT_KEYS = (
    "event_id", "surface_id", "agent_id", "correlation_id", "run_mode", "provenance",
    "timestamp", "emission", "trace_id", "span_id", "substrate", "light_source", "lens",
    "outcome", "multiplex_role", "sdk_name", "sdk_version", "resource_attributes", "extras",
    "contract_version_id", "contract_findings",
)  # fmt: skip
_EMISSION_KEYS = ("stream", "seq", "final")
_SUBSTRATE_KEYS = (
    "surface_id", "agent_id", "run_mode", "provenance", "lens_version", "light_source_id",
    "columns", "diagnostic",
)  # fmt: skip
_LIGHT_SOURCE_KEYS = ("id", "requested")
_LENS_KEYS = ("version", "fixture_id")
_OUTCOME_KEYS = (
    "dimensions", "cohort_tags", "markers", "latency_ms", "cost_usd", "tokens_input",
    "tokens_output",
)  # fmt: skip
_DIMENSION_KEYS = ("dimension_id", "passed", "score", "expected", "actual", "judge")
_RECORD_KEYS_EMISSION = (
    "stream", "seq", "kind", "final", "quarantined", "event_id", "surface_id", "event_time",
    "sentinel",
)  # fmt: skip
_SENTINEL_KEYS = (
    "interval_ms", "offered", "delivered", "dropped", "failed", "window_start", "window_end",
)  # fmt: skip
_KINDS = frozenset({"evaluation", "sentinel"})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# An RFC 3339 time as pydantic writes one; others go to the reference.
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)")
# The one version it takes: the layout it checks is version 4's (pinned, not the version
# writers write now, so that a new version goes to the models until this path knows it).
_VERSION = 4
_PREFIX = b'{"schema_version":%d,"kind":"batch",' % _VERSION
# A version 7 record: its rows are the store's, checked as the models would check them.
_ROWS_PREFIX = b'{"schema_version":%d,"kind":"batch",' % ROWS_VERSION
# A version 8 record: the same rows as columns, read as version 7's (`rows_of_columns`).
_COLUMNS_PREFIX = b'{"schema_version":%d,"kind":"batch",' % COLUMNS_VERSION
_ROWS_KEYS = (
    "schema_version", "kind", "tenant_id", "agents", "receipt_id", "received_at", "stream",
    "contract_findings", "events", "emissions",
)  # fmt: skip
_EVENT_ROW_LENGTH = len(EVENT_ROW)
_DIMENSION_ROW_LENGTH = len(DIMENSION_ROW)
_EMISSION_ROW_LENGTH = len(EMISSION_ROW)
_STRINGS = {str}


class _Slow(Exception):
    """This record takes the reference path."""


class FastRecord:
    """A batch record decoded by the hot path: its envelope and its rows."""

    __slots__ = ("_model", "_value", "batch", "receipt_id", "received_at", "schema_version")

    def __init__(
        self,
        value: bytes,
        batch: FastBatch,
        receipt_id: str,
        received_at: dt.datetime,
        version: int = _VERSION,
    ) -> None:
        self._value = value
        self._model: BatchRecord | None = None
        self.schema_version = version
        self.batch = batch
        self.receipt_id = receipt_id
        self.received_at = received_at

    @property
    def tenant_id(self) -> str:
        return self.batch.tenant_id

    @property
    def rows(self) -> int:
        """Rows it writes: events, their dimensions, emission records."""
        return len(self.batch.events) + len(self.batch.dimensions) + len(self.batch.receipts)

    def model(self) -> BatchRecord:
        """The record as the reference decodes it (a version 7 or 8 record: as the
        version 4 record of the same rows)."""
        if self._model is None:
            self._model = _reference(self._value, self.schema_version)
        return self._model

    def models(self) -> ValidatedBatch:
        """Its batch as `ingest.sink.batch.Consumed.recorded` gives a record's."""
        return _batch_models(self.model())


def _reference(value: bytes, version: int) -> BatchRecord:
    """A record the hot path took, as the reference decodes it."""
    if version in (ROWS_VERSION, COLUMNS_VERSION):
        rows = decode(value)
        assert isinstance(rows, BatchRecord), "the hot path took a record of rows"
        return rows
    model = decode_batch_fast(value)
    assert model is not None, "the hot path took a record the models reject"
    return model


def _batch_models(record: BatchRecord) -> ValidatedBatch:
    from ingest.sink.batch import shared_resources

    return ValidatedBatch.model_construct(
        tenant_id=record.tenant_id,
        agents=None if record.agents is None else frozenset(record.agents),
        events=shared_resources(record.events),
        emissions=record.emissions,
    )


def _record_models(value: bytes, version: int) -> ValidatedBatch:
    """`FastRecord.models` from the record's bytes alone: a batch's `_source` that holds
    no reference to its record, whose `batch` holds it (a cycle would keep every
    record's rows until a full pass of the garbage collector, which the services make
    rare: `ingest.service.gctune`)."""
    return _batch_models(_reference(value, version))


def fast_record(value: bytes) -> FastRecord | None:
    """The record in `value` with its rows when the hot path takes it (see the module);
    None otherwise."""
    if value.startswith(_ROWS_PREFIX):
        try:
            return _rows_record(value, from_json(value))
        except (_Slow, ValueError, TypeError, KeyError, AttributeError, OverflowError):
            return None
    if value.startswith(_COLUMNS_PREFIX):
        try:
            document = from_json(value)
            if type(document) is not dict or document.get("kind") != "batch":
                return None  # a `kind` given twice: the reference reads the last
            return _rows_record(value, rows_of_columns(document), COLUMNS_VERSION)
        except (_Slow, ValueError, TypeError, KeyError, AttributeError, OverflowError):
            return None
    if not value.startswith(_PREFIX):
        return None
    try:
        # A key repeated in an object keeps its last value here as in the models' own
        # parse (which ignores the earlier ones): the same document either way.
        record = _record(value, from_json(value))
    except (_Slow, ValueError, TypeError, KeyError, AttributeError, OverflowError):
        return None
    return record


def _keys(document: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """`document` when it is an object of exactly `keys`, in that order."""
    if type(document) is not dict or tuple(document) != keys:
        raise _Slow
    return document


def _text(value: Any, required: bool = False) -> str:
    if type(value) is not str or (required and not value):
        raise _Slow
    return value


def _texts(value: Any) -> list[str]:
    if type(value) is not list:
        raise _Slow
    for item in value:
        if type(item) is not str:
            raise _Slow
    return value


def _text_map(value: Any) -> dict[str, str]:
    if type(value) is not dict:
        raise _Slow
    for item in value.values():
        if type(item) is not str:
            raise _Slow
    return value


def _integer(value: Any, minimum: int = _INT64_MIN) -> int:
    if type(value) is not int or not minimum <= value <= _INT64_MAX:
        raise _Slow
    return value


def _optional_integer(value: Any) -> int | None:
    return None if value is None else _integer(value)


def _optional_number(value: Any) -> float | None:
    """A float field: finite; an int the models would make a float exactly."""
    if value is None or (type(value) is float and math.isfinite(value)):
        return value
    if type(value) is int and -(2**53) <= value <= 2**53:
        return float(value)
    raise _Slow


def _time(value: Any) -> dt.datetime:
    if type(value) is not str or not _TIME.fullmatch(value):
        raise _Slow
    parsed = dt.datetime.fromisoformat(value)  # ValueError: to the reference
    if parsed.tzinfo is None:
        raise _Slow
    return parsed


def _optional_time(value: Any) -> dt.datetime | None:
    return None if value is None else _time(value)


def _json_text(value: Any) -> str:
    """`ingest.store.rows._json` of an object."""
    if type(value) is not dict:
        raise _Slow
    if not value:
        return "{}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _ticks(value: Any, times: dict[str, int]) -> int:
    """`ticks_ns` of an RFC 3339 time, each distinct text parsed once per record (an
    event's time is its arrival's too)."""
    ticks = times.get(value)  # TypeError for an unhashable value: to the reference
    if ticks is None:
        ticks = times[value] = ticks_ns(_time(value))
    return ticks


def _record(value: bytes, document: Any) -> FastRecord:
    record = _keys(document, _RECORD_KEYS)
    if record["schema_version"] != _VERSION or record["kind"] != "batch":
        raise _Slow
    tenant = _text(record["tenant_id"], required=True)
    agents_value = record["agents"]
    agents = None if agents_value is None else frozenset(_texts(agents_value))
    receipt_id = _text(record["receipt_id"], required=True)
    received_at = _time(record["received_at"])
    stream = _text(record["stream"], required=True)
    events, emissions = record["events"], record["emissions"]
    if type(events) is not list or type(emissions) is not list or (events and not emissions):
        raise _Slow
    findings: tuple[str, ...] | None = None
    batch = FastBatch(tenant, (), agents=agents)
    resource: dict[str, Any] | None = None
    resource_json = ""
    times: dict[str, int] = {}
    event_ids, rows = batch.event_ids, batch.events
    for event in events:
        row, event_findings, attributes, extras = _event(tenant, stream, event, batch, times)
        if findings is None:
            findings = event_findings
        elif event_findings != findings:
            raise _Slow  # one batch, one set of findings (`FastBatch.contract_findings`)
        if attributes != resource:
            resource = attributes
            resource_json = _json_text(attributes)
        row.append(resource_json)
        row.append("{}" if type(extras) is dict and not extras else _json_text(extras))
        if row[1] in event_ids:
            raise _Slow  # a repeat: `decide` judges the second against the first
        event_ids.add(row[1])
        rows.append(row)
    batch.contract_findings = findings or ()
    receipts = batch.receipts
    for emission in emissions:
        receipts.append(_receipt(tenant, stream, emission, times))
    batch._source = functools.partial(_record_models, value, _VERSION)
    return FastRecord(value, batch, receipt_id, received_at)


def _event(
    tenant: str, stream: str, event: Any, batch: FastBatch, times: dict[str, int]
) -> tuple[list[Any], tuple[str, ...], Any, Any]:
    """An event's row up to `extras` (its dimension rows added to `batch`), its contract
    findings, resource attributes and extras. The checks are `_keys`, `_text`, `_flag`,
    `_integer` and the others written out: this runs once per span."""
    if type(event) is not dict or tuple(event) != _EVENT_KEYS:
        raise _Slow
    (event_id, surface_id, agent_id, correlation_id, run_mode, provenance, timestamp,
     emission, trace_id, span_id, substrate, light_source, lens, outcome, multiplex_role,
     sdk_name, sdk_version, attributes, extras, contract_version_id,
     contract_findings) = event.values()  # fmt: skip
    if not (
        type(event_id) is type(surface_id) is type(agent_id) is type(correlation_id)
        is type(trace_id) is type(span_id) is type(multiplex_role) is type(sdk_name)
        is type(sdk_version) is type(contract_version_id) is str
    ):  # fmt: skip
        raise _Slow
    if not event_id or not surface_id or run_mode not in RUN_MODES:
        raise _Slow
    if provenance not in PROVENANCES or contract_version_id:
        raise _Slow  # checked against a contract version: `FastBatch` rows carry none
    ticks = _ticks(timestamp, times)
    if type(emission) is not dict or tuple(emission) != _EMISSION_KEYS:
        raise _Slow
    emission_stream, seq, final = emission.values()
    if type(emission_stream) is not str or emission_stream != stream:
        raise _Slow
    if type(seq) is not int or not 0 <= seq <= _INT64_MAX or type(final) is not bool:
        raise _Slow
    if type(substrate) is not dict or tuple(substrate) != _SUBSTRATE_KEYS:
        raise _Slow
    (sub_surface, sub_agent, sub_run_mode, sub_provenance, sub_lens, sub_light, columns,
     diagnostic) = substrate.values()  # fmt: skip
    if not (type(sub_surface) is type(sub_agent) is type(sub_lens) is type(sub_light) is str):
        raise _Slow
    if sub_run_mode not in RUN_MODES or sub_provenance not in PROVENANCES:
        raise _Slow
    columns = _text_map(columns)
    _text_map(diagnostic)
    if type(light_source) is not dict or tuple(light_source) != _LIGHT_SOURCE_KEYS:
        raise _Slow
    light_source_id, requested = light_source.values()
    if type(lens) is not dict or tuple(lens) != _LENS_KEYS:
        raise _Slow
    lens_version, fixture_id = lens.values()
    if not (type(light_source_id) is type(requested) is type(lens_version) is type(fixture_id)
            is str):  # fmt: skip
        raise _Slow
    if type(outcome) is not dict or tuple(outcome) != _OUTCOME_KEYS:
        raise _Slow
    (dimensions, cohort_tags, markers, latency_ms, cost_usd, tokens_input,
     tokens_output) = outcome.values()  # fmt: skip
    cohort_tags = _texts(cohort_tags)
    if type(markers) is not dict:
        raise _Slow
    for values in markers.values():
        _texts(values)
    findings = tuple(_texts(contract_findings))
    if type(dimensions) is not list:
        raise _Slow
    layers = [
        surface_id, agent_id, correlation_id, run_mode, provenance, ticks, lens_version,
        light_source_id, requested, columns, cohort_tags, stream,
    ]  # fmt: skip
    dimension_ids = _dimensions(tenant, event_id, _keyed(dimensions), layers, batch.dimensions)
    row = [
        tenant, event_id, surface_id, agent_id, correlation_id, run_mode, provenance, ticks,
        lens_version, light_source_id, requested, columns, cohort_tags,
        multiplex_role, fixture_id, markers,
        _optional_number(latency_ms), _optional_number(cost_usd),
        _optional_integer(tokens_input), _optional_integer(tokens_output),
        sdk_name, sdk_version, dimension_ids, stream, seq, final, trace_id, span_id,
    ]  # fmt: skip
    return row, findings, attributes, extras


def _dimensions(
    tenant: str,
    event_id: str,
    dimensions: Iterable[Iterable[Any]],
    layers: list[Any],
    rows: list[list[Any]],
) -> list[str]:
    """Append the event's dimension rows to `rows` (each dimension's six values in
    `DIMENSION_ROW`'s order, whatever shape its record gave them); their ids."""
    ids: list[str] = []
    for dimension_id, passed, score, expected, actual, judge in dimensions:
        if not (type(dimension_id) is type(expected) is type(actual) is type(judge) is str):
            raise _Slow
        if not dimension_id or (passed is not None and type(passed) is not bool):
            raise _Slow
        ids.append(dimension_id)
        rows.append(
            [
                tenant, event_id, dimension_id, passed, _optional_number(score),
                expected, actual, judge, *layers,
            ]
        )  # fmt: skip
    return ids


def _keyed(dimensions: list[Any]) -> Iterator[Iterable[Any]]:
    """A version 4 record's dimensions: objects of exactly the model's keys, in order."""
    for item in dimensions:
        if type(item) is not dict or tuple(item) != _DIMENSION_KEYS:
            raise _Slow
        yield item.values()


def _positional(dimensions: list[Any]) -> Iterator[Iterable[Any]]:
    """A version 7 record's dimensions: arrays of `DIMENSION_ROW`'s six values."""
    for item in dimensions:
        if type(item) is not list or len(item) != _DIMENSION_ROW_LENGTH:
            raise _Slow
        yield item


def _receipt(tenant: str, stream: str, document: Any, times: dict[str, int]) -> list[Any]:
    """An emission record's receipt row, the receipt id and time left to fill."""
    (emission_stream, seq, kind, final, quarantined, event_id, surface_id, event_time,
     sentinel) = _keys(document, _RECORD_KEYS_EMISSION).values()  # fmt: skip
    if emission_stream != stream or kind not in _KINDS:
        raise _Slow
    if type(seq) is not int or not 0 <= seq <= _INT64_MAX:
        raise _Slow
    if type(final) is not bool or type(quarantined) is not bool:
        raise _Slow
    if type(event_id) is not str or type(surface_id) is not str:
        raise _Slow
    counters: list[Any] = [None] * 7
    if sentinel is not None:
        values = _keys(sentinel, _SENTINEL_KEYS)
        counters = [
            *(_optional_integer(values[key]) for key in _SENTINEL_KEYS[:5]),
            _optional_time(values["window_start"]),
            _optional_time(values["window_end"]),
        ]
    return [
        tenant, stream, seq, None, kind, final, quarantined, event_id, surface_id,
        _ticks(event_time, times), None, *counters,
    ]  # fmt: skip


def _rows_record(value: bytes, document: Any, version: int = ROWS_VERSION) -> FastRecord:
    """A version 7 record's rows: the envelope and every value checked as for version 4
    (`_record`, `_event`, `_receipt`), the rows completed with the columns the record
    holds once (tenant, stream, an event's layers on its dimensions). `version`: 8 for
    the version 7 document of a version 8 record (`rows_of_columns`)."""
    record = _keys(document, _ROWS_KEYS)
    tenant = _text(record["tenant_id"], required=True)
    agents_value = record["agents"]
    agents = None if agents_value is None else frozenset(_texts(agents_value))
    receipt_id = _text(record["receipt_id"], required=True)
    received_at = _time(record["received_at"])
    stream = _text(record["stream"], required=True)
    findings = tuple(_texts(record["contract_findings"]))
    events, emissions = record["events"], record["emissions"]
    if type(events) is not list or type(emissions) is not list or (events and not emissions):
        raise _Slow
    batch = FastBatch(tenant, findings, agents=agents)
    objects: dict[str, bool] = {"{}": True}
    event_ids, rows, dimension_rows = batch.event_ids, batch.events, batch.dimensions
    for row in events:
        if type(row) is not list or len(row) != _EVENT_ROW_LENGTH:
            raise _Slow
        (event_id, surface_id, agent_id, correlation_id, run_mode, provenance, ticks,
         lens_version, light_source_id, requested, columns, cohort_tags, multiplex_role,
         fixture_id, markers, latency_ms, cost_usd, tokens_input, tokens_output, sdk_name,
         sdk_version, seq, final, trace_id, span_id, resource, extras,
         dimensions) = row  # fmt: skip
        if not (
            type(event_id) is type(surface_id) is type(agent_id) is type(correlation_id)
            is type(trace_id) is type(span_id) is type(multiplex_role) is type(sdk_name)
            is type(sdk_version) is type(lens_version) is type(light_source_id)
            is type(requested) is type(fixture_id) is type(resource) is type(extras) is str
        ):  # fmt: skip
            raise _Slow
        if not event_id or not surface_id or run_mode not in RUN_MODES:
            raise _Slow
        if provenance not in PROVENANCES or event_id in event_ids:
            raise _Slow  # a repeat: `decide` judges the second against the first
        if type(ticks) is not int or ticks % 1000 or not 0 <= ticks <= _INT64_MAX:
            raise _Slow
        if type(seq) is not int or not 0 <= seq <= _INT64_MAX or type(final) is not bool:
            raise _Slow
        _text_map(columns)
        if type(markers) is not dict:
            raise _Slow
        for values in markers.values():
            _texts(values)
        if not (objects.get(resource) and objects.get(extras)):
            _canonical(resource, objects)
            _canonical(extras, objects)
        if type(dimensions) is not list:
            raise _Slow
        _texts(cohort_tags)
        layers = [
            surface_id, agent_id, correlation_id, run_mode, provenance, ticks, lens_version,
            light_source_id, requested, columns, cohort_tags, stream,
        ]  # fmt: skip
        dimension_ids = _dimensions(
            tenant, event_id, _positional(dimensions), layers, dimension_rows
        )
        event_ids.add(event_id)
        rows.append(
            [
                tenant, event_id, surface_id, agent_id, correlation_id, run_mode, provenance,
                ticks, lens_version, light_source_id, requested, columns, cohort_tags,
                multiplex_role, fixture_id, markers,
                _optional_number(latency_ms), _optional_number(cost_usd),
                _optional_integer(tokens_input), _optional_integer(tokens_output),
                sdk_name, sdk_version, dimension_ids, stream, seq, final, trace_id, span_id,
                resource, extras,
            ]
        )  # fmt: skip
    times: dict[str, int] = {}
    receipts = batch.receipts
    for row in emissions:
        receipts.append(_receipt_row(tenant, stream, row, times))
    batch._source = functools.partial(_record_models, value, version)
    return FastRecord(value, batch, receipt_id, received_at, version)


def _canonical(text: str, objects: dict[str, bool]) -> None:
    """`text` is the JSON of an object as the store's rows write it (`ingest.store.rows`:
    keys sorted, compact), what the models give back for it; each text checked once."""
    if not objects.get(text):
        value = json.loads(text)
        if type(value) is not dict or rows_json(value) != text:
            raise _Slow
        objects[text] = True


def _receipt_row(tenant: str, stream: str, row: Any, times: dict[str, int]) -> list[Any]:
    """An emission row's receipt row (`_receipt` for version 7)."""
    if type(row) is not list or len(row) != _EMISSION_ROW_LENGTH:
        raise _Slow
    seq, kind, final, quarantined, event_id, surface_id, ticks, *counters = row
    if kind not in _KINDS or type(seq) is not int or not 0 <= seq <= _INT64_MAX:
        raise _Slow
    if type(final) is not bool or type(quarantined) is not bool:
        raise _Slow
    if type(event_id) is not str or type(surface_id) is not str:
        raise _Slow
    if type(ticks) is not int or ticks % 1000 or not 0 <= ticks <= _INT64_MAX:
        raise _Slow
    if kind == "sentinel":
        counters = [
            *(_optional_integer(v) for v in counters[:5]),
            _optional_time(counters[5]),
            _optional_time(counters[6]),
        ]
    elif any(v is not None for v in counters):
        raise _Slow
    return [
        tenant, stream, seq, None, kind, final, quarantined, event_id, surface_id, ticks, None,
        *counters,
    ]  # fmt: skip
