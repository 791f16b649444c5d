"""Which records the Kafka hand-off writes for a request its hot path took: version 8
(rows as columns, the default, for a request of one stream that fits one record; else
7), version 7 (rows, `HOLONOGRAPH_KAFKA_RECORD_VERSION=7`) or version 4 (`=4`, for
sinks that do not read 7 yet); a request of the reference path is version 4 either way.
No broker: `prepare` and the packing only."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from bench.payload import PayloadSpec, RequestFactory
from holonograph.cli import cli
from ingest.export.decode import parse_protobuf
from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import ANONYMOUS
from ingest.export.request import validate_request
from ingest.handoff.kafka import KafkaHandoff
from ingest.handoff.kafka_packing import pack
from ingest.service.config import KafkaSettings
from ingest.sink.fast import FastRecord, fast_record
from schemas.records import BatchRecord, decode, headers
from schemas.topics import Topics

AT = dt.datetime(2026, 11, 30, 14, 0, 0, tzinfo=dt.UTC)


RECORD_VERSION_ENV = "HOLONOGRAPH_KAFKA_RECORD_VERSION"


def _handoff(version: int | None = None) -> KafkaHandoff:
    """The hand-off `serve --kafka` builds: `version`, else the setting (environment)."""
    if version is None:
        version = KafkaSettings().kafka_record_version
    return KafkaHandoff(
        "localhost:1",
        Topics(),
        max_inflight_bytes=1 << 20,
        max_message_bytes=1_000_000,
        record_version=version,
    )


def _request() -> object:
    factory = RequestFactory(PayloadSpec(batch=8, sentinel_every=4, tag="handoffv"))
    return parse_protobuf(factory.body(0))


def _versions(handoff: KafkaHandoff, batch: object) -> set[int]:
    prepared = handoff.prepare(batch)  # type: ignore[arg-type]
    records = pack(prepared, "r" * 32, AT, 1_000_000)
    for record in records:
        taken = fast_record(record.value)
        assert isinstance(taken, FastRecord)
        assert isinstance(decode(record.value), BatchRecord)
    return {int(dict(_headers(r))["holonograph-schema-version"]) for r in records}


def _headers(record: object) -> list[tuple[str, str]]:
    return [(k, v.decode()) for k, v in headers(record.record)]  # type: ignore[attr-defined]


def test_a_hot_path_request_is_written_as_columns_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RECORD_VERSION_ENV, raising=False)
    handoff = _handoff()
    assert handoff.fast_batch_json is False  # rows need no models' JSON
    batch = fast_batch(_request(), with_json=handoff.fast_batch_json)  # type: ignore[arg-type]
    assert _versions(handoff, batch) == {8}


def test_a_request_of_several_streams_is_written_as_rows_at_version_8() -> None:
    """Columns only for one stream's rows: a request of two streams is version 7."""
    factory = RequestFactory(PayloadSpec(batch=8, sentinel_every=4, tag="handoffv"))
    request = parse_protobuf(factory.body(0))
    other = parse_protobuf(factory.body(1))
    request.resource_spans.extend(other.resource_spans)  # type: ignore[attr-defined]
    batch = fast_batch(request, with_json=False)  # type: ignore[arg-type]
    assert isinstance(batch, FastBatch) and len({r[1] for r in batch.receipts}) == 2
    assert _versions(_handoff(8), batch) == {7}
    assert _versions(_handoff(8), fast_batch(_request(), with_json=False)) == {8}  # type: ignore[arg-type]


def test_version_7_on_request_for_sinks_not_reading_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RECORD_VERSION_ENV, "7")
    handoff = _handoff()
    assert handoff.fast_batch_json is False
    batch = fast_batch(_request(), with_json=False)  # type: ignore[arg-type]
    assert _versions(handoff, batch) == {7}


def test_the_receiver_decodes_for_version_7_without_dimension_rows() -> None:
    """The export handler asks the hand-off what it reads: at version 7, no dimension
    rows laid out (`fast_batch(layers=False)`), and the same records as a batch with
    them; at version 4, laid out (the models' JSON needs them)."""
    from ingest.export.handler import ExportHandler

    request = _request()
    for version, layers in ((8, False), (7, False), (4, True)):
        handoff = _handoff(version)
        handler = ExportHandler(handoff)
        try:
            prepared = handler._prepare(request, ANONYMOUS)  # type: ignore[arg-type]
        finally:
            handler.close()
        assert isinstance(prepared.batch, FastBatch) and prepared.batch.layers is layers
        full = fast_batch(request, with_json=version == 4)  # type: ignore[arg-type]
        expected = pack(handoff.prepare(full), "r" * 32, AT, 1_000_000)  # type: ignore[arg-type]
        got = pack(prepared, "r" * 32, AT, 1_000_000)
        assert [r.value for r in got] == [r.value for r in expected]


def test_version_4_on_request_for_sinks_not_reading_7(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RECORD_VERSION_ENV, "4")
    handoff = _handoff()
    assert handoff.fast_batch_json is True
    batch = fast_batch(_request(), with_json=True)  # type: ignore[arg-type]
    assert _versions(handoff, batch) == {4}
    assert _versions(_handoff(4), batch) == {4}


def test_a_reference_path_request_stays_version_4() -> None:
    batch = validate_request(_request())  # type: ignore[arg-type]
    assert _versions(_handoff(7), batch) == {4}
    assert _versions(_handoff(8), batch) == {4}


@pytest.mark.parametrize("text", ["5", "seven", "9"])
def test_another_version_is_refused_at_start(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(RECORD_VERSION_ENV, text)
    with pytest.raises(ValidationError, match="kafka_record_version"):
        _handoff()
    with pytest.raises(ValueError, match="use 8, 7 or 4"):
        _handoff(6)


@pytest.mark.parametrize(
    "flags, environment",
    [(["--kafka-record-version", "6"], {}), ([], {RECORD_VERSION_ENV: "5"})],
)
def test_serve_refuses_another_version_as_a_configuration_error(
    flags: list[str], environment: dict[str, str]
) -> None:
    done = CliRunner().invoke(
        cli,
        ["serve", "--kafka", "127.0.0.1:1", "--grpc-port", "0", "--http-port", "0", *flags],
        env=environment,
    )
    assert done.exit_code == 2, done.output
    assert done.stderr == (
        "error: invalid configuration: kafka_record_version (--kafka-record-version or"
        " HOLONOGRAPH_KAFKA_RECORD_VERSION): use 8 (rows as columns), 7 (rows, for sinks"
        " older than 8) or 4 (models' JSON, for sinks older than 7)\n"
    )
