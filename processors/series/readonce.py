"""Freshness of the completeness windows read once per command (`read_once`): the
runner's check before a job (`holonograph.runner.freshen`) and the job's own read of
the same range (`processors.series.freshness.read_freshness`) answer alike when
nothing was written between, so the second is not sent. Light on purpose: the runner
and every job command import it, and the analyses' modules (numpy) only the jobs that
read the series."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

# In a `read_once` block: (store id, key) -> the store it was read on and what was read.
_READ: ContextVar[dict[tuple[int, Hashable], tuple[object, object]] | None] = ContextVar(
    "windows_freshness_read", default=None
)


@contextmanager
def read_once() -> Iterator[None]:
    """Within the block, `remembered` reads one key on one store once (until `forget`).
    Outside such a block every call reads."""
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def forget() -> None:
    """The windows were rewritten: what the enclosing `read_once` block read is stale."""
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
