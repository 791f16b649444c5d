"""The import rules of the tree, read from the source with `ast` (every `import` and
`from ... import`, at module level or inside a function, relative ones resolved):

- `schemas` imports nothing of ours but itself;
- `ingest` and `processors` never import each other (they meet at `schemas`);
- the receiver edge (`ingest.edge`) never imports the sink (`ingest.sink`), and no
  stage of `ingest` imports the services that wire them (`ingest.service`);
- the CLI wires: nothing outside `holonograph.cli` imports it but the entry point;
- `testkit` is imported only by `tests` and `bench` (and itself); the installed
  packages import neither `tests` nor `bench`;
- every converted job module has the one job shape (`processors.jobs`, decision 0008):
  `Request`, `Report`, `run(store, request, clock)`, `persist`, `finding`, `JOB`; every
  job package is converted or listed as not yet; every served endpoint runs one;
- SQL in the converted job packages names tables only through `schemas/tables.py`;
- what the jobs share (`processors.series`) imports no job;
- no import cycles among packages (each top-level package's sub-packages and modules:
  `ingest.export`, `ingest.metrics`, ...) but those listed as not broken yet.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("schemas", "ingest", "processors", "holonograph", "testkit", "bench", "tests")
INSTALLED = ("schemas", "ingest", "processors", "holonograph")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = package[: len(package) - (node.level - 1)]
            prefix = ".".join([*base, node.module] if node.module else base)
        else:
            prefix = node.module or ""
        # `from package import name` may name a sub-module: count both.
        return [prefix, *(f"{prefix}.{alias.name}" for alias in node.names)]
    return []


def _imports() -> list[Import]:
    found = []
    for top in OURS:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = _module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                for target in _targets(node, module, path.name == "__init__.py"):
                    if target.split(".")[0] in OURS:
                        found.append(Import(module, target, getattr(node, "lineno", 0)))
    return found


IMPORTS = _imports()


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _breaking(importer: str, imported: str, allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        str(i)
        for i in IMPORTS
        if _within(i.module, importer)
        and _within(i.target, imported)
        and not any(_within(i.module, a) for a in allowed)
    ]


def test_the_walk_sees_every_package_and_lazy_imports() -> None:
    # Without this the rules below could pass by reading nothing.
    assert {i.module.split(".")[0] for i in IMPORTS} >= set(OURS)
    lazy = [i for i in IMPORTS if i.module == "holonograph.cli.drift"]
    assert any(i.target == "processors.drift.plot" for i in lazy)  # imported inside a function


@pytest.mark.parametrize("other", [p for p in OURS if p != "schemas"])
def test_schemas_import_nothing_of_ours(other: str) -> None:
    assert _breaking("schemas", other) == []


@pytest.mark.parametrize(
    ("importer", "imported"), [("ingest", "processors"), ("processors", "ingest")]
)
def test_ingest_and_processors_never_import_each_other(importer: str, imported: str) -> None:
    assert _breaking(importer, imported) == []


def test_the_receiver_edge_never_imports_the_sink() -> None:
    assert _breaking("ingest.edge", "ingest.sink") == []


@pytest.mark.parametrize("stage", ["edge", "export", "handoff", "sink", "store"])
def test_no_stage_imports_the_services(stage: str) -> None:
    assert _breaking(f"ingest.{stage}", "ingest.service") == []


@pytest.mark.parametrize("package", INSTALLED)
def test_only_the_entry_point_imports_the_cli(package: str) -> None:
    allowed = ("holonograph.cli", "holonograph.__main__")
    assert _breaking(package, "holonograph.cli", allowed) == []


@pytest.mark.parametrize("package", INSTALLED)
def test_installed_packages_import_no_test_or_bench_code(package: str) -> None:
    for support in ("testkit", "tests", "bench"):
        assert _breaking(package, support) == []


def test_testkit_imports_no_tests_or_bench() -> None:
    assert _breaking("testkit", "tests") == []
    assert _breaking("testkit", "bench") == []


def _package(name: str) -> str:
    """The unit of the cycle rule: `ingest.export.fast` -> `ingest.export`."""
    return ".".join(name.split(".")[:2])


def cycles(edges: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        if a != b:
            graph[a].add(b)
            graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


PACKAGE_CYCLES = cycles(
    (_package(i.module), _package(i.target)) for i in IMPORTS if i.module.split(".")[0] in INSTALLED
)
# Cycles among packages not broken yet (their follow-up breaks them): this set only
# shrinks. The export's fast path builds the store's rows (`ingest.store.rows`), whose
# writers and the hand-off's protocol take its `FastBatch`, and the export handler
# takes the hand-off's protocol.
KNOWN_CYCLES = frozenset({frozenset({"ingest.export", "ingest.handoff", "ingest.store"})})


def test_no_import_cycles_among_packages_but_the_known_ones() -> None:
    assert PACKAGE_CYCLES == KNOWN_CYCLES, "a new cycle, or a known one broken: update the list"


def test_the_metrics_close_no_cycle_through_the_export_path() -> None:
    # ingest.export -> ingest.handoff -> ingest.metrics -> ingest.export was one.
    assert not any("ingest.metrics" in cycle for cycle in PACKAGE_CYCLES)
    assert _breaking("ingest.handoff", "ingest.metrics") == []
    assert _breaking("ingest.metrics", "ingest.export") != []  # it labels its outcomes


def test_the_cycle_rule_sees_a_cycle() -> None:
    # Without this the rules above could pass by finding nothing.
    edges = [("a.x", "b.y"), ("b.y", "c.z"), ("c.z", "a.x"), ("c.z", "d.w")]
    assert cycles(edges) == {frozenset({"a.x", "b.y", "c.z"})}
    assert cycles([("a", "b"), ("b", "c")]) == set()


# --- the job shape (processors/jobs.py, docs/decisions/0008-one-job-shape.md) ------------

JOB_MODULES = (
    "processors.completeness.job",
    "processors.conformance.derive",
    "processors.conformance.approve",
    "processors.conformance.check",
    "processors.conformance.results",
    "processors.events.job",
    "processors.topology.inventory",
    "processors.topology.scan",
    "processors.topology.bootstrap",
    "processors.quarantine.job",
    "processors.compare.job",
    "processors.report.job",
    "processors.drift.job",
    "processors.retention.job",
    "processors.variance.decompose",
    "processors.variance.evaluate",
    "processors.variance.lifecycle",
    "processors.lessons.overrides",
    "processors.lessons.listing",
    "processors.lessons.cluster",
    "processors.lessons.draft",
    "processors.lessons.approve",
    "processors.lessons.reject",
    "processors.lessons.publish",
    "processors.lessons.rerun",
    "processors.status.job",
    "processors.activity.job",
)
# Job packages not converted yet (their follow-up converts them): this set only shrinks.
NOT_CONVERTED: frozenset[str] = frozenset()
SHARED = frozenset({"series"})  # what jobs share, no job of its own


@pytest.mark.parametrize("name", JOB_MODULES)
def test_every_job_module_has_the_job_shape(name: str) -> None:
    from processors.jobs import Job, JobRequest

    module = importlib.import_module(name)
    assert issubclass(module.Request, JobRequest)
    assert hasattr(module, "Report")
    assert list(inspect.signature(module.run).parameters) == ["store", "request", "clock"]
    assert list(inspect.signature(module.persist).parameters) == ["store", "report"]
    job = module.JOB
    assert isinstance(job, Job)
    parts = (job.request, job.run, job.persist, job.finding)
    assert parts == (module.Request, module.run, module.persist, module.finding)
    assert job.document is not None


def test_every_job_package_is_converted_or_listed() -> None:
    packages = {
        path.name for path in (ROOT / "processors").iterdir() if (path / "__init__.py").exists()
    }
    converted = {name.split(".")[1] for name in JOB_MODULES}
    assert packages == converted | NOT_CONVERTED | SHARED
    assert not converted & NOT_CONVERTED


def test_every_served_endpoint_runs_a_job_module() -> None:
    from holonograph.api.endpoints import ENDPOINTS

    assert {endpoint.job.run.__module__ for endpoint in ENDPOINTS} <= set(JOB_MODULES)


def test_what_the_jobs_share_imports_no_job() -> None:
    # A job may build on `processors.series`; the reverse would tie every job to one.
    jobs = [p for p in (ROOT / "processors").iterdir() if (p / "__init__.py").exists()]
    for job in sorted(p.name for p in jobs if p.name not in SHARED):
        for shared in sorted(SHARED):
            assert _breaking(f"processors.{shared}", f"processors.{job}") == []
    assert any(i.module.startswith("processors.series") for i in IMPORTS)


def _sql_strings(tree: ast.AST) -> list[ast.Constant]:
    """String constants, f-string parts included, but not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]  # fmt: skip


def test_sql_in_converted_jobs_names_tables_only_through_schemas_tables() -> None:
    from schemas import tables

    names = {t.name for t in vars(tables).values() if isinstance(t, tables.Table)}
    named = re.compile(rf"\b{tables.DATABASE}\.({'|'.join(sorted(names))})\b")
    packages = {name.split(".")[1] for name in JOB_MODULES}
    found = []
    for package in sorted(packages):
        for path in sorted((ROOT / "processors" / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in _sql_strings(tree):
                for match in named.finditer(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {match[0]}")
    assert found == []
    assert names >= {"evaluation_events", "emission_receipts", "conformance_fixtures"}


def test_the_sql_rule_sees_a_table_named_by_hand() -> None:
    # Without this the rule above could pass by matching nothing.
    tree = ast.parse('"""holonograph.x"""\nSQL = "SELECT 1 FROM holonograph.evaluation_events"')
    assert [n.value for n in _sql_strings(tree)] == ["SELECT 1 FROM holonograph.evaluation_events"]
