"""What a job command reads of the store once (`read_once`), where a second read on the
same connection, with nothing written between, would answer alike: the windows'
freshness (the runner's check before a job, `holonograph.runner.freshen`, and the
job's own read of the same range, `processors.series.freshness.read_freshness`) and
the store's tables (`table_names`: no job creates or drops one).
Light on purpose: the runner and every job command import it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from schemas.store import Store
from schemas.tables import DATABASE

T = TypeVar("T")

# In a `read_once` block: (store id, key) -> the store it was read on and what was read.
_READ: ContextVar[dict[tuple[int, Hashable], tuple[object, object]] | None] = ContextVar(
    "store_read_once", default=None
)


@contextmanager
def read_once() -> Iterator[None]:
    """Within the block, `remembered` reads one key on one store once (until `forget`);
    a block within one is the same block. Outside such a block every call reads."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def forget() -> None:
    """The windows were rewritten: what the enclosing `read_once` block read may be stale."""
    read = _READ.get()
    if read is not None:
        read.clear()


def remembered(store: object, key: Hashable, read: Callable[[], T]) -> T:
    """`read()`, or what it returned for `key` on this same `store` earlier in the block."""
    found = _READ.get()
    if found is None:
        return read()
    slot = (id(store), key)
    if slot in found and found[slot][0] is store:
        return found[slot][1]  # type: ignore[return-value]
    value = read()
    found[slot] = (store, value)
    return value


def table_names(store: Store) -> frozenset[str]:
    """The names of the store's tables (and views), read once per connection in a job
    command (`read_once`: a job creates and drops none; the command migrated the
    store before it read)."""

    def read() -> frozenset[str]:
        rows = store.query(
            "SELECT name FROM system.tables WHERE database = {db:String}", {"db": DATABASE}
        ).rows
        return frozenset(str(name) for (name,) in rows)

    return remembered(store, "tables", read)
