"""Admission on arrival: bytes of requests between arrival and answer are bounded.

A request is counted from the moment its handler first runs, before it is parsed or
decoded, until it is answered. Past the limit it is refused at once with a retryable
`Backpressure`, so overload turns into 429 / RESOURCE_EXHAUSTED with a retry delay
instead of a growing queue in front of the decoder (latency and memory unbounded).
Used from the event loop only, so it needs no lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ingest.errors import Backpressure


class Admission:
    def __init__(self, max_bytes: int, retry_after_seconds: float = 1.0) -> None:
        self.max_bytes = max_bytes
        self.inflight_bytes = 0
        self.refused = 0
        self._retry_after = retry_after_seconds

    @contextmanager
    def admit(self, size_bytes: int) -> Iterator[None]:
        """Hold `size_bytes` of the budget for the body of the `with`. A request larger
        than the whole budget is still admitted when nothing else is in flight."""
        if self.inflight_bytes and self.inflight_bytes + size_bytes > self.max_bytes:
            self.refused += 1
            raise Backpressure(
                f"{self.inflight_bytes} bytes of requests in flight (limit {self.max_bytes});"
                " retry later",
                self._retry_after,
            )
        self.inflight_bytes += size_bytes
        try:
            yield
        finally:
            self.inflight_bytes -= size_bytes
