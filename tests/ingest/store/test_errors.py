"""Store errors are classified once, by what the real store (chDB) and driver raise:
the data's fault (permanent) or the store's (retryable); `isolate` finds the units
behind a permanent error without retrying anything in a loop."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from ingest.store.clickhouse import ClickHouseStore
from ingest.store.errors import error_code, is_permanent, isolate
from schemas.tables import EMISSION_RECEIPTS
from testkit.faulty_store import StoreDown

pytestmark = [pytest.mark.clickhouse]


def _raised(action: object) -> Exception:
    try:
        action()  # type: ignore[operator]
    except Exception as err:
        return err
    raise AssertionError("nothing raised")


def _receipt(**values: object) -> list[object]:
    row: dict[str, object] = dict.fromkeys(EMISSION_RECEIPTS.columns)
    row.update(tenant_id="default", emission_stream="s", emission_seq=1, receipt_id="r",
               kind="sentinel", final=False, quarantined=False, event_id="", surface_id="",
               event_time=10**18, received_at=10**12)  # fmt: skip
    row.update(values)
    return list(row.values())


def test_what_the_real_store_refuses_for_good_is_permanent(store: ClickHouseStore) -> None:
    def insert(row: list[object]) -> None:
        store.insert(EMISSION_RECEIPTS.qualified, [row], EMISSION_RECEIPTS.columns)

    negative = _raised(lambda: insert(_receipt(sentinel_interval_ms=-1)))  # into UInt64
    too_late = _raised(lambda: insert(_receipt(event_time=2**63)))  # past DateTime64(9)
    no_table = _raised(lambda: store.insert("holonograph.nope", [[1]], ["x"]))
    # The event tables are not time-partitioned; a monthly-partitioned table shows
    # what a block over more than 100 partitions gets.
    store.command(
        "CREATE TABLE holonograph.monthly (t DateTime) ENGINE = MergeTree"
        " PARTITION BY toYYYYMM(t) ORDER BY t"
    )
    months = [[dt.datetime(2000 + i // 12, i % 12 + 1, 15)] for i in range(101)]
    partitions = _raised(lambda: store.insert("holonograph.monthly", months, ["t"]))

    assert error_code(no_table) == 60
    assert error_code(partitions) == 252
    assert "Too many partitions for single INSERT block" in str(partitions)
    for error in (negative, too_late, no_table, partitions):
        assert is_permanent(error), error


@pytest.mark.parametrize(
    ("error", "permanent"),
    [
        (DatabaseError("Code: 53. DB::Exception: Type mismatch. (TYPE_MISMATCH)"), True),
        (DatabaseError("received ClickHouse error code 27: Cannot parse input"), False),
        (DatabaseError("Code: 27. DB::Exception: Cannot parse input", code=27), True),
        (DatabaseError("Code: 252. DB::Exception: Too many parts (300). Merges are"
                       " processing significantly slower than inserts", code=252), False),
        (DatabaseError("Code: 241. DB::Exception: Memory limit exceeded", code=241), False),
        (DatabaseError("Code: 202. DB::Exception: Too many simultaneous queries"), False),
        (DatabaseError("Code: 159. DB::Exception: Timeout exceeded"), False),
        (DatabaseError("Code: 395. DB::Exception: an error no list names"), False),
        (OperationalError("Error HTTPConnectionPool: connection refused"), False),
        (StoreDown("store is down (injected)"), False),
        (TimeoutError(), False),
        (OverflowError("int too big to convert"), True),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), True),
        (RuntimeError("something unexpected"), False),
    ],
)  # fmt: skip
def test_classification_by_code_and_kind(error: Exception, permanent: bool) -> None:
    assert is_permanent(error) is permanent


class _Store:
    """A write that refuses any part holding a bad unit (a unit test of one step)."""

    def __init__(self, bad: set[int], unavailable_after: int | None = None) -> None:
        self.bad = bad
        self.unavailable_after = unavailable_after
        self.writes: list[tuple[int, ...]] = []
        self.stored: set[int] = set()

    async def write(self, part: Sequence[int]) -> None:
        self.writes.append(tuple(part))
        if self.unavailable_after is not None and len(self.writes) > self.unavailable_after:
            raise StoreDown("gone")
        if self.bad & set(part):
            raise DatabaseError(f"Code: 53. DB::Exception: bad {sorted(self.bad & set(part))}")
        self.stored |= set(part)


async def test_isolate_finds_the_bad_units_and_writes_the_rest() -> None:
    units = list(range(64))
    store = _Store(bad={5, 40})
    found = await isolate(units, store.write, DatabaseError("Code: 53. first"))
    assert [u for u, _ in found.refused] == [5, 40]
    assert all("bad [5]" in str(e) or "bad [40]" in str(e) for _, e in found.refused)
    assert sorted(found.written) == sorted(store.stored) == [u for u in units if u not in {5, 40}]
    assert found.unavailable is None
    assert len(store.writes) <= 4 * 6  # about 2·log2(64) per bad unit, never a loop


async def test_isolate_stops_at_a_retryable_error_and_keeps_what_was_written() -> None:
    store = _Store(bad={3}, unavailable_after=2)
    found = await isolate(list(range(8)), store.write, DatabaseError("Code: 53. first"))
    assert isinstance(found.unavailable, StoreDown)
    assert sorted(found.written) == sorted(store.stored) == [4, 5, 6, 7]
    assert found.refused == []


async def test_isolate_lets_the_caller_stop_the_search() -> None:
    store = _Store(bad={1, 2, 3})
    seen: list[int] = []

    def brake(unit: int, error: BaseException) -> None:
        seen.append(unit)
        if len(seen) == 2:
            raise RuntimeError("brake")

    with pytest.raises(RuntimeError, match="brake"):
        await isolate(list(range(4)), store.write, DatabaseError("Code: 53. first"), brake)
    assert seen == [1, 2]
