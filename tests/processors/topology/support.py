"""Seeding a migrated chDB store with a known topology: a contract, inventories and
events whose dimensions, cohort tags, substrate columns and light sources are exactly
what a test says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS

SINCE = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 7, 8, tzinfo=dt.UTC)
EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "agent_id", "run_mode", "provenance", "timestamp",
    "light_source_id", "light_source_requested", "substrate", "cohort_tags", "dimension_ids",
    "emission_stream",
    "emission_seq", "ingested_at",
)  # fmt: skip
DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "score", "surface_id", "agent_id",
    "run_mode", "timestamp", "ingested_at",
)  # fmt: skip


@dataclass(frozen=True)
class Event:
    """One stored evaluation; `dims` maps a dimension id to (passed, score)."""

    surface: str
    at: dt.datetime
    dims: Mapping[str, tuple[bool | None, float | None]] = field(default_factory=dict)
    tags: Sequence[str] = ()
    substrate: Mapping[str, str] = field(default_factory=dict)
    light_source: str = ""
    requested: str = ""
    agent: str = "billing-triage"
    tenant: str = DEFAULT_TENANT
    run_mode: str = "production"


def insert_events(store: Store, events: Sequence[Event]) -> None:
    """Store events as the receiver would, dimensions in their own table too."""
    now = dt.datetime(2026, 7, 10)
    rows: list[list[Any]] = []
    dims: list[list[Any]] = []
    for seq, e in enumerate(events):
        event_id = f"evt_{seq:06d}"
        ts = e.at.replace(tzinfo=None)
        rows.append(
            [e.tenant, event_id, e.surface, e.agent, e.run_mode, "production-state", ts,
             e.light_source, e.requested, dict(e.substrate), list(e.tags), list(e.dims),
             "stream-1", seq, now]
        )  # fmt: skip
        for dim_id, (passed, score) in e.dims.items():
            dims.append(
                [e.tenant, event_id, dim_id, passed, score, e.surface, e.agent, e.run_mode,
                 ts, now]
            )  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, rows, EVENT_COLUMNS)
    if dims:
        store.insert(EVALUATION_DIMENSIONS.qualified, dims, DIMENSION_COLUMNS)
