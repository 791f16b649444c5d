"""The ownership check on a real store: keys of any content round-trip, the first
submission of a commit claims what is new and the rest are checked against it, two
writers claiming one key at once agree which claim stands, and what cannot be told
(a record older than ownership with no events) is neither checked nor claimed. A
request that takes the hot path (a `FastBatch`) is decided exactly as its models are."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import Principal
from ingest.export.request import validate_request
from ingest.sink.batch import Consumed
from ingest.store import owners
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED, StreamOwner, Submission, Writer
from ingest.store.rows import TableRows, write_rows
from schemas import records
from schemas.events import ValidatedBatch
from schemas.store import Store
from schemas.tables import EVENT_OWNERS
from testkit.faulty_store import FaultyStore
from tests.otel_emit import Evaluation, Item, Sentinel, export_request, record_spans

pytestmark = pytest.mark.clickhouse

AT = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
BILLING = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}))
OTHER = Principal(tenant_id="acme", agents=frozenset({"other-agent"}))
OPERATOR = Principal(tenant_id="acme")  # any agent


def batch(items: list[Item], principal: Principal, seed: int = 1) -> ValidatedBatch:
    return validate_request(export_request(record_spans(items, seed=seed)), principal=principal)


def fast(items: list[Item], principal: Principal, seed: int = 1) -> FastBatch:
    """The same request as `batch`, as the receiver's hot path takes it."""
    taken = fast_batch(export_request(record_spans(items, seed=seed)), principal)
    assert taken is not None, "an all-valid request takes the hot path"
    return taken


def agent(name: str, stream: str, seq: int, **kwargs: Any) -> Evaluation:
    return Evaluation(stream, seq, extra={"holonograph.agent.id": name}, **kwargs)


def submission(b: ValidatedBatch | FastBatch, order: int = 0) -> Submission:
    return Submission(b, Writer(b.agents), AT, order)


ODD = ["a'b", 'q"uote', "back\\slash", "tab\there", "new\nline", "tick`x", "nul\x00x",
       "\u00e9\u6f22\U0001f600", "\\N", "\\", "'", "\\'", " "]  # fmt: skip


@pytest.mark.parametrize("wrapped", [False, True], ids=["clickhouse-store", "another-store"])
def test_keys_of_any_content_round_trip(store: ClickHouseStore, wrapped: bool) -> None:
    """Keys travel as one JSON parameter, escaped by us for a `ClickHouseStore` and by
    clickhouse-connect for any other `Store`: the same owners come back either way."""
    target: Store = FaultyStore(store) if wrapped else store
    claims = owners.Owners()
    for i, text in enumerate(ODD):
        claims.event_claims[("t'1", text)] = ["t'1", text, f"agent-{i}", 0, i, "", 0]
        claims.stream_claims[("t'1", text)] = ["t'1", text, False, [text, "x"], 0]
    owners.claim(target, claims)
    keys = {("t'1", text) for text in ODD}
    found = owners.lookup(target, keys | {("other", "a'b")}, keys)
    assert found.events == {("t'1", text): f"agent-{i}" for i, text in enumerate(ODD)}
    assert found.streams == {("t'1", t): StreamOwner(False, frozenset({t, "x"})) for t in ODD}


def test_the_first_submission_claims_and_the_next_is_checked_against_it(
    store: ClickHouseStore,
) -> None:
    """With `verify` (writers side by side) the check claims new ids itself; one writer
    leaves that to the rows it writes (`test_an_event_row_claims_its_id_whoever_writes_it`)."""
    first = batch([agent("billing-triage", "s", 0, event_id="evt_1")], BILLING)
    # In the same commit: the other token reuses the id on its stream and writes on "s".
    second = batch(
        [agent("other-agent", "mine", 0, event_id="evt_1"), agent("other-agent", "s", 1),
         Sentinel("s", 2, final=True)],
        OTHER, seed=2,
    )  # fmt: skip
    kept, checked = owners.check(store, [submission(first), submission(second, 1)], verify=True)
    assert kept is first
    assert [e.event_id for e in checked.events] == []
    reasons = [q.reason for q in checked.quarantined]
    assert reasons[0].startswith(f"{EVENT_OWNED}: 'evt_1' belongs to agent 'billing-triage'")
    assert all(r.startswith(STREAM_OWNED) for r in reasons[1:]) and len(reasons) == 3
    # its own stream keeps the arrival (quarantined, as at the door); "s" gets nothing
    assert [(e.stream, e.seq, e.quarantined) for e in checked.emissions] == [("mine", 0, True)]
    assert owners.lookup(store, {("acme", "evt_1")}, {("acme", "s"), ("acme", "mine")}) == (
        owners.Owners(
            events={("acme", "evt_1"): "billing-triage"},
            streams={
                ("acme", "s"): StreamOwner(False, frozenset({"billing-triage"})),
                ("acme", "mine"): StreamOwner(False, frozenset({"other-agent"})),
            },
        )
    )
    again = owners.check(store, [submission(first)], verify=True)
    assert again == [first]
    assert store.query(f"SELECT count() FROM {EVENT_OWNERS.qualified}").scalar() == 1


