"""`--tenant` on the analyses: the same option and the same refusal everywhere."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from holonograph.cli.options import EXIT_USAGE
from processors.tenants import TenantAmbiguous, resolve_tenant
from schemas.events import DEFAULT_TENANT
from schemas.store import Store

F = TypeVar("F", bound=Callable[..., Any])

TENANT_HELP = "Only this tenant's data (default: every tenant, allowed while the store holds one)."


def _non_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # An empty tenant id is no tenant (queries read '' as "every tenant"): refuse it.
    if value is not None and not value.strip():
        raise click.BadParameter("a tenant id cannot be empty")
    return value


def tenant_option(func: F) -> F:
    return click.option("--tenant", "tenant", callback=_non_empty, help=TENANT_HELP)(func)


def tenant_or_exit(store: Store, tenant: str | None) -> str | None:
    """The tenant to read (None: the store holds none yet); on a store with several
    tenants and none named, exit 2 listing them (closing the store first, as on any
    failure)."""
    try:
        return resolve_tenant(store, tenant)
    except TenantAmbiguous as err:
        store.close()
        click.echo(f"error: {err}", err=True)
        sys.exit(EXIT_USAGE)
    except BaseException:  # the store failed: close it too, the error path reports why
        store.close()
        raise


def owner_or_exit(store: Store, tenant: str | None) -> str:
    """As `tenant_or_exit`, for commands that write a tenant's records: a store that
    holds no tenant yet writes tenant `default`."""
    return tenant_or_exit(store, tenant) or DEFAULT_TENANT
