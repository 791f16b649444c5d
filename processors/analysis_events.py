"""The one writer of `holonograph.analysis_events`: the drift runs, variance readings,
verdicts and lifecycle actions every analysis records about itself."""

from __future__ import annotations

import datetime as dt
from typing import Any

from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import ANALYSIS_EVENTS
from schemas.times import to_store_time


def record_event(
    store: Store,
    event_id: str,
    kind: str,
    surface_id: str,
    dimension_id: str,
    created_at: dt.datetime,
    payload: str,
    **fields: Any,
) -> None:
    """One `analysis_events` row; `fields` fill the optional columns (`tenant_id`
    defaults to tenant `default`)."""
    row = {
        "tenant_id": DEFAULT_TENANT,
        "event_id": event_id,
        "kind": kind,
        "target_event_id": "",
        "surface_id": surface_id,
        "dimension_id": dimension_id,
        "status": "",
        "verdict": "",
        "approver_id": "",
        "pinned_label": "",
        "superseded_by": "",
        "created_at": to_store_time(created_at),
        "payload": payload,
    } | {k: v if v is not None else "" for k, v in fields.items()}
    store.insert(ANALYSIS_EVENTS.qualified, [list(row.values())], ANALYSIS_EVENTS.pick(*row))
