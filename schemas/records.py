"""The Kafka record format of the scale-out path, versions 4, 5 and 6 (see
`schemas/RECORDS.md`).

A record is one UTF-8 JSON object with a `schema_version` and a `kind`:

- `batch`: validated events and emission records of ONE emission stream from one
  accepted request, with the request's `tenant_id`, `agents`, `receipt_id` and
  `received_at` (so a redelivered record yields byte-identical rows). Key: the stream.
- `quarantined`: one span the receiver rejected, for the `quarantine` table, with
  the request's tenant and agents.
- `poison`: a record a sink could not decode, the original bytes and the reason.

Version 5 is a batch record of events without emission ordinals (OpenTelemetry GenAI
evaluations): its `stream` is '' and its events' `emission` null, and it holds no
emission records; writers write it only for such events, every other record as version
4, so a sink that reads version 4 only keeps reading them. Version 6 is a batch record of
a stream that also holds `overrides` (`holonograph.override` spans,
`schemas.events.OverrideEvent`); it is written only for a record that holds one.

Version 4 records carry `agents`, what the request's token may write (null: any
agent): the sink checks stream ownership with it (`ingest.store.owners`). Version 3
events carry the receiver's contract check (`contract_version_id`,
`contract_findings`). Versions 1 (no `tenant_id`: its rows belong to tenant
`default`), 2 (no contract fields: checked against no contract) and 3 (no `agents`)
are still read. Decoding is strict: unknown fields, a wrong type, a `tenant_id`
missing from a version 2+ record or present in a version 1 record, contract fields in
a record older than version 3, `agents` missing from a version 4 record or present in
an older one, or an unsupported version raise `RecordError` with the reason, which
the sink dead-letters.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import to_json

from schemas.events import (
    DEFAULT_TENANT,
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
)

# What writers write for a record of an emission stream.
SCHEMA_VERSION = 4
SUPPORTED_VERSIONS: frozenset[int] = frozenset({1, 2, 3, 4, 5, 6, 7, 8})
# The first version whose batch and quarantined records carry `tenant_id`.
TENANT_VERSION = 2
# The first version whose events carry `contract_version_id` and `contract_findings`.
CONTRACT_VERSION = 3
# The first version whose batch and quarantined records carry `agents`.
OWNER_VERSION = 4
# The version of a batch record of events without emission ordinals (stream '').
NO_ORDINALS_VERSION = 5
# The version of a batch record that holds overrides (`holonograph.override` spans).
OVERRIDE_VERSION = 6
# The version of a batch record that carries its events and emission records as rows
# (`decode_rows`): what a receiver writes for a request its hot path took.
ROWS_VERSION = 7
# The version of a batch record that carries the same rows as columns (`rows_of_columns`):
# what a receiver writes for a hot-path request of one stream that fits one record.
COLUMNS_VERSION = 8
# The `stream` of such a record: never an emission stream's name.
NO_STREAM = ""
_CONTRACT_FIELDS = frozenset({"contract_version_id", "contract_findings"})
VERSION_HEADER = "holonograph-schema-version"
KIND_HEADER = "holonograph-record-kind"


class RecordError(ValueError):
    """A record that cannot be decoded; the message is the dead-letter reason."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION

    @field_validator("schema_version")
    @classmethod
    def _supported(cls, version: int) -> int:
        if version not in SUPPORTED_VERSIONS:
            raise ValueError(_unsupported(version))
        return version


