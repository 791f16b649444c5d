"""Rejections made visible on the service's log.

OTLP exporters treat a partial success as success and log nothing, so without this a
user learns that fail-closed validation drops their spans only by querying the
quarantine. The receiver logs a summary line instead: counts by reason since the last
line and the first example, at most one line per interval (the first rejection after
a quiet interval is logged at once; a flood becomes one line per interval). The sink
does the same for the poison records it dead-letters, and the receiver for the
requests its edge refuses (`RefusalLog`). Reasons are counted by a fixed
vocabulary; the one example shown is redacted (`ingest.redact`), cut to a line's
width and escaped, so a client's text can neither forge a log line nor flood one.

Everything here runs on the service's event loop (the export path's observer, the
sink's dead-letter send and the flush task), so no lock is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ingest.edge.answers import CLIENT_REASONS, INTERNAL_ERROR
from ingest.export.handler import ExportOutcome
from ingest.metrics import PipelineMetrics, reason_label
from ingest.redact import redact
from schemas.events import QuarantineRecord
from schemas.times import Clock, rfc3339, utc_now

if TYPE_CHECKING:
    from ingest.sink.dlq import DeadLetterSink
    from schemas.records import PoisonLetter

log = logging.getLogger(__name__)

_SHOWN_REASONS = 5
# Characters of a client's text (an example, a reason) shown on a line.
_SHOWN_CHARACTERS = 200


def loggable(text: str) -> str:
    """A client's `text` safe on one log line: secrets masked, at most
    `_SHOWN_CHARACTERS` shown, line breaks, control characters and lone surrogates
    escaped."""
    shown = text[:_SHOWN_CHARACTERS]
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in shown)
    safe = safe.encode("utf-8", "backslashreplace").decode()
    if len(text) > _SHOWN_CHARACTERS:
        safe += f"... ({len(text) - _SHOWN_CHARACTERS} more characters)"
    return redact(safe)


class RejectionLog:
    """Counts rejections by reason and logs them as one line per `interval_seconds`:
    `what` names them ("span(s) rejected"), `hint` says where to look next."""

    def __init__(
        self,
        what: str,
        interval_seconds: float,
        hint: str,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ) -> None:
        self._what = what
        self._level = level
        self._interval = interval_seconds
        self._hint = hint
        self._clock = clock
        self._monotonic = monotonic
        self._counts: Counter[str] = Counter()
        self._first: tuple[str, str] | None = None
        self._since: dt.datetime | None = None
        self._last_line = -math.inf
        self._task: asyncio.Task[None] | None = None

    def add(self, reason: str, example: str, label: str | None = None, count: int = 1) -> None:
        """Count `count` rejections under `label` (default: its reason's
        `reason_label`); `example` names the (first) rejected item (span, record,
        request)."""
        if not self._counts:
            self._since = self._clock()
            self._first = (example, reason)
        self._counts[reason_label(reason) if label is None else label] += count

    def flush_if_due(self) -> None:
        """Log now unless a line went out less than an interval ago (then `run` will)."""
        if self._monotonic() - self._last_line >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Log what was counted since the last line, if anything."""
        if not self._counts or self._first is None or self._since is None:
            return
        total = sum(self._counts.values())
        shown = self._counts.most_common(_SHOWN_REASONS)
        reasons = ", ".join(f"{n} {reason}" for reason, n in shown)
        if len(self._counts) > len(shown):
            reasons += f", {len(self._counts) - len(shown)} more reason(s)"
        example, reason = self._first
        log.log(
            self._level,
            "%d %s since %s (%s); first: %s: %s; %s",
            total,
            self._what,
            rfc3339(self._since),
            reasons,
            loggable(example),
            loggable(reason),
            self._hint,
        )
        self._counts.clear()
        self._first = self._since = None
        self._last_line = self._monotonic()

    def start(self) -> None:
        """Flush every interval from now until `stop`."""
        self._task = asyncio.create_task(self._every_interval(), name="rejection-log")

    async def stop(self) -> None:
        """Stop flushing; what was counted since the last line is logged now."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.flush()

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.flush()

    # --- sources -------------------------------------------------------------------

    def observe_export(self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]) -> None:
        """The export path's observer: each quarantined span (or log record) of a request."""
        self.observe_rejected(rejected, "log record" if outcome.signal == "logs" else "span")

    def observe_rejected(self, rejected: Sequence[QuarantineRecord], noun: str = "span") -> None:
        """Each quarantined span (of a request, or of a sink batch)."""
        for record in rejected:
            self.add(record.reason, f"{noun} {record.span_id or '?'} ({record.span_name})")
        if rejected:
            self.flush_if_due()


IGNORED = "not a holonograph or OpenTelemetry GenAI span"


class IgnoredSpans:
    """The export path's observer of spans (and log records) ignored as not Holonograph
    or GenAI ones: nothing of them is stored, which is right for a sidecar that sees
    every trace but baffling when it is every span a new user sends. `serve -v` shows
    them as one INFO line per interval."""

    def __init__(self, log_: RejectionLog) -> None:
        self.log = log_

    def observe_export(self, outcome: ExportOutcome, rejected: Sequence[QuarantineRecord]) -> None:
        if outcome.ignored_spans:
            noun = "log record(s)" if outcome.signal == "logs" else "span(s)"
            example = f"{outcome.ignored_spans} {noun} of one {outcome.signal} request"
            self.log.add(IGNORED, example, IGNORED, outcome.ignored_spans)
            self.log.flush_if_due()


class LoggedDeadLetters:
    """A dead-letter sink that also counts what it sends on a `RejectionLog`."""

    def __init__(self, inner: DeadLetterSink, rejections: RejectionLog) -> None:
        self._inner = inner
        self._rejections = rejections

    async def send(self, letters: list[PoisonLetter]) -> None:
        await self._inner.send(letters)
        for letter in letters:
            where = f"{letter.source_topic}[{letter.source_partition}]@{letter.source_offset}"
            self._rejections.add(letter.reason, f"record {where}")
        if letters:
            self._rejections.flush_if_due()


class RefusalLog:
    """The receiver edge's `RefusalObserver`: every refused request counts in
    `holonograph_requests_refused{transport,reason}`; one the client caused (malformed,
    too large, too slow, unauthenticated) is summarised on a `RejectionLog`, never
    logged alone; an internal error (our fault) is logged with its traceback at most
    once per interval, the others counted on the summary. Overload refusals (busy,
    rate limited, unavailable) are answered with a retry delay and only counted."""

    def __init__(
        self,
        metrics: PipelineMetrics,
        interval_seconds: float,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._interval = interval_seconds
        self._monotonic = monotonic
        self._last_traceback = -math.inf
        self.summary = RejectionLog(
            "request(s) refused",
            interval_seconds,
            "the clients' own errors, answered with a status saying why",
            clock=clock,
            monotonic=monotonic,
        )

    def observe_refusal(
        self, transport: str, reason: str, error: BaseException | None, peer: str
    ) -> None:
        """One request from `peer` refused for `reason` (of `REFUSAL_REASONS`)."""
        self._metrics.observe_refusal(transport, reason)
        example = f"{transport} request from {peer}"
        if reason == INTERNAL_ERROR:
            now = self._monotonic()
            if now - self._last_traceback >= self._interval:
                self._last_traceback = now
                log.error("internal error answering the %s", loggable(example), exc_info=error)
                return
        elif reason not in CLIENT_REASONS:
            return
        self.summary.add(str(error or "") or reason, example, label=f"{transport} {reason}")
        self.summary.flush_if_due()

    def start(self) -> None:
        self.summary.start()

    async def stop(self) -> None:
        await self.summary.stop()
