"""Never a silent zero: the names an analysis is asked about must be ones the tenant has
had events for, ever. A misspelt `--surface` otherwise reads as "0 events" and passes
a CI gate; here it is `NotFound` (CLI exit 2, HTTP 404) naming the closest known names.

A known name with no events in the analysis window is not refused: that is a normal
empty answer, which the analysis states as such.

A job's Request opts in by naming its fields (`JobRequest.named_fields`); the runner
calls `require_known` before `run`, so every caller (CLI, HTTP API, scheduler) refuses
the same way and nothing is stored for a name that does not exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Literal

from processors.jobs import NotFound
from schemas.store import Store
from schemas.tables import (
    EMISSION_RECEIPTS,
    EVALUATION_DIMENSIONS,
    EVALUATION_EVENTS,
    LESSON_OVERRIDES,
)

Vocabulary = Literal["surface", "dimension", "agent", "stream"]

# Where each kind of name is recorded. Receipts hold quarantined evaluations too, so a
# surface or stream whose every event was rejected is known (its analyses answer, and
# completeness calls the stream all-quarantined) rather than "unknown". A surface a human
# corrected a call of (`POST /hil/override`) is known too: its lessons jobs answer.
_SOURCES: Mapping[Vocabulary, tuple[tuple[str, str], ...]] = {
    "surface": (
        (EVALUATION_EVENTS.qualified, "surface_id"),
        (EMISSION_RECEIPTS.qualified, "surface_id"),
        (LESSON_OVERRIDES.qualified, "surface_id"),
    ),
    "dimension": ((EVALUATION_DIMENSIONS.qualified, "dimension_id"),),
    "agent": ((EVALUATION_EVENTS.qualified, "agent_id"),),
    "stream": ((EMISSION_RECEIPTS.qualified, "emission_stream"),),
}

# How many known names a refusal lists (closest first), and how many it reads at most.
SHOWN = 5
_READ_AT_MOST = 10_000


def _where(
    tenant: str | None, column: str, surface: str | None, table: str, params: dict[str, str]
) -> str:
    """The clause, binding into `params` only what it names (the store refuses an
    unused parameter)."""
    clauses = [f"{column} != ''"]
    if tenant is not None:
        clauses.append("tenant_id = {tenant:String}")
        params["tenant"] = tenant
    if surface is not None and table == EVALUATION_DIMENSIONS.qualified:
        clauses.append("surface_id = {surface:String}")
        params["surface"] = surface
    return " AND ".join(clauses)


def is_known(
    store: Store, tenant: str | None, kind: Vocabulary, name: str, surface: str | None = None
) -> bool:
    """Whether the tenant has any row naming `name` as a `kind` (a dimension: on
    `surface` when given)."""
    for table, column in _SOURCES[kind]:
        params = {"name": name}
        where = _where(tenant, column, surface, table, params)
        sql = f"SELECT 1 FROM {table} WHERE {where} AND {column} = {{name:String}} LIMIT 1"
        if store.query(sql, params).rows:
            return True
    return False


def known_names(
    store: Store, tenant: str | None, kind: Vocabulary, surface: str | None = None
) -> list[str]:
    """Every `kind` name the tenant has rows for, sorted (at most `_READ_AT_MOST`)."""
    params: dict[str, str] = {}
    union = " UNION DISTINCT ".join(
        f"SELECT DISTINCT {column} AS name FROM {table}"
        f" WHERE {_where(tenant, column, surface, table, params)}"
        for table, column in _SOURCES[kind]
    )
    sql = f"SELECT name FROM ({union}) ORDER BY name LIMIT {_READ_AT_MOST}"
    return [str(name) for (name,) in store.query(sql, params).rows]


def closest_first(name: str, known: list[str]) -> list[str]:
    """`known` with the names most like `name` first (difflib's ratio), then the rest
    in order."""
    if not known:  # difflib refuses n=0
        return []
    close = difflib.get_close_matches(name, known, n=len(known), cutoff=0.6)
    return close + [k for k in known if k not in close]


class UnknownName(NotFound):
    """The tenant has never had an event naming this surface, dimension, agent or stream."""

    def __init__(
        self, kind: Vocabulary, name: str, known: list[str], surface: str | None = None
    ) -> None:
        ordered = closest_first(name, known)
        on = f" on surface '{surface}'" if surface is not None else ""
        if ordered:
            more = ", …" if len(ordered) > SHOWN else ""
            listed = f"; known: {', '.join(ordered[:SHOWN])}{more}"
        else:
            listed = f"; the tenant has no {kind} with events yet"
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else "`holonograph status` lists them"
        super().__init__(
            f"unknown {kind} '{name}'{on}{listed}",
            f"unknown_{kind}",
            details={"kind": kind, "name": name, "known": ordered[:SHOWN]},
            hint=hint,
        )
        self.vocabulary = kind
        self.name = name
        self.known = ordered


def _vocabulary(word: str) -> Vocabulary:
    for kind in _SOURCES:
        if kind == word:
            return kind
    raise ValueError(f"no vocabulary {word!r} (one of {', '.join(_SOURCES)})")


def require_known(
    store: Store,
    tenant: str | None,
    names: Mapping[str, str | None],
) -> None:
    """`UnknownName` for the first of `names` (by `Vocabulary` kind) the tenant has never
    had events for. A dimension is looked up on the surface named with it, when one is."""
    surface = names.get("surface")
    for word, name in names.items():
        if name is None:
            continue
        kind = _vocabulary(word)
        on = surface if kind == "dimension" else None
        if not is_known(store, tenant, kind, name, on):
            raise UnknownName(kind, name, known_names(store, tenant, kind, on), on)
