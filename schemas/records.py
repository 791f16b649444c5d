"""The Kafka record format of the scale-out path, version 1 (see `schemas/RECORDS.md`).

A record is one UTF-8 JSON object with a `schema_version` and a `kind`:

- `batch`: validated events and emission records of ONE emission stream from one
  accepted request, with the request's `receipt_id` and `received_at` (so a
  redelivered record yields byte-identical rows). Key: the stream.
- `quarantined`: one span the receiver rejected, for the `quarantine` table.
- `poison`: a record a sink could not decode, the original bytes and the reason.

Decoding is strict: unknown fields, a wrong type or an unsupported version raise
`RecordError` with the reason, which the sink dead-letters.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas.events import EmissionRecord, EvaluationEvent, QuarantineRecord

SCHEMA_VERSION = 1
SUPPORTED_VERSIONS: frozenset[int] = frozenset({1})
VERSION_HEADER = "holonograph-schema-version"
KIND_HEADER = "holonograph-record-kind"


class RecordError(ValueError):
    """A record that cannot be decoded; the message is the dead-letter reason."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION


class BatchRecord(_Record):
    kind: Literal["batch"] = "batch"
    receipt_id: str = Field(min_length=1)
    received_at: dt.datetime
    stream: str = Field(min_length=1)
    events: tuple[EvaluationEvent, ...] = ()
    emissions: tuple[EmissionRecord, ...] = ()

    @model_validator(mode="after")
    def _one_stream(self) -> BatchRecord:
        streams = {e.emission.stream for e in self.events} | {e.stream for e in self.emissions}
        if streams - {self.stream}:
            raise ValueError(f"record of stream {self.stream!r} holds {sorted(streams)}")
        return self


class QuarantinedLetter(_Record):
    kind: Literal["quarantined"] = "quarantined"
    receipt_id: str = Field(min_length=1)
    received_at: dt.datetime
    span: QuarantineRecord


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


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(record: Record) -> bytes:
    """Compact JSON; datetimes as ISO 8601 with offset, bytes as base64."""
    return json_text(record).encode()


def json_text(model: BaseModel) -> str:
    """The JSON text of any model as it appears inside an encoded record."""
    body = model.model_dump(mode="python")
    return json.dumps(body, default=_default, separators=(",", ":"), ensure_ascii=False)


def headers(record: Record) -> list[tuple[str, bytes]]:
    """Kafka headers mirroring the body, for routing without parsing (informative only)."""
    return [
        (VERSION_HEADER, str(record.schema_version).encode()),
        (KIND_HEADER, record.kind.encode()),
    ]


def decode(value: bytes | None) -> Record:
    """Parse and schema-check one record; raises `RecordError` saying why not."""
    if not value:
        raise RecordError("empty record")
    try:
        body = json.loads(value)
    except (UnicodeDecodeError, ValueError) as err:
        raise RecordError(f"not JSON: {err}") from None
    if not isinstance(body, dict):
        raise RecordError("not a JSON object")
    version = body.get("schema_version")
    if version not in SUPPORTED_VERSIONS:
        supported = ",".join(str(v) for v in sorted(SUPPORTED_VERSIONS))
        raise RecordError(f"schema_version {version!r} is not supported (this build: {supported})")
    kind = body.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise RecordError(f"kind {kind!r} is not one of {'|'.join(_KINDS)}")
    model = _KINDS[kind]
    try:
        _unbase64(body, kind)
        return model.model_validate(body)
    except (ValidationError, RecordError) as err:
        raise RecordError(f"{kind}: {_first_problem(err)}") from None


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
    "KIND_HEADER",
    "SCHEMA_VERSION",
    "SUPPORTED_VERSIONS",
    "VERSION_HEADER",
    "BatchRecord",
    "PoisonLetter",
    "QuarantinedLetter",
    "Record",
    "RecordError",
    "decode",
    "encode",
    "headers",
]
