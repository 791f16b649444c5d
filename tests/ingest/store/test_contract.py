"""One contract for every `Store` (`schemas.store`), run against each implementation
in the spirit of arroyo's backend mixins: the clickhouse-connect store over chDB, the
failing store while it is healthy, the owner's admin endpoint with its write and its
read token, and the read-only connection. Every store binds parameters, answers in
select order with naive-UTC datetimes and reads what was written; a writable store
writes, and a read-only one refuses every write and changes nothing."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from holonograph.admin_client import AdminStore
from ingest.service.admin import ADMIN_FILE
from ingest.store.clickhouse import ClickHouseStore, open_store
from ingest.store.reader import open_reader
from ingest.store.url import chdb_path
from schemas.migrations import apply_migrations
from schemas.store import Store
from testkit.faulty_store import FaultyStore
from tests.conftest import RunningReceiver

pytestmark = [pytest.mark.clickhouse]

# The contract's own table, outside the `holonograph` database (which holds only what
# the migrations create).
PROBE_DATABASE = "store_contract"
PROBE = f"{PROBE_DATABASE}.probe"
COLUMNS = ("name", "n", "at")
AT = dt.datetime(2026, 7, 1, 9, 30, 15, 250000)
REFUSED = r"(?i)read-only|readonly|refused"


@dataclass
class Owner:
    """The store that owns the chDB directory, and the receiver serving its admin
    endpoint."""

    store: ClickHouseStore
    admin_url: str
    read_token: str
    write_token: str


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Owner]:
    store = open_store(f"chdb://{tmp_path_factory.mktemp('contract') / 'store'}")
    apply_migrations(store)
    store.command(f"CREATE DATABASE IF NOT EXISTS {PROBE_DATABASE}")
    store.command(
        f"CREATE TABLE {PROBE} (name String, n UInt32, at DateTime64(6, 'UTC'))"
        " ENGINE = MergeTree ORDER BY (name, n)"
    )
    receiver = RunningReceiver(store)
    tokens = json.loads((chdb_path(store.url) / ADMIN_FILE).read_text())
    try:
        yield Owner(store, tokens["url"], tokens["read_token"], tokens["write_token"])
    finally:
        receiver.stop()
        store.close()


def _clickhouse(owner: Owner) -> Store:
    return owner.store


def _faulty(owner: Owner) -> Store:
    return FaultyStore(owner.store)


def _admin_write(owner: Owner) -> Store:
    return AdminStore(owner.store.url, owner.admin_url, owner.write_token)


def _admin_read(owner: Owner) -> Store:
    return AdminStore(owner.store.url, owner.admin_url, owner.read_token)


def _reader(owner: Owner) -> Store:
    return open_reader(owner.store.url)


WRITABLE: dict[str, Callable[[Owner], Store]] = {
    "clickhouse": _clickhouse,
    "faulty-store": _faulty,
    "admin-write-token": _admin_write,
}
READ_ONLY: dict[str, Callable[[Owner], Store]] = {
    "admin-read-token": _admin_read,
    "read-only-connection": _reader,
}


def _count(owner: Owner, name: str) -> int:
    return int(
        owner.store.query(
            f"SELECT count() FROM {PROBE} WHERE name = {{name:String}}", {"name": name}
        ).scalar()
    )


class StoreContract:
    """What every store does; subclasses parametrize the `subject` fixture."""

    def test_binds_parameters_and_answers_in_select_order(self, subject: Store) -> None:
        result = subject.query(
            "SELECT {b:String} AS second, {a:UInt32} AS first", {"a": 7, "b": "seven"}
        )
        assert result.column_names == ("second", "first")
        assert result.rows == [("seven", 7)]
        assert result.dicts() == [{"second": "seven", "first": 7}]
        assert result.scalar() == "seven"

    def test_datetimes_come_back_naive_utc(self, subject: Store) -> None:
        moment = subject.query(
            "SELECT toDateTime64({at:String}, 6, 'UTC')", {"at": "2026-07-01 09:30:15.25"}
        ).scalar()
        assert moment == AT and moment.tzinfo is None

    def test_reads_what_the_owner_wrote(self, subject: Store, owner: Owner) -> None:
        name = uuid.uuid4().hex
        owner.store.insert(PROBE, [[name, 1, AT], [name, 2, AT]], COLUMNS)
        rows = subject.query(
            f"SELECT n, at FROM {PROBE} WHERE name = {{name:String}} ORDER BY n", {"name": name}
        ).rows
        assert rows == [(1, AT), (2, AT)]

    def test_an_empty_answer_is_empty(self, subject: Store) -> None:
        result = subject.query(f"SELECT n FROM {PROBE} WHERE name = 'nobody'")
        assert result.rows == [] and result.dicts() == [] and result.scalar() is None


class TestWritableStores(StoreContract):
    @pytest.fixture(params=list(WRITABLE))
    def subject(self, request: pytest.FixtureRequest, owner: Owner) -> Iterator[Store]:
        # Not closed here: the failing store's close is its inner store's, the owner's.
        yield WRITABLE[request.param](owner)

    def test_inserts_are_read_back_by_every_store(self, subject: Store, owner: Owner) -> None:
        name = uuid.uuid4().hex
        subject.insert(PROBE, [[name, 3, AT]], COLUMNS)
        subject.insert(PROBE, [], COLUMNS)  # nothing to write is no write
        assert _count(owner, name) == 1
        reader = open_reader(owner.store.url)
        try:
            assert reader.query(f"SELECT n FROM {PROBE} WHERE name = '{name}'").rows == [(3,)]
        finally:
            reader.close()

    def test_commands_run(self, subject: Store, owner: Owner) -> None:
        name = uuid.uuid4().hex
        owner.store.insert(PROBE, [[name, 4, AT]], COLUMNS)
        subject.command(
            f"ALTER TABLE {PROBE} DELETE WHERE name = {{name:String}} SETTINGS mutations_sync = 2",
            {"name": name},
        )
        assert _count(owner, name) == 0


class TestReadOnlyStores(StoreContract):
    @pytest.fixture(params=list(READ_ONLY))
    def subject(self, request: pytest.FixtureRequest, owner: Owner) -> Iterator[Store]:
        store = READ_ONLY[request.param](owner)
        yield store
        store.close()

    def test_refuses_every_write_and_changes_nothing(self, subject: Store, owner: Owner) -> None:
        name = uuid.uuid4().hex
        owner.store.insert(PROBE, [[name, 5, AT]], COLUMNS)
        with pytest.raises(Exception, match=REFUSED):
            subject.insert(PROBE, [[name, 6, AT]], COLUMNS)
        with pytest.raises(Exception, match=REFUSED):
            subject.command(f"TRUNCATE TABLE {PROBE}")
        with pytest.raises(Exception, match=REFUSED):
            subject.query(f"INSERT INTO {PROBE} VALUES ('{name}', 7, now64())")
        assert _count(owner, name) == 1
