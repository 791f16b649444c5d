"""The request fields every series reading takes (drift, variance): which events of a
surface a series is built from. One place, so the HTTP bodies and the CLI flags of
those jobs say the same thing the same way."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from processors.jobs import JobRequest
from schemas.analysis import Bucket, Role
from schemas.events import Provenance, RunMode


class SeriesRequest(JobRequest):
    """A job request that reads one series (`series.cells.SeriesQuery`)."""

    run_modes: tuple[RunMode, ...] = Field((), description="Only these run modes.")
    provenances: tuple[Provenance | Literal["any"], ...] = Field(
        ("production-state",), description="Only these provenances; 'any' reads every one."
    )
    role: Role = Field(
        "primary",
        description="On a multiplexed surface: what the agent used (primary), the observers,"
        " or all events blended.",
    )
    light_source: str = Field("", description="Only events that answered for this light source.")

    def provenances_read(self) -> tuple[str, ...]:
        """The provenance filter: none with 'any'."""
        return () if "any" in self.provenances else tuple(self.provenances)


def window_at(
    since: dt.datetime | None, until: dt.datetime | None, bucket: Bucket, now: dt.datetime
) -> tuple[dt.datetime, dt.datetime]:
    """[since, until) as given, else relative to the run at `now` (a schedule's fire
    time): ending at its midnight UTC (a nightly run reads the days that ended), over 7
    days of hours (28 of days). Either end may be given alone; None when it is empty."""
    end = until or now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = since or end - dt.timedelta(days=28 if bucket == "day" else 7)
    return start, end
