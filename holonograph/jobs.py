"""Jobs the CLI schedules inside long-running services (`ingest` never imports
`processors`; this wiring module is where the two meet)."""

from __future__ import annotations

import functools

from ingest.service.periodic import Periodic
from processors.completeness.job import CompletenessConfig, refresh_stream_status


def periodic_jobs(refresh_seconds: float) -> list[Periodic]:
    """Stream status (incl. `dead`) refreshed every `refresh_seconds` while the service
    runs, so dashboards see a silent stream die without anyone asking."""
    completeness = CompletenessConfig()
    return [
        Periodic(
            "completeness",
            every_seconds=refresh_seconds,
            run=functools.partial(refresh_stream_status, config=completeness),
        )
    ]
