"""Who sent a request: the tenant its rows belong to and what it may write.

The receiver edge authenticates a request (bearer token, or nobody on a
single-tenant receiver) and hands the export path a `Principal`; everything
after it (validation, rows, Kafka records, analyses) only sees the tenant id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from schemas.events import DEFAULT_TENANT

Scope = Literal["write", "read", "govern"]
# write: OTLP (and availability marks); read: analyses and events; govern: approvals,
# lifecycle, contracts, change records.
SCOPES: tuple[Scope, ...] = ("write", "read", "govern")
# A tokens-file entry without `scopes` keeps what a token could do before scopes
# existed: write OTLP and govern (register contracts, record changes, and read both
# back); reading analyses is granted only by naming `read`.
UNSCOPED: frozenset[Scope] = frozenset({"write", "govern"})


@dataclass(frozen=True)
class Principal:
    """`agents` None: may write any agent id; otherwise exactly those.
    `name` labels the token entry in logs and metrics (never the token itself).
    `spans_per_second` None: no per-tenant rate limit. `scopes`: what it may do
    (by default what a tokens-file entry without `scopes` may)."""

    tenant_id: str = DEFAULT_TENANT
    agents: frozenset[str] | None = None
    name: str = ""
    spans_per_second: float | None = None
    scopes: frozenset[Scope] = UNSCOPED

    def may_write(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents

    def may(self, *scopes: Scope) -> bool:
        """Whether it holds any of `scopes`."""
        return any(scope in self.scopes for scope in scopes)


# Without a tokens file: one tenant, every scope (the listeners are on loopback unless
# --host says otherwise, and the receiver warns then).
ANONYMOUS = Principal(name="anonymous", scopes=frozenset(SCOPES))