def _check_tenant(record: BatchRecord | QuarantinedLetter) -> None:
    """Version 1 has no tenant (its rows are tenant `default`); from version 2 on the
    tenant is required. In code, every new record names its tenant. A version 7 (8)
    record holds rows (`decode_rows`, `rows_of_columns`), never these models."""
    if record.schema_version in (ROWS_VERSION, COLUMNS_VERSION):
        raise ValueError(
            f"schema_version {record.schema_version}: a batch record of rows, not of models"
        )
    given = "tenant_id" in record.model_fields_set
    if record.schema_version < TENANT_VERSION and given:
        raise ValueError(f"tenant_id: not a field of schema_version {record.schema_version}")
    if record.schema_version >= TENANT_VERSION and not given:
        raise ValueError(f"tenant_id: required from schema_version {TENANT_VERSION} on")
    given = "agents" in record.model_fields_set
    if record.schema_version < OWNER_VERSION and given:
        raise ValueError(f"agents: not a field of schema_version {record.schema_version}")
    if record.schema_version >= OWNER_VERSION and not given:
        raise ValueError(f"agents: required from schema_version {OWNER_VERSION} on")


class BatchRecord(_Record):
    kind: Literal["batch"] = "batch"
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1)
    # What the request's token may write, sorted (None: any agent); unknown before v4.
    agents: tuple[str, ...] | None = None
    receipt_id: str = Field(min_length=1)
    received_at: dt.datetime
    stream: str
    events: tuple[EvaluationEvent, ...] = ()
    emissions: tuple[EmissionRecord, ...] = ()
    # From version 6 on: the stream's overrides (a record of another version has none).
    overrides: tuple[OverrideEvent, ...] = ()

    @model_validator(mode="after")
    def _one_stream(self) -> BatchRecord:
        _check_tenant(self)
        if "overrides" in self.model_fields_set and self.schema_version < OVERRIDE_VERSION:
            raise ValueError(f"overrides: not a field of schema_version {self.schema_version}")
        if self.schema_version < CONTRACT_VERSION:
            for event in self.events:
                if event.model_fields_set & _CONTRACT_FIELDS:
                    raise ValueError(
                        f"contract fields: not fields of schema_version {self.schema_version}"
                    )
        if self.stream == NO_STREAM:
            if self.schema_version < NO_ORDINALS_VERSION:
                raise ValueError(
                    f"stream: empty, and a record of schema_version {self.schema_version} has one"
                )
            if self.emissions or self.overrides or any(e.emission is not None for e in self.events):
                raise ValueError("a record of no stream holds only events without ordinals")
            return self
        if any(e.emission is None for e in self.events):
            raise ValueError(f"record of stream {self.stream!r} holds an event without ordinals")
        if any(o.emission is None for o in self.overrides):
            raise ValueError(f"record of stream {self.stream!r} holds an override without ordinals")
        streams = {e.stream for e in self.events} | {e.stream for e in self.emissions}
        streams |= {o.stream for o in self.overrides}
        if streams - {self.stream}:
            raise ValueError(f"record of stream {self.stream!r} holds {sorted(streams)}")
        return self


class QuarantinedLetter(_Record):
    kind: Literal["quarantined"] = "quarantined"
    tenant_id: str = Field(default=DEFAULT_TENANT, min_length=1)
    agents: tuple[str, ...] | None = None
    receipt_id: str = Field(min_length=1)
    received_at: dt.datetime
    span: QuarantineRecord

    @model_validator(mode="after")
    def _tenant(self) -> QuarantinedLetter:
        _check_tenant(self)
        return self


class PoisonLetter(_Record):
    kind: Literal["poison"] = "poison"
    reason: str
    dead_lettered_at: dt.datetime
    source_topic: str
    source_partition: int
    source_offset: int
    key: bytes | None = None
    value: bytes = b""


