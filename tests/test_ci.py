"""CI (`.ci/run`) runs the README's test command, then exactly the Makefile's lint
recipe, and fails on findings: the lines it uses to find both are run here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / ".ci" / "run").read_text()


def assignment(name: str) -> str:
    match = re.search(rf"^{name}=\$\((.*)\)$", SCRIPT, re.MULTILINE)
    assert match, f"{name} is not assigned in .ci/run"
    return match[1]


def run_in_repo(command: str) -> str:
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_ci_runs_the_makefile_lint_recipe_after_the_tests() -> None:
    lint = run_in_repo(assignment("lint_command"))
    assert lint == "ruff format --check . && ruff check . && mypy"
    makefile = (ROOT / "Makefile").read_text()
    assert f"lint:\n\t{lint}\n" in makefile
    tests_at = SCRIPT.index('bash -euo pipefail -c "$test_command"')
    assert SCRIPT.index('bash -euo pipefail -c "$lint_command"') > tests_at
    assert SCRIPT.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in SCRIPT


def test_ci_runs_the_readme_test_command() -> None:
    assert run_in_repo(assignment("test_command")) == (
        "pip install -e '.[test]' && python -m pytest"
    )