class RivalFirst(FaultyStore):
    """A store on which another writer's claim of the same key lands just before ours
    (both looked the key up and found nothing)."""

    def __init__(self, inner: Store, rival: list[Any]) -> None:
        super().__init__(inner)
        self._rival: list[Any] | None = rival

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if table == EVENT_OWNERS.qualified and self._rival is not None:
            super().insert(table, [self._rival], column_names)
            self._rival = None
        super().insert(table, rows, column_names, settings)


@pytest.mark.parametrize("make", [batch, fast], ids=["reference", "hot-path"])
def test_two_writers_claiming_one_id_at_once_agree_which_claim_stands(
    store: ClickHouseStore, make: Any
) -> None:
    rival = ["acme", "evt_race", "other-agent", 0, 1, "classify-intent", 0]
    mine = make([agent("billing-triage", "s", 0, event_id="evt_race")], BILLING)
    (checked,) = owners.check(RivalFirst(store, rival), [submission(mine)], verify=True)
    assert isinstance(checked, ValidatedBatch)
    assert checked.events == ()
    (rejection,) = checked.quarantined
    assert rejection.reason.startswith(f"{EVENT_OWNED}: 'evt_race' belongs to agent 'other-agent'")
    # every later reader, this writer included, sees the claim that came first
    assert owners.lookup(store, {("acme", "evt_race")}, set()).events == {
        ("acme", "evt_race"): "other-agent"
    }


