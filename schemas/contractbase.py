"""The base of the contract models and their id type, apart from the contracts: the
change records (`schemas.changes`) are written in the same shape, and the analyses
that read them should not load every contract model (conformance, GenAI) to do so."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

# Ids as SDKs write them (`prompt_hash`, `customer-tier`, `anthropic/claude-sonnet-5`).
Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,127}$")]


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON shape, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
