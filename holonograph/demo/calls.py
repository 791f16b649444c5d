"""Seeded multiplex calls with a known truth: each call of a surface lands on a primary
and one observer (one event each, sharing the call's correlation id). At bucket
`change_at` the primary's pass rate moves from `primary_rate[0]` to `[1]` (with
`recorded`, its served id rolls over from `versions[0]` to `versions[1]` there: a vendor
shipping a new version behind the alias); the observer's from `observer_rate[0]` to
`[1]`. `agree` correlates the two vendors' draws on one call, `tau`/`rho` move both
rates together from bucket to bucket (an AR(1) wander). With probability `fallback` a
call's primary is unavailable and the observer answers as primary.

The one generator of such calls: `holonograph demo` sends them through OTLP, and the
tests and benchmarks (`testkit.multiplex_series`) store or send the same calls.
Everything random comes from the seed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from schemas.events import DEFAULT_TENANT

_HOUR = dt.timedelta(hours=1)


@dataclass(frozen=True)
class MultiplexSurface:
    surface_id: str = "answer-question"
    agent_id: str = "support-agent"
    start: dt.datetime = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
    buckets: int = 720  # hours
    calls: tuple[int, int] = (20, 30)  # per hour, uniform
    primary: str = "acme/m"  # the alias the primary is asked for (and the routing entry)
    versions: tuple[str, str] = ("acme/m/2026-05", "acme/m/2026-10")
    observer: str = "beta/o"
    observer_served: str = "beta/o/2026-04"
    change_at: int = 360
    recorded: bool = True  # the primary's served version rolls over at the change
    primary_rate: tuple[float, float] = (0.85, 0.65)
    observer_rate: tuple[float, float] = (0.80, 0.80)
    agree: float = 0.5
    tau: float = 0.0
    rho: float = 0.0
    fallback: float = 0.01
    dimension_id: str = "correctness"
    run_mode: str = "production"
    tenant_id: str = DEFAULT_TENANT
    id_prefix: str = ""  # in event and correlation ids: two specs on one surface apart

    @property
    def until(self) -> dt.datetime:
        return self.start + self.buckets * _HOUR


@dataclass(frozen=True)
class MxEvent:
    event_id: str
    role: str
    served: str
    requested: str
    passed: bool


@dataclass(frozen=True)
class MxCall:
    correlation_id: str
    timestamp: dt.datetime
    bucket: int
    fallback: bool
    events: tuple[MxEvent, ...]


def _seed(spec: MultiplexSurface, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}:{spec.surface_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def generate(spec: MultiplexSurface, seed: int) -> list[MxCall]:
    """The calls of `spec`; the same (spec, seed) always gives the same calls."""
    rng = np.random.default_rng(_seed(spec, seed))
    calls: list[MxCall] = []
    wander = 0.0
    for t in range(spec.buckets):
        if spec.tau > 0:
            fresh = spec.tau * float(rng.standard_normal())
            wander = fresh if t == 0 else spec.rho * wander + np.sqrt(1 - spec.rho**2) * fresh
        after = t >= spec.change_at
        p_rate = min(max(spec.primary_rate[after] + wander, 0.0), 1.0)
        o_rate = min(max(spec.observer_rate[after] + wander, 0.0), 1.0)
        served = spec.versions[1] if spec.recorded and after else spec.versions[0]
        n = int(rng.integers(spec.calls[0], spec.calls[1] + 1))
        base = spec.start + t * _HOUR
        for j in range(n):
            i = len(calls)
            key = f"{spec.surface_id}-{spec.id_prefix}{i:07d}"
            u = float(rng.random())
            v = u if rng.random() < spec.agree else float(rng.random())
            at = base + _HOUR * (j + 0.5) / n
            if rng.random() < spec.fallback:
                event = MxEvent(f"{key}-o", "primary", spec.observer_served, spec.observer,
                                v < o_rate)  # fmt: skip
                calls.append(MxCall(f"call-{key}", at, t, True, (event,)))
                continue
            events = (
                MxEvent(f"{key}-p", "primary", served, spec.primary, u < p_rate),
                MxEvent(f"{key}-o", "observer", spec.observer_served, spec.observer, v < o_rate),
            )
            calls.append(MxCall(f"call-{key}", at, t, False, events))
    return calls


def emissions(
    spec: MultiplexSurface, calls: list[MxCall]
) -> Iterator[tuple[MxCall, MxEvent, str, int]]:
    """Every event with its emission stream (one per vendor and day) and ordinal, in call
    order."""
    seqs: dict[str, int] = {}
    for call in calls:
        for event in call.events:
            vendor = "observer" if event.served == spec.observer_served else "primary"
            stream = f"{spec.surface_id}/{vendor}/{call.timestamp:%Y-%m-%d}"
            seq = seqs.get(stream, 0)
            seqs[stream] = seq + 1
            yield call, event, stream, seq