Record = BatchRecord | QuarantinedLetter | PoisonLetter
_KINDS: dict[str, type[BatchRecord] | type[QuarantinedLetter] | type[PoisonLetter]] = {
    "batch": BatchRecord,
    "quarantined": QuarantinedLetter,
    "poison": PoisonLetter,
}
_BYTES_FIELDS = {"poison": ("key", "value")}
# How a batch record of this version is laid out by its writers (the fields in model
# order, compact), so a receiver can join pre-serialized events into a record:
#   batch_head(batch_envelope(...), stream) + events + EMISSIONS + emissions + TAIL
BATCH_HEAD = b'{"schema_version":%d,"kind":"batch","tenant_id":' % SCHEMA_VERSION
_AGENTS = b',"agents":'
_RECEIPT_ID = b',"receipt_id":'
_RECEIVED_AT = b',"received_at":'
_STREAM = b',"stream":'
_EVENTS = b',"events":['
_EMISSIONS = b'],"emissions":['
_TAIL = b"]}"
_FINDINGS = b',"contract_findings":'
# A version 7 record: the envelope of version 4 with the batch's `contract_findings`
# (every event's), then its rows (RECORDS.md): an event row holds these values (times as
# nanoseconds since the epoch, in whole microseconds; resource attributes and extras
# as the JSON text of an object, keys sorted), its dimensions as rows of
# `DIMENSION_ROW`; an emission row holds `EMISSION_ROW`.
_COLUMNS_KEY_SET = frozenset(
    ("schema_version", "kind", "tenant_id", "agents", "receipt_id", "received_at", "stream",
     "contract_findings", "events", "dimensions", "emissions")
)  # fmt: skip
_ROWS_KEY_SET = frozenset(
    ("schema_version", "kind", "tenant_id", "agents", "receipt_id", "received_at", "stream",
     "contract_findings", "events", "emissions")
)  # fmt: skip
EVENT_ROW = (
    "event_id", "surface_id", "agent_id", "correlation_id", "run_mode", "provenance",
    "timestamp_ns", "lens_version", "light_source_id", "requested", "columns", "cohort_tags",
    "multiplex_role", "fixture_id", "markers", "latency_ms", "cost_usd", "tokens_input",
    "tokens_output", "sdk_name", "sdk_version", "seq", "final", "trace_id", "span_id",
    "resource_attributes", "extras", "dimensions",
)  # fmt: skip
DIMENSION_ROW = ("dimension_id", "passed", "score", "expected", "actual", "judge")
EMISSION_ROW = (
    "seq", "kind", "final", "quarantined", "event_id", "surface_id", "event_time_ns",
    "interval_ms", "offered", "delivered", "dropped", "failed", "window_start", "window_end",
)  # fmt: skip
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Room for the receipt id and time when a record is sized before they are known (a
# 32-character receipt id and a time with microseconds need 81 bytes).
_ENVELOPE_ALLOWANCE = 128
_FAST_PREFIXES_BY = {
    version: b'{"schema_version":%d,"kind":"batch",' % version for version in SUPPORTED_VERSIONS
}
_FAST_PREFIXES = tuple(
    _FAST_PREFIXES_BY[v]
    for v in sorted(SUPPORTED_VERSIONS)
    if v not in (ROWS_VERSION, COLUMNS_VERSION)
)


def record_agents(agents: frozenset[str] | None) -> tuple[str, ...] | None:
    """A token's agents as records carry them: sorted, None for any agent."""
    return None if agents is None else tuple(sorted(agents))


def batch_envelope(
    tenant_id: str,
    agents: tuple[str, ...] | None,
    receipt_id: str,
    received_at: dt.datetime,
    version: int = SCHEMA_VERSION,
) -> bytes:
    """A batch record's fields before its stream: shared by every batch record of a
    request (of one `version`)."""
    return (
        _FAST_PREFIXES_BY[version]
        + b'"tenant_id":'
        + to_json(tenant_id)
        + _AGENTS
        + to_json(agents)
        + _RECEIPT_ID
        + to_json(receipt_id)
        + _RECEIVED_AT
        + to_json(received_at)
    )


def batch_head(envelope: bytes, stream: str) -> bytes:
    """Everything of a batch record of `stream` before its first event."""
    return envelope + _STREAM + to_json(stream) + _EVENTS


def batch_frame_size(head: bytes) -> int:
    """The bytes of a record with this head besides its events' and emissions' JSON
    (and the commas between them)."""
    return len(head) + len(_EMISSIONS) + len(_TAIL)


def empty_batch_size(tenant_id: str, agents: tuple[str, ...] | None, stream: str) -> int:
    """A batch record of `stream` with no events, for any receipt id and time a
    receiver writes."""
    head = batch_head(
        BATCH_HEAD + to_json(tenant_id) + _AGENTS + to_json(agents) + _RECEIPT_ID, stream
    )
    return batch_frame_size(head) + _ENVELOPE_ALLOWANCE


def join_batch(head: bytes, events: Iterable[bytes], emissions: Iterable[bytes]) -> bytes:
    """A batch record from its head and its events' and emissions' JSON, in order: the
    bytes `encode` writes for the same record."""
    return b"".join((head, b",".join(events), _EMISSIONS, b",".join(emissions), _TAIL))


def rows_head(envelope: bytes, stream: str, findings: Sequence[str]) -> bytes:
    """Everything of a version 7 record of `stream` before its first event row
    (`envelope`: `batch_envelope(..., ROWS_VERSION)`); `join_batch` completes it with
    the event and emission rows' JSON."""
    return envelope + _STREAM + to_json(stream) + _FINDINGS + to_json(findings) + _EVENTS


def empty_rows_size(
    tenant_id: str, agents: tuple[str, ...] | None, stream: str, findings: Sequence[str]
) -> int:
    """A version 7 record of `stream` with no rows, for any receipt id and time."""
    envelope = _FAST_PREFIXES_BY[ROWS_VERSION] + b'"tenant_id":' + to_json(tenant_id)
    head = rows_head(envelope + _AGENTS + to_json(agents) + _RECEIPT_ID, stream, findings)
    return batch_frame_size(head) + _ENVELOPE_ALLOWANCE


def columns_head(envelope: bytes, stream: str, findings: Sequence[str]) -> bytes:
    """A version 8 record of `stream` up to its tables (`envelope`: `batch_envelope(...,
    COLUMNS_VERSION)`): the tables' object (`{"events":...}`) follows without its `{`."""
    return envelope + _STREAM + to_json(stream) + _FINDINGS + to_json(findings) + b","


def rows_of_columns(body: dict[str, Any]) -> dict[str, Any]:
    """A version 8 record (parsed JSON) as the version 7 record of the same rows (the
    parsed JSON of it, for `decode_rows`): each table's columns, a column of one value
    standing for that value in every row; an event row's `dimensions` are the next
    `dimension_count` rows of the `dimensions` table. Raises `RecordError` for anything
    not of that layout (a table's row count, a column's length, the counts' sum)."""
    keys = set(body)
    for key in sorted(keys - _COLUMNS_KEY_SET):
        raise RecordError(f"batch: {key}: not a field of schema_version {COLUMNS_VERSION}")
    for key in sorted(_COLUMNS_KEY_SET - keys):
        raise RecordError(f"batch: {key}: Field required")
    try:
        events = _table(body["events"], len(EVENT_ROW), "events")
        dimensions = _table(body["dimensions"], len(DIMENSION_ROW), "dimensions")
        emissions = _table(body["emissions"], len(EMISSION_ROW), "emissions")
        at = 0
        for row in events:
            count = row[-1]
            if type(count) is not int or count < 0:
                raise ValueError(f"events: dimension_count {count!r}: not a count")
            row[-1] = dimensions[at : at + count]
            at += count
        if at != len(dimensions):
            raise ValueError(f"dimensions: {len(dimensions)} rows, the events count {at}")
    except (TypeError, ValueError) as err:
        raise RecordError(f"batch: columns: {err}") from None
    return {
        "schema_version": ROWS_VERSION, "kind": body["kind"], "tenant_id": body["tenant_id"],
        "agents": body["agents"], "receipt_id": body["receipt_id"],
        "received_at": body["received_at"], "stream": body["stream"],
        "contract_findings": body["contract_findings"], "events": events,
        "emissions": emissions,
    }  # fmt: skip


def _table(table: Any, width: int, name: str) -> list[list[Any]]:
    """The rows of a version 8 table: `{"rows": n, "columns": [...]}`, `width` columns
    of `n` values, or of one value for all `n`."""
    if type(table) is not dict or tuple(table) != ("rows", "columns"):
        raise ValueError(f"{name}: an object of rows and columns")
    count, columns = table["rows"], table["columns"]
    if type(count) is not int or count < 0 or type(columns) is not list:
        raise ValueError(f"{name}: a row count and an array of columns")
    if len(columns) != width:
        raise ValueError(f"{name}: {width} columns, not {len(columns)}")
    full: list[list[Any]] = []
    for column in columns:
        if type(column) is not list or len(column) not in (count, 1) or (count == 0 and column):
            raise ValueError(f"{name}: a column of {count} values (or one for all)")
        full.append(column if len(column) == count else column * count)
    return [list(row) for row in zip(*full, strict=True)]


def decode_rows(body: dict[str, Any]) -> BatchRecord:
    """A version 7 record (parsed JSON) as models: the batch record of version 4 that
    holds the same events and emission records (`schema_version` 4: encoded again, it
    is that record). Every check of a version 4 record applies, and the rows' own: their
    lengths, times in whole microseconds since the epoch, resource attributes and extras
    as JSON objects, no sentinel counters on an evaluation's arrival."""
    keys = set(body)
    for key in sorted(keys - _ROWS_KEY_SET):
        raise RecordError(f"batch: {key}: not a field of schema_version {ROWS_VERSION}")
    for key in sorted(_ROWS_KEY_SET - keys):
        raise RecordError(f"batch: {key}: Field required")
    stream, findings = body["stream"], body["contract_findings"]
    events, emissions = body["events"], body["emissions"]
    try:
        if not isinstance(stream, str) or not stream:
            raise ValueError(f"stream: a record of schema_version {ROWS_VERSION} has one")
        if not isinstance(events, list) or not isinstance(emissions, list):
            raise ValueError("events, emissions: arrays of rows")
        document = {
            "schema_version": SCHEMA_VERSION,
            "kind": "batch",
            "tenant_id": body["tenant_id"],
            "agents": body["agents"],
            "receipt_id": body["receipt_id"],
            "received_at": body["received_at"],
            "stream": stream,
            "events": [_event_document(row, stream, findings) for row in events],
            "emissions": [_emission_document(row, stream) for row in emissions],
        }
    except (TypeError, ValueError, AttributeError, OverflowError) as err:
        raise RecordError(f"batch: rows: {err}") from None
    try:
        return BatchRecord.model_validate(document)
    except ValidationError as err:
        raise RecordError(f"batch: {_first_problem(err)}") from None


def _from_ticks(ticks: Any) -> dt.datetime:
    if type(ticks) is not int or ticks % 1000:
        raise ValueError(f"time {ticks!r}: not whole microseconds since the epoch")
    return _EPOCH + dt.timedelta(microseconds=ticks // 1000)


def _object(text: Any) -> dict[str, Any]:
    value = json.loads(text) if isinstance(text, str) else None
    if not isinstance(value, dict):
        raise ValueError(f"{text!r}: not the JSON text of an object")
    return value


def _event_document(row: Any, stream: str, findings: Any) -> dict[str, Any]:
    if type(row) is not list or len(row) != len(EVENT_ROW):
        raise ValueError(f"an event row of {len(EVENT_ROW)} values, not {row!r:.80}")
    (event_id, surface_id, agent_id, correlation_id, run_mode, provenance, ticks,
     lens_version, light_source_id, requested, columns, cohort_tags, multiplex_role,
     fixture_id, markers, latency_ms, cost_usd, tokens_input, tokens_output, sdk_name,
     sdk_version, seq, final, trace_id, span_id, resource, extras, dimensions) = row  # fmt: skip
    if type(dimensions) is not list or any(
        type(d) is not list or len(d) != len(DIMENSION_ROW) for d in dimensions
    ):
        raise ValueError(f"dimensions: rows of {len(DIMENSION_ROW)} values")
    if type(cohort_tags) is not list:
        raise ValueError("cohort_tags: an array")
    return {
        "event_id": event_id, "surface_id": surface_id, "agent_id": agent_id,
        "correlation_id": correlation_id, "run_mode": run_mode, "provenance": provenance,
        "timestamp": _from_ticks(ticks), "emission": {"stream": stream, "seq": seq, "final": final},
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
            "dimensions": [dict(zip(DIMENSION_ROW, d, strict=True)) for d in dimensions],
            "cohort_tags": cohort_tags, "markers": markers, "latency_ms": latency_ms,
            "cost_usd": cost_usd, "tokens_input": tokens_input, "tokens_output": tokens_output,
        },
        "multiplex_role": multiplex_role, "sdk_name": sdk_name, "sdk_version": sdk_version,
        "resource_attributes": _object(resource), "extras": _object(extras),
        "contract_version_id": "", "contract_findings": findings,
    }  # fmt: skip


def _emission_document(row: Any, stream: str) -> dict[str, Any]:
    if type(row) is not list or len(row) != len(EMISSION_ROW):
        raise ValueError(f"an emission row of {len(EMISSION_ROW)} values, not {row!r:.80}")
    seq, kind, final, quarantined, event_id, surface_id, ticks, *counters = row
    sentinel = dict(zip(EMISSION_ROW[7:], counters, strict=True))
    if kind != "sentinel" and any(v is not None for v in counters):
        raise ValueError("an evaluation's emission row with sentinel counters")
    return {
        "stream": stream, "seq": seq, "kind": kind, "final": final, "quarantined": quarantined,
        "event_id": event_id, "surface_id": surface_id, "event_time": _from_ticks(ticks),
        "sentinel": sentinel if kind == "sentinel" else None,
    }  # fmt: skip


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _rfc3339(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(record: Record) -> bytes:
    """Compact JSON; datetimes as RFC 3339 (`Z` for UTC), bytes as base64.

    A batch record goes through pydantic's Rust serializer (`join_batch` assembles the
    same bytes from pre-serialized events); letters, rare and holding bytes, through
    `json_text`."""
    if isinstance(record, BatchRecord):
        return record.__pydantic_serializer__.to_json(record, exclude=_not_of_version(record))
    return json_text(record, exclude=_not_of_version(record)).encode()


def _not_of_version(record: Record) -> dict[str, Any] | None:
    """The fields a record of its version does not have (a record read as an older
    version, written again: a refused record's letter, a replay)."""
    if isinstance(record, PoisonLetter):
        return None
    if record.schema_version >= OWNER_VERSION:
        if isinstance(record, BatchRecord) and record.schema_version < OVERRIDE_VERSION:
            return _NO_OVERRIDES
        return None
    absent: dict[str, Any] = {"agents": True}
    if isinstance(record, BatchRecord):
        absent["overrides"] = True
    if record.schema_version < TENANT_VERSION:
        absent["tenant_id"] = True
    if isinstance(record, BatchRecord) and record.schema_version < CONTRACT_VERSION:
        absent["events"] = {"__all__": dict.fromkeys(_CONTRACT_FIELDS, True)}
    return absent


_NO_OVERRIDES: dict[str, Any] = {"overrides": True}


def _rfc3339(value: dt.datetime) -> str:
    """As pydantic writes datetimes: `Z` for UTC, so every record kind reads alike."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def json_text(model: BaseModel, exclude: dict[str, Any] | None = None) -> str:
    """The JSON text of any model as it appears inside an encoded record."""
    body = model.model_dump(mode="python", exclude=exclude)
    return json.dumps(body, default=_default, separators=(",", ":"), ensure_ascii=False)


def headers(record: Record) -> list[tuple[str, bytes]]:
    """Kafka headers mirroring the body, for routing without parsing (informative only)."""
    return [
        (VERSION_HEADER, str(record.schema_version).encode()),
        (KIND_HEADER, record.kind.encode()),
    ]


def _unsupported(version: object) -> str:
    supported = ",".join(str(v) for v in sorted(SUPPORTED_VERSIONS))
    return f"schema_version {version!r} is not supported (this build: {supported})"


def decode(value: bytes | None) -> Record:
    """Parse and schema-check one record; raises `RecordError` saying why not.

    A batch record as our encoder writes it (the envelope's first two keys in
    order) is parsed and validated in one pass by pydantic's Rust JSON validator,
    under the same strict model. Anything else, and any record that pass rejects,
    takes the general path, which accepts exactly the same records and names the
    problem."""
    if not value:
        raise RecordError("empty record")
    fast = decode_batch_fast(value)
    if fast is not None:
        return fast
    try:
        body = json.loads(value)
    except (UnicodeDecodeError, ValueError) as err:
        raise RecordError(f"not JSON: {err}") from None
    if not isinstance(body, dict):
        raise RecordError("not a JSON object")
    version = body.get("schema_version")
    if isinstance(version, list | dict) or version not in SUPPORTED_VERSIONS:  # unhashable
        raise RecordError(_unsupported(version))
    kind = body.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise RecordError(f"kind {kind!r} is not one of {'|'.join(_KINDS)}")
    if version == ROWS_VERSION and kind == "batch":
        return decode_rows(body)
    if version == COLUMNS_VERSION and kind == "batch":
        return decode_rows(rows_of_columns(body))
    model = _KINDS[kind]
    try:
        _unbase64(body, kind)
        return model.model_validate(body)
    except (ValidationError, RecordError) as err:
        raise RecordError(f"{kind}: {_first_problem(err)}") from None


def decode_batch_fast(value: bytes) -> BatchRecord | None:
    """`decode`'s fast path: a batch record laid out as the writers write it, parsed
    and validated in one pass by pydantic's Rust JSON validator; None for anything
    else (and for a record that pass rejects: the general path says why)."""
    if not value.startswith(_FAST_PREFIXES):
        return None
    try:
        return BatchRecord.model_validate_json(value)
    except ValidationError:
        return None


def _unbase64(body: dict[str, Any], kind: str) -> None:
    fields = [(body, name) for name in _BYTES_FIELDS.get(kind, ())]
    if kind == "quarantined" and isinstance(body.get("span"), dict):
        fields.append((body["span"], "span_proto"))
    for holder, name in fields:
        text = holder.get(name)
        if isinstance(text, str):
            try:
                holder[name] = base64.b64decode(text, validate=True)
            except binascii.Error:
                raise RecordError(f"{name}: not base64") from None


def _first_problem(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(err)


__all__ = [
    "BATCH_HEAD",
    "COLUMNS_VERSION",
    "CONTRACT_VERSION",
    "KIND_HEADER",
    "NO_ORDINALS_VERSION",
    "NO_STREAM",
    "OVERRIDE_VERSION",
    "OWNER_VERSION",
    "ROWS_VERSION",
    "SCHEMA_VERSION",
    "SUPPORTED_VERSIONS",
    "TENANT_VERSION",
    "VERSION_HEADER",
    "BatchRecord",
    "PoisonLetter",
    "QuarantinedLetter",
    "Record",
    "RecordError",
    "batch_envelope",
    "batch_frame_size",
    "batch_head",
    "columns_head",
    "decode",
    "decode_batch_fast",
    "decode_rows",
    "empty_batch_size",
    "empty_rows_size",
    "encode",
    "headers",
    "join_batch",
    "record_agents",
    "rows_head",
    "rows_of_columns",
]
