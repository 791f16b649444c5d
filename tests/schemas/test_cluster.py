"""The cluster rendering of the migrations (`schemas.cluster`), run everywhere: every
shipped migration renders; every statement parses with ClickHouse's own parser; every
MergeTree became a Replicated one under a documented Keeper path with the {shard} and
{replica} macros and has a Distributed twin under the code's name, sharded by the
identity; materialized views fire on the local tables; every DDL runs ON CLUSTER; a
new layout migration written like issue 30's (a rebuild to a new sorting key) renders
generically; what cannot be rendered is refused by name."""

from __future__ import annotations

import re

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.cluster import (
    ClusterRenderError,
    ClusterSchema,
    cluster_of,
    render_all,
    sharding_key,
    sorting_key,
)
from schemas.migrations import Migration, load_migrations

pytestmark = pytest.mark.clickhouse

CLUSTER = "holonograph"
RUNNER_STEP = re.compile(r"^(REBUILD|BACKFILL|RELAYOUT)\b")


def rendered() -> list[tuple[Migration, list[str]]]:
    migrations = load_migrations()
    return list(
        zip(migrations, render_all([m.statements() for m in migrations], CLUSTER), strict=True)
    )


def final_schema() -> ClusterSchema:
    schema = ClusterSchema(CLUSTER)
    for migration in load_migrations():
        for statement in migration.statements():
            schema.render(statement)
    return schema


def parses(store: ClickHouseStore, sql: str) -> str:
    """ClickHouse's formatting of `sql`; raises on a statement it cannot parse."""
    return str(store.query("SELECT formatQuerySingleLine({sql:String})", {"sql": sql}).scalar())


def test_every_rendered_statement_parses(store: ClickHouseStore) -> None:
    with pytest.raises(Exception, match="Syntax error"):  # the check can fail
        parses(store, "CREATE TABLE db.t ON CLUSTER c (a String) ENGINE = Replicated(")
    count = 0
    for migration, statements in rendered():
        for statement in statements:
            if RUNNER_STEP.match(statement):
                continue
            formatted = parses(store, statement)
            assert formatted, (migration.version, statement)
            count += 1
    assert count > 50


def test_every_ddl_statement_runs_on_the_cluster() -> None:
    for migration, statements in rendered():
        for statement in statements:
            if statement.startswith(("CREATE", "ALTER", "DROP", "TRUNCATE", "OPTIMIZE")):
                assert f"ON CLUSTER {CLUSTER}" in statement, (migration.version, statement)


def test_every_merge_tree_is_replicated_under_its_keeper_path_with_a_distributed_twin() -> None:
    locals_, distributed = {}, {}
    for _, statements in rendered():
        for statement in statements:
            engine = re.search(r"ENGINE = (\w+)\(([^\n]*)\)", statement)
            create = re.match(r"CREATE TABLE (?:IF NOT EXISTS )?(\S+)", statement)
            if create is None or engine is None:
                assert "MergeTree" not in statement or "Replicated" in statement, statement
                continue
            if engine[1] == "Distributed":
                distributed[create[1]] = engine[2]
            else:
                assert engine[1].startswith("Replicated") and "MergeTree" in engine[1]
                name = create[1]
                assert name.endswith("_local")
                path = f"'/clickhouse/tables/{{shard}}/holonograph/{name.split('.')[1]}'"
                assert engine[2].startswith(f"{path}, '{{replica}}'"), statement
                locals_[name] = statement
    assert {name + "_local" for name in distributed} == set(locals_)
    for name, args in distributed.items():
        table = name.split(".")[1]
        assert args.startswith(f"{CLUSTER}, holonograph, {table}_local, "), args


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("evaluation_events", "cityHash64(tenant_id, event_id)"),
        ("evaluation_dimensions", "cityHash64(tenant_id, event_id)"),
        ("event_owners", "cityHash64(tenant_id, event_id)"),
        ("event_moves", "cityHash64(tenant_id, event_id)"),
        ("emission_receipts", "cityHash64(tenant_id, emission_stream)"),
        ("stream_status", "cityHash64(tenant_id, emission_stream)"),
        ("store_retention", "0"),
    ],
)
def test_the_tables_end_sharded_by_their_identity(table: str, key: str) -> None:
    # The same key as the Kafka records' (tenant, event id): a re-send lands on the
    # shard holding every other version of its row, so FINAL per shard is FINAL.
    assert final_schema().replicated[f"holonograph.{table}"] == key


def test_the_tenancy_rebuild_renders_as_a_cluster_step_with_the_new_key() -> None:
    tenancy = next(statements for m, statements in rendered() if m.version == 5)
    steps = [s for s in tenancy if s.startswith("REBUILD")]
    assert (
        "REBUILD ON CLUSTER holonograph holonograph.evaluation_events FROM"
        " holonograph.evaluation_events__v5 ADDING tenant_id SHARDED BY"
        " cityHash64(tenant_id, event_id)"
    ) in steps
    schema = final_schema()
    assert "holonograph.evaluation_events__v5" not in schema.replicated  # dropped after


