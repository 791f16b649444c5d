"""The rejection summary as a unit: at most one line per interval (clocks injected),
counts by reason, the first example; the sink's dead letters counted the same way."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from ingest.edge.answers import INTERNAL_ERROR
from ingest.errors import Backpressure, DecodeError
from ingest.metrics import REASON_LABELS, PipelineMetrics, reason_label
from ingest.service.rejections import LoggedDeadLetters, RefusalLog, RejectionLog, loggable
from schemas.records import PoisonLetter

T0 = dt.datetime(2026, 7, 1, 9, 0, tzinfo=dt.UTC)


class Clocks:
    def __init__(self) -> None:
        self.seconds = 100.0

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.seconds - 100.0)

    def monotonic(self) -> float:
        return self.seconds


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ingest.service.rejections"]


def test_one_line_per_interval_with_counts_and_the_first_example(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="ingest.service.rejections")
    clocks = Clocks()
    log = RejectionLog("span(s) rejected", 60, "look", clocks.wall, clocks.monotonic)
    log.add("holonograph.run_mode: missing", "span a")
    log.add("holonograph.run_mode: 'x' is not one of …", "span b")
    log.flush_if_due()
    assert lines(caplog) == [
        "2 span(s) rejected since 2026-07-01T09:00:00Z (2 holonograph.run_mode);"
        " first: span a: holonograph.run_mode: missing; look"
    ]
    clocks.seconds += 30
    log.add("holonograph.surface.id: missing", "span c")
    log.flush_if_due()  # half an interval later: counted, not logged
    assert len(lines(caplog)) == 1
    clocks.seconds += 31
    log.flush_if_due()
    assert lines(caplog)[1] == (
        "1 span(s) rejected since 2026-07-01T09:00:30Z (1 holonograph.surface.id);"
        " first: span c: holonograph.surface.id: missing; look"
    )
    log.flush()  # nothing new: nothing logged
    assert len(lines(caplog)) == 2


async def test_dead_letters_are_sent_then_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="ingest.service.rejections")
    sent: list[PoisonLetter] = []

    class Topic:
        async def send(self, letters: list[PoisonLetter]) -> None:
            sent.extend(letters)

    clocks = Clocks()
    log = RejectionLog("record(s) dead-lettered", 60, "topic dlq", clocks.wall, clocks.monotonic)
    letter = PoisonLetter(
        reason="not a record: bad JSON",
        dead_lettered_at=T0,
        source_topic="records",
        source_partition=3,
        source_offset=41,
    )
    await LoggedDeadLetters(Topic(), log).send([letter])
    assert sent == [letter]
    assert lines(caplog) == [
        "1 record(s) dead-lettered since 2026-07-01T09:00:00Z (1 other); first:"
        " record records[3]@41: not a record: bad JSON; topic dlq"
    ]


HOSTILE_REASONS = [
    "holonograph.substrate.k{n}: expected a string, got int",
    "holonograph.zz{n}: NaN is not a finite number",
    "holonograph.run_mode: 'mode-{n}' is not one of development|production",
    "span name 'holonograph.x{n}' is not in the wire contract",
    "event {n} (holonograph.dimension): dimension 'd{n}' graded twice",
    "dimension 'd{n}': neither holonograph.dimension.passed nor holonograph.dimension.score",
    "resource attributes: key{n}: NaN is not a finite number",
    "holonograph.emission.seq: must be >= 0, got -{n}",
    "contract: holonograph.substrate.c{n}: 'v{n}' is not an allowed value",
    "batch: events.{n}.k{n}: Field required",
    "free text {n} a client chose",
]


def test_reason_labels_are_a_fixed_set_whatever_the_values() -> None:
    labels = {reason_label(r.format(n=n)) for r in HOSTILE_REASONS for n in range(1000)}
    assert labels <= REASON_LABELS
    assert len(labels) == len(HOSTILE_REASONS) - 1  # two name a dimension: "span event"
    assert reason_label("holonograph.run_mode: missing") == "holonograph.run_mode"
    assert reason_label("contract: holonograph.substrate.region: 'apac' ...") == (
        "contract: holonograph.substrate.*"
    )


def test_a_clients_text_is_shown_short_escaped_and_redacted() -> None:
    assert loggable("span x\nWARNING forged line\x1b[31m") == (
        "span x\\nWARNING forged line\\x1b[31m"
    )
    assert loggable("bad \ud800 text") == "bad \\ud800 text"
    assert loggable("Authorization: Bearer s3cr3t-token") == "Authorization: Bearer ***"
    long = loggable("y" * 10_000)
    assert long.startswith("y" * 200) and long.endswith("... (9800 more characters)")


def test_refusals_are_counted_summarised_and_internal_errors_traced_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ingest.service.rejections")
    clocks = Clocks()
    metrics = PipelineMetrics()
    refusals = RefusalLog(metrics, 60, clocks.wall, clocks.monotonic)
    for _ in range(1000):
        refusals.observe_refusal("http", "malformed body", DecodeError("not protobuf"), "10.0.0.1")
        refusals.observe_refusal("grpc", "busy", Backpressure("full"), "10.0.0.2")
        try:
            raise RuntimeError("a bug of ours")
        except RuntimeError as err:
            refusals.observe_refusal("http", INTERNAL_ERROR, err, "10.0.0.3")
    records = [r for r in caplog.records if r.name == "ingest.service.rejections"]
    # The first refusal's line at once, one traceback; the rest wait for the interval.
    assert [bool(r.exc_info) for r in records] == [False, True]
    assert records[0].getMessage().startswith("1 request(s) refused since")
    clocks.seconds += 61
    refusals.summary.flush_if_due()
    last = caplog.records[-1].getMessage()
    assert last.startswith("1998 request(s) refused since")
    assert "999 http malformed body, 999 http internal error" in last
    assert "busy" not in last  # overload is answered with a retry delay, only counted
    exposition = metrics.exposition().decode()
    assert 'holonograph_requests_refused_total{reason="busy",transport="grpc"} 1000.0' in (
        exposition
    )
