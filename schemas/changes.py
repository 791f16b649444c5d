"""Change events: what changed in an operator's system and when, one vocabulary for
the governance changes the store records and the changes operators record themselves
(docs/changes.md).

Governance kinds are derived from their tables by the store itself (migration 0008):
contract versions per surface (`contract`), fixture approvals and rejections
(`fixture`), variance lifecycle decisions (`variance-lifecycle`), recorded topology
scans (`topology-scan`); published lessons (`lesson`) join when the lessons pipeline
stores them. Operators record deploys, prompt, config, lens, model and vendor changes
(`ChangeRecord`) and availability marks (`AvailabilityMark`, the Guide's chapter 5).
Each kind names the layer a shift that starts at it is attributed to (`LAYER_OF`),
or none: a lifecycle decision, a scan or an `other` change explains nothing by itself.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal, get_args

from pydantic import AwareDatetime, Field, StringConstraints, field_validator, model_validator

from schemas.analysis import LayerSource
from schemas.contractbase import Id, Model
from schemas.routing import serves_as

OperatorKind = Literal["deploy", "prompt", "config", "lens", "model", "vendor", "other"]
GovernanceKind = Literal["contract", "fixture", "variance-lifecycle", "topology-scan", "lesson"]
AVAILABILITY = "availability"
OPERATOR_KINDS: tuple[str, ...] = get_args(OperatorKind)
GOVERNANCE_KINDS: tuple[str, ...] = get_args(GovernanceKind)
KINDS: tuple[str, ...] = (*OPERATOR_KINDS, *GOVERNANCE_KINDS, AVAILABILITY)

LAYER_OF: dict[str, LayerSource] = {
    "deploy": "substrate",
    "prompt": "substrate",
    "config": "substrate",
    "lesson": "substrate",  # a published lesson becomes substrate (the Guide's chapter 12)
    "contract": "lens",
    "fixture": "lens",
    "lens": "lens",
    "model": "light source",
    "vendor": "light source",
    AVAILABILITY: "light source",
}

# `origin`: where a row came from, the table the store derived it from or the operator.
OPERATOR = "operator"
Transition = Literal["unavailable", "available"]

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
Short = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]

# What a `DateTime64(3, 'UTC')` column holds (ClickHouse's range, bounded as the wire's).
TIME_MIN = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
TIME_MAX = dt.datetime(2262, 4, 11, 23, 47, 16, tzinfo=dt.UTC)


def store_moment(value: dt.datetime) -> dt.datetime:
    """`value` in UTC at the store's millisecond precision, or a ValueError naming the
    range the store holds."""
    value = value.astimezone(dt.UTC)
    if not TIME_MIN <= value <= TIME_MAX:
        raise ValueError(
            f"{value.isoformat()} is outside the times the store holds"
            " (1900-01-01T00:00:00Z to 2262-04-11T23:47:16Z)"
        )
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def serves(light_source_id: str, served: set[str]) -> bool:
    """Does a mark of `light_source_id` cover a surface whose events name the ids in
    `served` (served and requested)? An id matches itself and its versions (the mark is
    a prefix at a `/` boundary: `openai/gpt-5` covers `openai/gpt-5/2026-05`: the rule
    of `schemas.routing`)."""
    return any(serves_as(light_source_id, s) for s in served)


class _Scoped(Model):
    surface_id: Id | None = None
    agent_id: Id | None = None


class ChangeRecord(_Scoped):
    """An operator's change (`POST /holonograph/changes`, `holonograph change record`):
    of one surface or agent-wide, at a moment; with `id` a retry is the same record."""

    kind: OperatorKind
    at: AwareDatetime
    description: Text
    id: Id | None = None
    actor: Short | None = None
    artifact_id: Short | None = None
    artifact_version: Short | None = None

    @field_validator("at")
    @classmethod
    def _moment(cls, value: dt.datetime) -> dt.datetime:
        return store_moment(value)

    @model_validator(mode="after")
    def _scoped(self) -> ChangeRecord:
        if self.surface_id is None and self.agent_id is None:
            raise ValueError("name the surfaceId or the agentId the change is of")
        return self


class AvailabilityMark(_Scoped):
    """The Guide's `availability.mark`: `single`, one transition at `at` (the light
    source just became unavailable, or came back); `paired`, an interval already known,
    [unreachableFrom, unreachableUntil). Of a light source (every surface it serves) or
    of one surface or agent, or both narrowed together."""

    mode: Literal["single", "paired"]
    light_source_id: Id | None = None
    transition: Transition | None = None
    at: AwareDatetime | None = None  # single; the time of recording when absent
    unreachable_from: AwareDatetime | None = None
    unreachable_until: AwareDatetime | None = None
    reason: Text | None = None
    id: Id | None = None
    actor: Short | None = None

    @field_validator("at", "unreachable_from", "unreachable_until")
    @classmethod
    def _moment(cls, value: dt.datetime | None) -> dt.datetime | None:
        return None if value is None else store_moment(value)

    @model_validator(mode="after")
    def _shape(self) -> AvailabilityMark:
        if self.light_source_id is None and self.surface_id is None:
            raise ValueError("name the lightSourceId (or the surfaceId) that is unavailable")
        if self.mode == "single":
            if self.transition is None:
                raise ValueError("a single mark needs its transition: unavailable or available")
            if self.unreachable_from is not None or self.unreachable_until is not None:
                raise ValueError("a single mark has no unreachableFrom/Until: use mode paired")
        else:
            if self.unreachable_from is None or self.unreachable_until is None:
                raise ValueError("a paired mark needs unreachableFrom and unreachableUntil")
            if self.unreachable_until <= self.unreachable_from:
                raise ValueError("unreachableUntil must be after unreachableFrom")
            if self.transition is not None or self.at is not None:
                raise ValueError("a paired mark has no transition or at: use mode single")
        return self


class ChangeEvent(Model):
    """One row of `holonograph.change_events` as every reader sees it."""

    tenant_id: str
    origin: str
    change_id: str
    kind: str
    at: dt.datetime
    description: str
    surface_id: str | None = None  # None: agent-wide (agent None too: tenant-wide)
    agent_id: str | None = None
    artifact_id: str | None = None
    artifact_version: str | None = None
    ends_at: dt.datetime | None = None
    light_source_id: str | None = None
    actor: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    recorded_at: dt.datetime

    @property
    def layer(self) -> LayerSource | None:
        """The layer a shift that starts at this change is attributed to (None: none)."""
        return LAYER_OF.get(self.kind)

    @property
    def transition(self) -> Transition | None:
        """An availability mark's transition (None for a paired mark and other kinds)."""
        value = self.details.get("transition")
        return value if value in ("unavailable", "available") else None

    def to_json(self) -> dict[str, Any]:
        shape = self.model_dump(mode="json", by_alias=True)
        for key in ("at", "endsAt", "recordedAt"):
            if shape[key] is not None:
                shape[key] = shape[key].replace("+00:00", "Z")
        return shape | {"layer": self.layer}


def mark_answer(event: ChangeEvent, created: bool) -> dict[str, Any]:
    """The answer to an availability mark: the Guide's `eventIds` and `pairing` (the
    interval of a paired mark, None for a single one) with the stored change."""
    shape = event.to_json()
    pairing = (
        {"pairingId": event.change_id, "unreachableFrom": shape["at"],
         "unreachableUntil": shape["endsAt"]}
        if event.ends_at is not None
        else None
    )  # fmt: skip
    return shape | {"created": created, "eventIds": [event.change_id], "pairing": pairing}
