"""The rejection summary as a unit: at most one line per interval (clocks injected),
counts by reason, the first example; the sink's dead letters counted the same way."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from ingest.service.rejections import LoggedDeadLetters, RejectionLog
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
        "2 span(s) rejected since 2026-07-01T09:00:00Z (1 holonograph.run_mode: missing,"
        " 1 holonograph.run_mode); first: span a: holonograph.run_mode: missing; look"
    ]
    clocks.seconds += 30
    log.add("holonograph.surface.id: missing", "span c")
    log.flush_if_due()  # half an interval later: counted, not logged
    assert len(lines(caplog)) == 1
    clocks.seconds += 31
    log.flush_if_due()
    assert lines(caplog)[1] == (
        "1 span(s) rejected since 2026-07-01T09:00:30Z (1 holonograph.surface.id: missing);"
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
        "1 record(s) dead-lettered since 2026-07-01T09:00:00Z (1 not a record: bad JSON); first:"
        " record records[3]@41: not a record: bad JSON; topic dlq"
    ]
