"""Which routing entry an event answered for: the one rule every reader of routings
applies (compare's fallbacks, the topology scan's light sources, ingest's
`unrouted-light-source` flag, the series' `--light-source`).

A routing entry names a light source the way an operator writes it: a model id
(`anthropic/claude-sonnet-5`) or an alias (`openai/gpt-5`). An event records what
answered (`light_source.id`, often a dated version such as `openai/gpt-5/2026-05`) and
what was asked for (`light_source.requested`). The event *answers for* an entry when
its served id is the entry, or a version of it (the entry a prefix of the served id at
a `/` boundary: `acme/m` covers `acme/m/2026-05`, not `acme/mini`), or it was requested
as the entry. So a vendor rolling its alias over to a new version is the same entry;
another vendor answering is not. Among several entries the served id decides first.

A *fallback* is a call whose primary event answered for a light source other than the
first entry (the primary) of the routing in force for its surface and run mode. Where
no routing is in force (no contract, or none that routes the surface in that run mode),
a fallback is a primary event whose served id does not answer for its own requested id
(`light_source.requested`): a version of the requested model is no fallback either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # annotations only: the analyses import this module, not the models
    from schemas.contracts import Routing, Surface

FallbackRule = Literal["routing", "requested"]


def serves_as(entry: str, served: str) -> bool:
    """Is the served id `served` the entry itself or a version of it?"""
    if not entry or not served.startswith(entry):
        return False
    return len(served) == len(entry) or served[len(entry)] == "/"


def answers_for(entry: str, served: str, requested: str = "") -> bool:
    """Does an event served by `served`, requested as `requested`, answer for the
    routing entry `entry`: the entry itself, a version of it, or requested as it?"""
    return serves_as(entry, served) or (bool(entry) and requested == entry)


def answers_for_sql(entry: str, served: str, requested: str) -> str:
    """`answers_for` as a ClickHouse boolean expression: `entry` a query parameter's
    placeholder (`{light_source:String}`), `served` and `requested` column names. The
    same rule as the function (tests run both on one table of cases)."""
    return (
        f"(notEmpty({entry}) AND ({served} = {entry}"
        f" OR startsWith({served}, concat({entry}, '/')) OR {requested} = {entry}))"
    )


def entry_answered(entries: Iterable[str], served: str, requested: str = "") -> str | None:
    """The entry of `entries` the event answered for, None when none: the served id
    decides first (the first entry it is, or is a version of); the requested id only
    when the served id is none of them (an alias served under an id of another shape).
    So a fallback vendor's event is its own even if it records the primary as asked."""
    listed = tuple(entries)
    by_served = next((e for e in listed if serves_as(e, served)), None)
    if by_served is not None:
        return by_served
    return next((e for e in listed if requested and requested == e), None)


def routing_in_force(surface: Surface | None, run_mode: str) -> Routing | None:
    """The surface's first routing active in `run_mode`, None when none is (or no
    surface is declared)."""
    if surface is None:
        return None
    return next((r for r in surface.routings if r.active_in(run_mode)), None)


@dataclass(frozen=True)
class Answer:
    """How one call's primary event stands to what was declared for it."""

    declared: str  # the routing's primary, or (no routing) the requested id
    answered: str  # the routing entry that answered, else the served id
    fallback: bool
    rule: FallbackRule


def primary_answer(routing: Routing | None, served: str, requested: str) -> Answer:
    """Whether a call whose primary event was served by `served` (requested as
    `requested`) fell back, under `routing` (the routing in force; None: none is)."""
    if routing is not None:
        entries = routing.light_sources
        matched = entry_answered(entries, served, requested)
        answered = matched or served
        return Answer(entries[0], answered, matched != entries[0], "routing")
    if not requested:  # nothing says what was asked for: whatever answered was it
        return Answer(served, served, False, "requested")
    fell_back = not serves_as(requested, served)
    return Answer(requested, served if fell_back else requested, fell_back, "requested")