def test_a_claim_the_store_refuses_for_good_is_left_out(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    faulty.refuse("evt_bad")
    items: list[Item] = [agent("billing-triage", "s", n, event_id=f"evt_{n}") for n in range(3)]
    items.append(agent("billing-triage", "s", 3, event_id="evt_bad"))
    owners.check(faulty, [submission(batch(items, BILLING))], verify=True)
    claimed = store.query(f"SELECT event_id FROM {EVENT_OWNERS.qualified} ORDER BY event_id").rows
    assert claimed == [("evt_0",), ("evt_1",), ("evt_2",)]


def _consumed(b: ValidatedBatch, version: int) -> Consumed:
    record = records.BatchRecord(
        schema_version=version,
        tenant_id=b.tenant_id,
        **({"agents": records.record_agents(b.agents)} if version >= 4 else {}),
        receipt_id="r",
        received_at=AT,
        stream=b.emissions[0].stream,
        events=b.events,
        emissions=b.emissions,
    )
    return Consumed(TopicPartition("t", 0), 0, b"d", record=record)


def test_a_records_writer_is_its_tokens_agents_or_from_before_ownership_its_events(
    store: ClickHouseStore,
) -> None:
    owners.check(
        store, [submission(batch([agent("billing-triage", "s", 0)], BILLING))], verify=False
    )
    sentinel = batch([Sentinel("s", 1)], OTHER)
    foreign = batch([agent("other-agent", "s", 2)], OTHER)
    assert _consumed(sentinel, 4).submission() == Submission(
        _consumed(sentinel, 4).recorded(),
        Writer(frozenset({"other-agent"})),
        AT,  # type: ignore[arg-type]
    )
    old_sentinel, old_foreign, new_sentinel = (
        _consumed(sentinel, 3).submission(),
        _consumed(foreign, 3).submission(),
        _consumed(sentinel, 4).submission(),
    )
    assert old_sentinel is not None and old_sentinel.writer is None  # nothing to tell it by
    assert old_foreign is not None and old_foreign.writer == Writer(frozenset({"other-agent"}))
    assert new_sentinel is not None
    kept, rejected, also_rejected = owners.check(
        store, [old_sentinel, old_foreign, new_sentinel], verify=False
    )
    assert kept is old_sentinel.batch  # written before ownership: not checked, not claimed
    assert [q.reason.startswith(STREAM_OWNED) for q in rejected.quarantined] == [True]
    assert [q.reason.startswith(STREAM_OWNED) for q in also_rejected.quarantined] == [True]


def test_an_event_row_claims_its_id_whoever_writes_it(store: ClickHouseStore) -> None:
    """A writer on its own claims no id before writing: the row does (migration 0009's
    view), even one a writer older than ownership inserts without any check."""
    first = batch([agent("billing-triage", "s", 0, event_id="evt_row")], BILLING)
    assert owners.check(store, [submission(first)], verify=False) == [first]
    assert owners.lookup(store, {("acme", "evt_row")}, set()).events == {}
    rows = TableRows()
    rows.add(first, "r1", AT)
    write_rows(store, rows)  # no check at all, as before ownership
    assert owners.lookup(store, {("acme", "evt_row")}, set()).events == {
        ("acme", "evt_row"): "billing-triage"
    }
    (checked,) = owners.check(
        store, [submission(batch([agent("other-agent", "o", 0, event_id="evt_row")], OTHER))],
        verify=False,
    )  # fmt: skip
    assert checked.events == () and checked.quarantined[0].reason.startswith(EVENT_OWNED)


# One commit, in arrival order: the victim's stream and event, every attack on them
# (all valid requests, so all take the hot path), the owner's re-send and an any-agent
# token continuing the stream.
ATTACKS: list[tuple[list[Item], Principal]] = [
    ([agent("billing-triage", "s", 0, event_id="evt_1"), agent("billing-triage", "s", 1),
      Sentinel("s", 2, counters={"offered": 2, "delivered": 2, "dropped": 0})], BILLING),
    ([agent("other-agent", "mine", 0, event_id="evt_1")], OTHER),
    ([Sentinel("s", 3, counters={"offered": 1000, "delivered": 2, "dropped": 998})], OTHER),
    ([Sentinel("s", 4, final=True)], OTHER),
    ([agent("other-agent", "s", 5), agent("other-agent", "mine", 1)], OTHER),
    ([agent("other-agent", "any", 0, event_id="evt_1")], OPERATOR),
    ([agent("billing-triage", "s", 6, event_id="evt_1")], BILLING),
    ([Sentinel("s", 7, final=True)], OPERATOR),
]  # fmt: skip


def _decided(make: Any, known: owners.Owners) -> list[ValidatedBatch | FastBatch]:
    return [
        owners.decide(known, Submission(make(items, p, seed), Writer(p.agents), AT, order))
        for order, (seed, (items, p)) in enumerate(enumerate(ATTACKS, start=1))
    ]


def test_a_hot_path_batch_is_decided_exactly_as_its_models_are() -> None:
    """The cross-agent overwrite and the forged sentinels are rejected whichever path a
    request took, with the same reasons and claims; a batch nothing of which is
    rejected stays a `FastBatch` (the hot path is kept)."""
    by_models, on_rows = owners.Owners(), owners.Owners()
    reference, got = _decided(batch, by_models), _decided(fast, on_rows)
    assert on_rows == by_models
    assert [isinstance(g, FastBatch) for g in got] == [
        True, False, False, False, False, False, True, True
    ]  # fmt: skip
    for expected, decided in zip(reference, got, strict=True):
        assert (decided.materialize() if isinstance(decided, FastBatch) else decided) == expected
    rejected = [q.reason.split(":")[0] for b in reference for q in b.quarantined]
    assert rejected == [
        "holonograph.event.id", *["holonograph.emission.stream"] * 3,
        "holonograph.event.id",
    ]  # fmt: skip
    assert [e.stream for e in reference[4].emissions] == ["mine"]  # its own stream kept


def test_a_hot_path_batch_claims_on_the_store_and_the_next_is_checked_against_it(
    store: ClickHouseStore,
) -> None:
    first = fast(ATTACKS[0][0], BILLING)
    assert owners.check(store, [submission(first)], verify=True) == [first]
    assert owners.lookup(store, {("acme", "evt_1")}, {("acme", "s")}) == owners.Owners(
        events={("acme", "evt_1"): "billing-triage"},
        streams={("acme", "s"): StreamOwner(False, frozenset({"billing-triage"}))},
    )
    overwrite, forged = fast(ATTACKS[1][0], OTHER, 2), fast(ATTACKS[2][0], OTHER, 3)
    for checked in owners.check(
        store, [submission(overwrite), submission(forged, 1)], verify=False
    ):
        assert isinstance(checked, ValidatedBatch)
        assert checked.events == () and len(checked.quarantined) == 1
        assert [e.stream for e in checked.emissions if not e.quarantined] == []


class _At:
    def __init__(self, url: str) -> None:
        self.url = url


def test_claims_are_read_back_where_another_process_may_claim() -> None:
    """A chDB directory has one process writing it; a server any number."""
    server: Any = _At("https://user:pass@clickhouse.example:8443/")
    directory: Any = _At("chdb:///var/lib/holonograph/store")
    assert owners.verify_claims(server)
    assert not owners.verify_claims(directory)
