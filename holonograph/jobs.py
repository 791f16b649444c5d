"""Jobs the CLI schedules inside long-running services (`ingest` never imports
`processors`; this wiring module is where the two meet)."""

from __future__ import annotations

from ingest.config import ServeConfig
from ingest.service import Periodic


def periodic_jobs(config: ServeConfig) -> list[Periodic]:
    return []
