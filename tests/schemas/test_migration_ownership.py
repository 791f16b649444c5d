"""Migration 0009 on a store that holds events written before ownership: every event id
gets the agent of its earliest stored version, every stream with events the agents of
those events, per tenant; the checks then hold against those rows as against new ones;
rows written afterwards claim their ids, whatever writes them; and a crash at any step
converges, with no claim twice, when the migration runs again."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.export.principal import Principal
from ingest.export.request import validate_request
from ingest.store import owners
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED, Submission, Writer
from schemas.migrations import apply_migrations, load_migrations
from schemas.store import Store
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans
from tests.schemas.test_migration_tenancy import Crash, CrashingStore

pytestmark = pytest.mark.clickhouse

BEFORE = [m for m in load_migrations() if m.version < 9]
OWNERSHIP = [m for m in load_migrations() if m.version == 9]

# evt_1 was written twice by billing-triage, then "replaced" by other-agent reusing its
# id (what the attack did before this migration); globex has an event of the same id
# and stream name; acme's stream "lonely" holds only a sentinel. One insert per row, as
# separate requests wrote them: versions stay apart until a merge.
EVENTS = (
    "tenant_id, event_id, agent_id, surface_id, run_mode, timestamp, emission_stream,"
    " emission_seq, ingested_at, ingest_version"
)
OLD_ROWS = [
    f"INSERT INTO holonograph.evaluation_events ({EVENTS}) VALUES {row}"
    for row in (
        "('acme', 'evt_1', 'billing-triage', 'classify', 'production', '2026-11-01 10:00:00',"
        " 's', 0, '2026-11-01 10:00:01', 100)",
        "('acme', 'evt_1', 'billing-triage', 'classify', 'production', '2026-11-01 10:00:00',"
        " 's', 0, '2026-11-01 11:00:01', 200)",
        "('acme', 'evt_1', 'other-agent', 'classify', 'production', '2026-11-01 10:00:00',"
        " 'x', 0, '2026-11-01 12:00:01', 300)",
        "('acme', 'evt_2', 'billing-triage', 'classify', 'production', '2026-11-01 10:05:00',"
        " 's', 1, '2026-11-01 10:05:01', 150)",
        "('globex', 'evt_1', '', 'classify', 'production', '2026-11-01 10:00:00', 's', 0,"
        " '2026-11-01 10:00:02', 110)",
    )
] + [
    "INSERT INTO holonograph.emission_receipts (tenant_id, emission_stream, emission_seq,"
    " receipt_id, kind, event_time, received_at) VALUES ('acme', 'lonely', 0, 'r9',"
    " 'sentinel', '2026-11-01 10:00:00', '2026-11-01 10:00:03')"
]


def old_store(store: Store) -> None:
    store.command("DROP DATABASE IF EXISTS holonograph SYNC")
    apply_migrations(store, BEFORE)
    for statement in OLD_ROWS:
        store.command(statement)


def owner_rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "events": store.query(
            "SELECT tenant_id, event_id, agent_id, toString(first_received_at),"
            " first_ingest_version FROM holonograph.event_owners ORDER BY tenant_id, event_id"
        ).rows,
        "streams": store.query(
            "SELECT tenant_id, emission_stream, any_agent, agents"
            " FROM holonograph.stream_owners ORDER BY tenant_id, emission_stream"
        ).rows,
    }


EXPECTED = {
    "events": [
        ("acme", "evt_1", "billing-triage", "2026-11-01 10:00:01.000", 100),
        ("acme", "evt_2", "billing-triage", "2026-11-01 10:05:01.000", 150),
        ("globex", "evt_1", "", "2026-11-01 10:00:02.000", 110),
    ],
    "streams": [
        ("acme", "s", False, ["billing-triage"]),
        ("acme", "x", False, ["other-agent"]),
        ("globex", "s", False, [""]),
    ],
}


def test_the_migration_fills_ownership_from_the_rows_stored(store: ClickHouseStore) -> None:
    old_store(store)
    assert [m.version for m in apply_migrations(store, OWNERSHIP)] == [9]
    assert owner_rows(store) == EXPECTED
    assert apply_migrations(store, OWNERSHIP) == []
    store.command(OLD_ROWS[0].replace("'evt_1'", "'evt_after'"))  # a writer older than 0009
    claims = [row[:3] for row in owner_rows(store)["events"] if row[1] == "evt_after"]
    assert claims == [("acme", "evt_after", "billing-triage")]


def test_versions_merged_before_the_migration_leave_the_latest_ones_agent(
    store: ClickHouseStore,
) -> None:
    """What a merge removed is gone: the owner is the agent of the version kept."""
    old_store(store)
    store.command("OPTIMIZE TABLE holonograph.evaluation_events FINAL")
    apply_migrations(store, OWNERSHIP)
    assert owner_rows(store)["events"][0][:3] == ("acme", "evt_1", "other-agent")


def test_existing_rows_are_owned_as_new_ones_would_be(store: ClickHouseStore) -> None:
    old_store(store)
    apply_migrations(store)
    other = Principal(tenant_id="acme", agents=frozenset({"other-agent"}))
    billing = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}))
    forged = validate_request(
        export_request(record_spans([
            Evaluation("mine", 0, event_id="evt_2", extra={"holonograph.agent.id": "other-agent"}),
            Sentinel("s", 2, counters={"dropped": 998}),
        ])),
        principal=other,
    )  # fmt: skip
    mine = validate_request(
        export_request(record_spans([
            Evaluation("s", 2, event_id="evt_1", extra={"holonograph.agent.id": "billing-triage"}),
            Sentinel("lonely", 1),
        ], seed=2)),
        principal=billing,
    )  # fmt: skip
    at = store.query("SELECT now64(3, 'UTC')").scalar()
    rejected, kept = owners.check(
        store,
        [
            Submission(forged, Writer(other.agents), at),
            Submission(mine, Writer(billing.agents), at),
        ],
        verify=True,
    )
    assert [q.reason.split(":")[0] for q in rejected.quarantined] == [
        EVENT_OWNED.split(":")[0],
        STREAM_OWNED.split(":")[0],
    ]
    assert rejected.events == () and rejected.emissions[0].quarantined
    assert kept is mine  # evt_1 is billing's; "lonely" had no owner: billing opens it


def test_rerunning_after_a_crash_at_any_step_converges(store: ClickHouseStore) -> None:
    old_store(store)
    counting = CrashingStore(store)
    apply_migrations(counting, OWNERSHIP)
    steps = counting.writes
    assert steps == 9  # the database, its bookkeeping, two tables, three fills, a view, the record
    for at in range(steps):
        old_store(store)
        with pytest.raises(Crash):
            apply_migrations(CrashingStore(store, at), OWNERSHIP)
        apply_migrations(store, OWNERSHIP)
        assert owner_rows(store) == EXPECTED, f"crash before write {at}"


def test_a_fill_interrupted_half_way_is_completed_not_repeated(store: ClickHouseStore) -> None:
    old_store(store)
    statements = OWNERSHIP[0].statements()
    for create in statements[:2]:
        store.command(create)
    store.command(  # part of the first fill went in before the crash
        "INSERT INTO holonograph.event_owners (tenant_id, event_id, agent_id,"
        " first_received_at, first_ingest_version)"
        " VALUES ('acme', 'evt_1', 'billing-triage', '2026-11-01 10:00:01', 100)"
    )
    apply_migrations(store, OWNERSHIP)
    assert owner_rows(store) == EXPECTED
