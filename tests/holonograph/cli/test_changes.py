"""`holonograph change record`, `availability mark` and `changes` against a real store:
every operator kind and a governance one recorded and read back per tenant (another
tenant never sees them), `--id` idempotent, marks single and paired, bad flags exit 2
with nothing recorded, and all of it while `serve` holds the store."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph.cli import cli
from schemas.changes import OPERATOR_KINDS
from testkit.backends import migrated_store
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells
from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = pytest.mark.clickhouse
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "contracts" / "billing-triage.json"
AT = "2026-06-10T12:00:00Z"


def run(store_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(store_dir)])


def ok(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def record(store_dir: Path, *args: str) -> Result:
    return run(store_dir, "change", "record", "--at", AT, "--json", *args)


def listed(store_dir: Path, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ok(run(store_dir, "changes", "--json", *args))["changes"]
    return found


def test_every_kind_is_recorded_and_read_back_per_tenant(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for i, kind in enumerate(OPERATOR_KINDS):
        scope = ("--surface", "classify-intent") if i % 2 else ("--agent", "billing-triage")
        done = ok(record(store, *scope, "--kind", kind, "--description", f"{kind} change",
                         "--tenant", "acme", "--actor", "dana"))  # fmt: skip
        assert (done["kind"], done["tenantId"], done["created"]) == (kind, "acme", True)
        assert done["origin"] == "operator" and done["changeId"].startswith("chg_")
    ok(record(store, "--surface", "classify-intent", "--kind", "deploy", "--description",
              "globex's own", "--tenant", "globex"))  # fmt: skip
    registered = run(store, "contract", "register", str(EXAMPLE), "--tenant", "acme")
    assert registered.exit_code == 0, registered.output
    for tenant in ("acme", "globex"):
        ok(run(store, "availability", "mark", "--light-source", f"{tenant}/model", "--from", AT,
               "--tenant", tenant, "--json"))  # fmt: skip

    acme = listed(store, "--tenant", "acme")
    assert sorted(c["kind"] for c in acme) == sorted([*OPERATOR_KINDS, "contract", "availability"])
    assert {c["tenantId"] for c in acme} == {"acme"}
    layers = {c["kind"]: c["layer"] for c in acme}
    assert layers == {
        "deploy": "substrate", "prompt": "substrate", "config": "substrate", "lens": "lens",
        "model": "light source", "vendor": "light source", "other": None, "contract": "lens",
        "availability": "light source",
    }  # fmt: skip
    globex = listed(store, "--tenant", "globex")
    assert sorted(c["description"] for c in globex) == [  # both at AT: any order
        "globex's own", "globex/model became unavailable"
    ]  # fmt: skip
    assert [c["kind"] for c in listed(store, "--tenant", "acme", "--kind", "contract")] == [
        "contract"
    ]
    text = run(store, "changes", "--tenant", "acme", "--kind", "prompt")
    assert text.exit_code == 0 and "prompt change" in text.output and "dana" in text.output
    ambiguous = run(store, "changes")
    assert ambiguous.exit_code == 2 and "acme, globex" in ambiguous.output


def test_a_surface_reads_its_own_and_its_agents_changes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok(record(store, "--surface", "classify-intent", "--kind", "deploy", "--description", "own"))
    ok(record(store, "--surface", "route", "--kind", "deploy", "--description", "elsewhere"))
    ok(record(store, "--surface", "route", "--agent", "billing-triage", "--kind", "prompt",
              "--description", "of the agent's other surface"))  # fmt: skip
    ok(record(store, "--agent", "other-agent", "--kind", "config", "--description", "unrelated"))
    own = listed(store, "--surface", "classify-intent")
    assert [c["description"] for c in own] == ["own"]
    window = listed(store, "--since", "2026-06-11T00:00:00Z", "--until", "2026-06-12T00:00:00Z")
    assert window == []
    empty = run(store, "changes", "--since", "2026-06-11T00:00:00Z")
    assert empty.exit_code == 0 and "no change events from 2026-06-11T00:00:00Z" in empty.output
    assert [c["description"] for c in listed(store, "--agent", "billing-triage")] == [
        "of the agent's other surface"
    ]


def test_an_id_makes_a_record_idempotent(tmp_path: Path) -> None:
    store = tmp_path / "store"
    args = ("--agent", "billing-triage", "--kind", "deploy", "--description", "v1.4.2",
            "--id", "deploy-1.4.2")  # fmt: skip
    first, again = ok(record(store, *args)), ok(record(store, *args))
    assert (first["created"], again["created"]) == (True, False)
    assert first["changeId"] == again["changeId"] == "deploy-1.4.2"
    other = record(store, *args[:-3], "v1.4.3", "--id", "deploy-1.4.2")
    assert other.exit_code == 2
    assert "deploy-1.4.2 is already recorded with other content" in other.output
    assert [c["description"] for c in listed(store)] == ["v1.4.2"]


def test_availability_marks_single_and_paired(tmp_path: Path) -> None:
    store = tmp_path / "store"
    mark = ("availability", "mark", "--json", "--light-source", "openai/gpt-5")
    paired = ok(run(store, *mark, "--from", "2026-06-10T00:00:00Z", "--to", "2026-06-10T02:00:00Z",
                    "--reason", "vendor-outage"))  # fmt: skip
    assert paired["eventIds"] == [paired["changeId"]] and paired["kind"] == "availability"
    assert paired["pairing"] == {
        "pairingId": paired["changeId"], "unreachableFrom": "2026-06-10T00:00:00Z",
        "unreachableUntil": "2026-06-10T02:00:00Z",
    }  # fmt: skip
    down = ok(run(store, *mark, "--from", "2026-06-11T00:00:00Z"))
    back = ok(run(store, *mark, "--to", "2026-06-11T05:00:00Z"))
    assert (down["details"]["transition"], back["details"]["transition"]) == (
        "unavailable", "available"
    )  # fmt: skip
    assert down["pairing"] is None and down["endsAt"] is None
    kinds = listed(store, "--kind", "availability")
    assert [c["at"] for c in kinds] == [
        "2026-06-10T00:00:00Z", "2026-06-11T00:00:00Z", "2026-06-11T05:00:00Z"
    ]  # fmt: skip
    backwards = run(store, *mark, "--from", "2026-06-10T02:00:00Z", "--to", "2026-06-10T00:00:00Z")
    assert backwards.exit_code == 2 and "unreachableUntil must be after" in backwards.output
    neither = run(store, "availability", "mark", "--light-source", "x")
    assert neither.exit_code == 2 and "give --from" in neither.output


def test_bad_flags_exit_2_and_record_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    unscoped = record(store, "--kind", "deploy", "--description", "x")
    assert unscoped.exit_code == 2 and "name the surfaceId or the agentId" in unscoped.output
    empty = record(store, "--surface", "s", "--kind", "deploy", "--description", "  ")
    assert empty.exit_code == 2 and "description" in empty.output
    kind = record(store, "--surface", "s", "--kind", "rollback", "--description", "x")
    assert kind.exit_code == 2 and "rollback" in kind.output
    naive = run(store, "change", "record", "--surface", "s", "--kind", "deploy",
                "--description", "x", "--at", "2026-06-10T12:00:00")  # fmt: skip
    assert naive.exit_code == 2 and "no UTC offset" in naive.output
    assert not store.exists()  # refused before the store was opened


def test_drift_attributes_a_shift_to_the_deploy_recorded_with_the_cli(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = SurfaceSpec("classify-intent", buckets=120, events=(150, 250), tau=0.01,
                       alias="solo/model", changes=(Change(80, -0.1, ("silent",)),))  # fmt: skip
    with migrated_store(store) as opened:
        write_cells(opened, generate(spec, seed=5), dt.datetime(2026, 7, 1))
    drift = ("drift", "--surface", "classify-intent", "--since", "2026-06-01T00:00:00Z",
             "--until", "2026-06-06T00:00:00Z", "--no-save")  # fmt: skip
    before = run(store, *drift, "--json")
    (unexplained,) = json.loads(before.stdout)["changePoints"]
    assert (unexplained["source"], unexplained["confident"]) == ("substrate", False)
    ok(run(store, "change", "record", "--surface", "classify-intent", "--kind", "deploy",
           "--at", "2026-06-04T08:00:00Z", "--description", "billing v2", "--json"))  # fmt: skip
    after = run(store, *drift, "--json")
    assert after.exit_code == 1, after.output
    (point,) = json.loads(after.stdout)["changePoints"]
    assert (point["source"], point["confident"]) == ("substrate", True), point["reason"]
    (cited,) = point["changeEvents"]
    assert (cited["kind"], cited["at"], cited["timing"]["startsHere"]) == (
        "deploy", "2026-06-04T08:00:00Z", True
    )  # fmt: skip
    text = run(store, *drift)
    assert "recorded changes in the change points' windows:" in text.output
    assert "billing v2" in text.output


@pytest.mark.e2e
def test_the_commands_work_while_serve_holds_the_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    store = ("--data-dir", str(data_dir))
    try:
        done = holonograph("change", "record", "--surface", "classify-intent", "--kind",
                           "deploy", "--at", AT, "--description", "v2", "--id", "d2",
                           "--json", *store)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["created"] is True
        marked = holonograph("availability", "mark", "--light-source", "acme/m", "--from",
                             "2026-06-10T13:00:00Z", *store)  # fmt: skip
        assert marked.returncode == 0, marked.stderr
        assert "became unavailable" in marked.stdout
        read = holonograph("changes", "--json", *store)
        assert read.returncode == 0, read.stderr
        assert [c["kind"] for c in json.loads(read.stdout)["changes"]] == ["deploy", "availability"]
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
