"""Per-tenant rate limits: spans per second from the tokens file, as token buckets.

A tenant's bucket holds at most one second of its rate. A request is admitted when
the bucket holds its span count (or, for a request larger than a whole second's
worth, when the bucket is full), and its spans are taken even past zero: the debt
is paid back at the tenant's rate before the next request passes. A refusal says
when the bucket will hold enough (`RateLimited.retry_after`). Used from the event
loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ingest.errors import RateLimited
from ingest.export.principal import Principal

Monotonic = Callable[[], float]


@dataclass
class _Bucket:
    rate: float
    tokens: float
    updated: float


class TenantRateLimiter:
    def __init__(self, monotonic: Monotonic = time.monotonic) -> None:
        self._monotonic = monotonic
        self._buckets: dict[str, _Bucket] = {}
        self.refused = 0

    def take(self, principal: Principal, spans: int) -> None:
        """Spend `spans` of the principal's tenant, or raise `RateLimited`."""
        rate = principal.spans_per_second
        if rate is None or spans <= 0:
            return
        now = self._monotonic()
        bucket = self._buckets.get(principal.tenant_id)
        if bucket is None or bucket.rate != rate:  # new tenant, or its limit was reloaded
            bucket = self._buckets[principal.tenant_id] = _Bucket(rate, rate, now)
        bucket.tokens = min(rate, bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        needed = min(float(spans), rate)
        if bucket.tokens < needed:
            self.refused += 1
            wait = (needed - bucket.tokens) / rate
            raise RateLimited(
                f"tenant {principal.tenant_id!r} is over its rate limit of {rate:g} spans/s;"
                f" retry in {wait:.1f}s",
                max(wait, 0.001),
            )
        bucket.tokens -= spans
