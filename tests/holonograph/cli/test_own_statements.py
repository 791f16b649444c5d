"""The analyses that skip the statement gate (`drift`, `compare`, `quarantine`,
`completeness`: their readers run only their own statements) never put a value a
user gave into a statement's text: every value binds on the server, so what runs is
the job's code whatever the flags say. And their readers still refuse every write."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from holonograph.cli.jobs import CommandStores
from ingest.store import reader
from ingest.store.clickhouse import open_store
from ingest.store.querygate import StatementRefused
from schemas.migrations import apply_migrations
from tests.processors.conformance.support import event, insert_events

pytestmark = pytest.mark.clickhouse

# A value that would change a statement if it were pasted into its text.
HOSTILE = "x') UNION ALL SELECT * FROM file('/etc/passwd') -- '"
WINDOW = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        insert_events(store, [event("evt_1", {}), event("evt_2", {})], tenant_id="acme")
    finally:
        store.close()
    return path


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Every statement a read-only connection is asked, and whether its gate was on."""
    seen: list[tuple[str, bool]] = []
    query = reader.ReadOnlyStore.query

    def spy(self: Any, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        seen.append((sql, self._gate))
        return query(self, sql, parameters)

    monkeypatch.setattr(reader.ReadOnlyStore, "query", spy)
    yield seen


@pytest.mark.parametrize(
    "args",
    [
        ["drift", "--surface", HOSTILE, *WINDOW],
        ["drift", "--surface", HOSTILE, "--dimension", HOSTILE, "--tenant", HOSTILE, *WINDOW],
        ["compare", "--surface", HOSTILE, *WINDOW],
        ["compare", "--surface", HOSTILE, "--tenant", "acme", *WINDOW],
        ["quarantine", "--reason", HOSTILE, "--tenant", HOSTILE],
        ["quarantine", "--reason-prefix", HOSTILE],
        ["completeness", "--stream", HOSTILE, "--surface", HOSTILE],
        ["completeness", "--tenant", HOSTILE],
    ],
)
def test_no_value_a_user_gives_reaches_the_text_of_an_ungated_statement(
    data_dir: Path, statements: list[tuple[str, bool]], args: list[str]
) -> None:
    done = CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir), "--json"])
    assert done.exit_code in (0, 1, 2), done.output  # an unknown name is a usage error
    assert statements, "the command read nothing: the check saw nothing"
    ungated = [sql for sql, gate in statements if not gate]
    assert ungated  # these commands' readers skip the gate
    for sql in ungated:
        assert "passwd" not in sql and HOSTILE not in sql


def test_query_keeps_its_gate(data_dir: Path, statements: list[tuple[str, bool]]) -> None:
    done = CliRunner().invoke(
        cli, ["query", "--data-dir", str(data_dir), "SELECT * FROM file('/etc/passwd')"]
    )
    assert done.exit_code == 1
    assert "reaches outside the store" in done.output
    assert statements and all(gate for _, gate in statements)


def test_a_reader_for_own_statements_still_refuses_every_write(data_dir: Path) -> None:
    stores = CommandStores(None, str(data_dir), own_statements=True)
    try:
        with stores.reading(None) as store:
            assert isinstance(store, reader.ReadOnlyStore) and not store._gate
            count = "SELECT count() FROM holonograph.evaluation_events"
            assert store.query(count).scalar() == 2
            with pytest.raises(Exception, match="readonly"):
                store.query("INSERT INTO holonograph.schedule_runs (run_id) VALUES ('r1')")
            with pytest.raises(Exception, match="readonly"):
                store.query("SELECT 1 SETTINGS readonly = 0")
            with pytest.raises(StatementRefused):
                store.command("DROP TABLE holonograph.evaluation_events")
            assert store.query(count).scalar() == 2
    finally:
        stores.close()
    check = open_store(f"chdb://{data_dir}")
    try:
        assert check.query("SELECT count() FROM holonograph.schedule_runs").scalar() == 0
    finally:
        check.close()
