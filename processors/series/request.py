"""The request fields every series reading takes (drift, variance): which events of a
surface a series is built from. One place, so the HTTP bodies and the CLI flags of
those jobs say the same thing the same way."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from processors.jobs import JobRequest
from schemas.analysis import Role
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
