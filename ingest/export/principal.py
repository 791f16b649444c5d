"""Who sent a request: the tenant its rows belong to and what it may write.

The receiver edge authenticates a request (bearer token, or nobody on a
single-tenant receiver) and hands the export path a `Principal`; everything
after it (validation, rows, Kafka records, analyses) only sees the tenant id.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.events import DEFAULT_TENANT


@dataclass(frozen=True)
class Principal:
    """`agents` None: may write any agent id; otherwise exactly those.
    `name` labels the token entry in logs and metrics (never the token itself).
    `spans_per_second` None: no per-tenant rate limit."""

    tenant_id: str = DEFAULT_TENANT
    agents: frozenset[str] | None = None
    name: str = ""
    spans_per_second: float | None = None

    def may_write(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents


ANONYMOUS = Principal(name="anonymous")
