"""Jobs the CLI schedules inside long-running services (`ingest` never imports
`processors`; this wiring module is where the two meet)."""

from __future__ import annotations

import functools

from ingest.config import ServeConfig
from ingest.service import Periodic
from processors.completeness import CompletenessConfig, refresh_stream_status


def periodic_jobs(config: ServeConfig) -> list[Periodic]:
    """Stream status (incl. `dead`) refreshed while the service runs, so dashboards
    see a silent stream die without anyone asking."""
    completeness = CompletenessConfig()
    return [
        Periodic(
            "completeness",
            every_seconds=config.status_refresh_seconds,
            run=functools.partial(refresh_stream_status, config=completeness),
        )
    ]
