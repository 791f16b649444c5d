"""`read_once`: within the block one key on one store is read once, until `forget`;
outside it every call reads."""

from __future__ import annotations

from processors.series.readonce import forget, read_once, remembered


class _Counting:
    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> int:
        self.reads += 1
        return self.reads


def test_outside_a_block_every_call_reads() -> None:
    store, read = object(), _Counting()
    assert [remembered(store, "k", read) for _ in range(2)] == [1, 2]


def test_in_a_block_one_key_on_one_store_is_read_once_until_forgotten() -> None:
    store, other, read = object(), object(), _Counting()
    with read_once():
        assert remembered(store, "k", read) == 1
        assert remembered(store, "k", read) == 1
        assert remembered(store, "j", read) == 2  # another key
        assert remembered(other, "k", read) == 3  # another store
        forget()
        assert remembered(store, "k", read) == 4
    assert remembered(store, "k", read) == 5  # the block is over
