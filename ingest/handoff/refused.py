"""Spans the store refused at commit time, as the quarantine sees them.

Validation at the door keeps values the store cannot hold out of every commit, so
this is for what only the store can tell (a schema it does not have, a block it
cannot take). To find the spans to blame, a request's batch is cut into one unit
per span (`span_units`: an event or an override with its emission, a sentinel, a
rejected span with its arrival); a unit the store refuses alone becomes a quarantine row with the
store's message and an arrival marked quarantined (`refused_unit`), and the batch
the client is answered for is rebuilt from what was stored (`stored_batch`).

The original span is no longer at hand at commit time: the quarantine row keeps the
decoded event (or emission) as its attributes, without span bytes to replay.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from schemas.events import (
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
    ValidatedBatch,
    decoded_quarantine,
)


def _unit(
    batch: ValidatedBatch,
    events: tuple[EvaluationEvent, ...] = (),
    emissions: tuple[EmissionRecord, ...] = (),
    quarantined: tuple[QuarantineRecord, ...] = (),
    overrides: tuple[OverrideEvent, ...] = (),
) -> ValidatedBatch:
    # A copy keeps whatever else the batch carries (its ignored count, its owner).
    return batch.model_copy(
        update={
            "events": events,
            "emissions": emissions,
            "quarantined": quarantined,
            "overrides": overrides,
        }
    )


def span_units(batch: ValidatedBatch) -> list[ValidatedBatch]:
    """One batch per span of `batch`, each with the rows of that span only."""
    arrivals: dict[tuple[str, int, str], list[EmissionRecord]] = {}
    rejected: dict[tuple[str | None, int | None], list[EmissionRecord]] = {}
    units: list[ValidatedBatch] = []
    for emission in batch.emissions:
        if emission.quarantined:
            rejected.setdefault((emission.stream, emission.seq), []).append(emission)
        elif emission.kind == "evaluation":
            key = (emission.stream, emission.seq, emission.event_id)
            arrivals.setdefault(key, []).append(emission)
        else:
            units.append(_unit(batch, emissions=(emission,)))
    for event in batch.events:
        ordinal = event.emission
        key = (ordinal.stream, ordinal.seq, event.event_id) if ordinal else ("", 0, "")
        mine = arrivals.get(key) if ordinal else None
        units.append(_unit(batch, events=(event,), emissions=(mine.pop(0),) if mine else ()))
    for override in batch.overrides:
        ordinal = override.emission
        key = (ordinal.stream, ordinal.seq, override.event_id) if ordinal else ("", 0, "")
        mine = arrivals.get(key) if ordinal else None
        emissions = (mine.pop(0),) if mine else ()
        units.append(_unit(batch, emissions=emissions, overrides=(override,)))
    for record in batch.quarantined:
        mine = rejected.get((record.emission_stream, record.emission_seq))
        units.append(_unit(batch, emissions=(mine.pop(0),) if mine else (), quarantined=(record,)))
    for left in (*arrivals.values(), *rejected.values()):  # none in a batch we decoded
        units.extend(_unit(batch, emissions=(emission,)) for emission in left)
    return units


def refused_unit(unit: ValidatedBatch, text: str, received_at: dt.datetime) -> ValidatedBatch:
    """The quarantine row (and quarantined arrival) standing for a refused unit, with
    `text` as its reason. The arrival's time is the commit's: the span's own times may
    be what was refused."""
    # As an arrival rejected at the door looks: no event id, no sentinel counters.
    arrived = tuple(
        e.model_copy(
            update={
                "quarantined": True,
                "event_time": received_at,
                "event_id": "",
                "sentinel": None,
            }
        )
        for e in unit.emissions
    )
    if unit.events:
        record = decoded_quarantine(unit.events[0], text)
    elif unit.overrides:
        record = decoded_quarantine(unit.overrides[0], text)
    elif unit.quarantined:  # a rejection the store would not record: keep its reason only
        original = unit.quarantined[0]
        record = original.model_copy(
            update={
                "reason": f"{original.reason}; {text}",
                "attributes": {},
                "resource_attributes": {},
                "span_proto": b"",
            }
        )
    else:
        record = decoded_quarantine(unit.emissions[0], text)
    return _unit(unit, emissions=arrived, quarantined=(record,))


def stored_batch(
    batch: ValidatedBatch, written: Sequence[ValidatedBatch], refused: Sequence[ValidatedBatch]
) -> ValidatedBatch:
    """`batch` as stored: the units written as they were, the refused ones as their
    quarantine rows."""
    parts = [*written, *refused]
    return _unit(
        batch,
        events=tuple(e for part in parts for e in part.events),
        emissions=tuple(e for part in parts for e in part.emissions),
        quarantined=tuple(q for part in parts for q in part.quarantined),
        overrides=tuple(o for part in parts for o in part.overrides),
    )
