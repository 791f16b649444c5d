"""Which tenants a store holds, and which one an analysis reads when none is named.

Every analysis reads one tenant's rows. Naming none means "every tenant", which is
only allowed while the store holds a single tenant: on a shared store an unnamed
tenant would silently mix customers, so `resolve_tenant` refuses and lists them.
"""

from __future__ import annotations

from processors.jobs import JobError
from schemas.readonce import table_names
from schemas.store import Store
from schemas.tables import (
    CHANGE_EVENTS,
    CONFORMANCE_FIXTURES,
    EMISSION_RECEIPTS,
    EVALUATION_EVENTS,
    QUARANTINE,
)

# Tables whose rows say which tenants the store holds (analysis results follow them;
# change events carry those of contracts, too).
TENANT_TABLES = (
    EVALUATION_EVENTS,
    EMISSION_RECEIPTS,
    QUARANTINE,
    CONFORMANCE_FIXTURES,
    CHANGE_EVENTS,
)


class TenantAmbiguous(JobError, ValueError):
    """No tenant was named and the store holds several."""

    def __init__(self, tenants: list[str]) -> None:
        self.tenants = tenants
        super().__init__(
            f"the store holds {len(tenants)} tenants ({', '.join(tenants)}):"
            " name one with --tenant",
            "tenant_ambiguous",
            details={"tenants": tenants},
        )


def store_tenants(store: Store) -> list[str]:
    """Every tenant with rows in the store, sorted (of the tables it has: a server not
    migrated as far as this code reads the ones it holds)."""
    present = table_names(store)
    union = " UNION DISTINCT ".join(
        f"SELECT DISTINCT tenant_id FROM {table.qualified}"
        for table in TENANT_TABLES
        if table.name in present
    )
    if not union:
        return []
    rows = store.query(f"SELECT tenant_id FROM ({union}) ORDER BY tenant_id").rows
    return [str(tenant) for (tenant,) in rows]


def resolve_tenant(store: Store, requested: str | None) -> str | None:
    """`requested` when given; else the store's only tenant; None when the store holds
    no tenant's rows yet (every tenant then means none). `TenantAmbiguous` when no
    tenant was named and the store holds several."""
    if requested is not None:
        return requested
    tenants = store_tenants(store)
    if len(tenants) > 1:
        raise TenantAmbiguous(tenants)
    return tenants[0] if tenants else None