def test_the_event_layout_renders_as_cluster_relayouts_sharded_by_the_identity() -> None:
    layout = next(statements for m, statements in rendered() if m.version == 16)
    steps = [s for s in layout if s.startswith("RELAYOUT")]
    assert steps == [
        f"RELAYOUT ON CLUSTER holonograph holonograph.{t} FROM holonograph.{t}__v16"
        " PLACED BY holonograph.event_owners SHARDED BY cityHash64(tenant_id, event_id)"
        for t in ("evaluation_events", "evaluation_dimensions")
    ]
    created = [
        s
        for s in layout
        if s.startswith("CREATE TABLE IF NOT EXISTS holonograph.evaluation_events__v16_local")
    ]
    assert len(created) == 1
    engine = (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/holonograph/"
        "evaluation_events__v16_local', '{replica}', ingest_version)"
    )
    assert engine in created[0]
    assert "ORDER BY (tenant_id, placed_surface_id, placed_hour, event_id)" in created[0]
    assert "DROP VIEW IF EXISTS holonograph.event_owners_mv ON CLUSTER holonograph" in layout
    views = [s for s in layout if s.startswith("CREATE MATERIALIZED VIEW")]
    assert [v.split("\nAS")[0] for v in views] == [
        "CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_owners_mv ON CLUSTER"
        " holonograph TO holonograph.event_owners_local",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_moves_from_events ON CLUSTER"
        " holonograph TO holonograph.event_moves_local",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS holonograph.event_moves_from_dimensions ON"
        " CLUSTER holonograph TO holonograph.event_moves_local",
    ]
    assert "FROM holonograph.evaluation_events_local" in views[0]
    schema = final_schema()
    assert "holonograph.evaluation_events__v16" not in schema.replicated


def test_materialized_views_read_and_write_the_local_tables() -> None:
    views = [
        s for _, statements in rendered() for s in statements
        if s.startswith("CREATE MATERIALIZED VIEW")
    ]  # fmt: skip
    assert views
    replicated = set(final_schema().replicated) | {"holonograph.emission_receipts__v5"}
    for view in views:
        target = re.search(r" TO (\S+)", view)
        assert target is not None and target[1].endswith("_local"), view
        for name in re.findall(r"\bFROM\s+(holonograph\.\w+)", view):
            assert name.endswith("_local") or name not in replicated, view


def test_a_new_layout_migration_renders_generically() -> None:
    # Written as the layout work writes one (issue 30, item 1): a new sorting key
    # led by surface and time, the identity after it, and the runner's rebuild.
    layout = Migration(
        16,
        "event_layout",
        """
ALTER TABLE holonograph.event_owners
    ADD COLUMN IF NOT EXISTS placed_at DateTime64(9, 'UTC') DEFAULT 0;
CREATE TABLE IF NOT EXISTS holonograph.evaluation_events__v16
(
    tenant_id LowCardinality(String) DEFAULT 'default',
    event_id String,
    surface_id LowCardinality(String),
    placed_at DateTime64(9, 'UTC'),
    ingest_version UInt64,
    INDEX timestamp_minmax placed_at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(ingest_version)
ORDER BY (tenant_id, surface_id, placed_at, event_id);
REBUILD holonograph.evaluation_events FROM holonograph.evaluation_events__v16 ADDING placed_at;
""",
    )  # fmt: skip
    schema = final_schema()
    out = [s for statement in layout.statements() for s in schema.render(statement)]
    assert out[0].startswith(
        "ALTER TABLE holonograph.event_owners_local ON CLUSTER holonograph ADD COLUMN"
    )
    assert out[1].startswith("ALTER TABLE holonograph.event_owners ON CLUSTER holonograph ADD")
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/holonograph/" in out[2]
    assert "ORDER BY (tenant_id, surface_id, placed_at, event_id)" in out[2]
    assert out[3].endswith("cityHash64(tenant_id, event_id))")  # the identity, not the order
    assert out[4].endswith("ADDING placed_at SHARDED BY cityHash64(tenant_id, event_id)")


def test_keys_are_read_from_the_sorting_key() -> None:
    tail = " PARTITION BY toYYYYMM(t) ORDER BY (surface_id, toStartOfHour(timestamp), event_id)"
    assert sorting_key(tail) == ["surface_id", "toStartOfHour(timestamp)", "event_id"]
    assert sorting_key(" ORDER BY version") == ["version"]
    assert sharding_key(["tenant_id", "agent_id", "version_id"]) == (
        "cityHash64(tenant_id, agent_id, version_id)"
    )
    assert sharding_key(["tuple()"]) == "0"


def test_the_cluster_is_the_store_urls_parameter() -> None:
    assert cluster_of("http://ch-1:8123/?cluster=holonograph") == "holonograph"
    assert cluster_of("http://ch-1:8123") is None
    assert cluster_of("chdb:///var/lib/holonograph") is None
    with pytest.raises(ClusterRenderError):
        cluster_of("http://ch-1:8123/?cluster=a;DROP")


def test_a_statement_it_cannot_render_is_refused_by_name() -> None:
    with pytest.raises(ClusterRenderError, match="no cluster rendering for: SYSTEM"):
        ClusterSchema(CLUSTER).render("SYSTEM FLUSH LOGS")
