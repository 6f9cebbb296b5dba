"""The import layers (pyproject.toml, [tool.importlinter]) hold for the code as it is, and the
contracts do fail on what they forbid: a service importing a task module (a circle) or a view."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("toolscope", "api", "dashboard", "workers")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=120)


def test_the_code_keeps_its_import_layers():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("toolscope/telemetry/services/ingest.py", "from workers import tasks", "Entry points over the domain"),
    ("toolscope/policies/services/simulation.py", "from dashboard.views import sessions", "Services import no views"),
    ("dashboard/selectors/common.py", "import api.views.read", "Entry points over the domain"),
])
def test_a_forbidden_import_breaks_a_contract(tmp_path, module, line, broken):
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    path.write_text(f"{line}  # noqa\n{path.read_text()}")
    result = lint(tmp_path)
    assert result.returncode != 0 and f"{broken}" in result.stdout and "BROKEN" in result.stdout, result.stdout
