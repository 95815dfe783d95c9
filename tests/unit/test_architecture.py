"""Layering rules of DESIGN.md, enforced: imports point down, torch stays optional."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuscale"

# A package may import itself and the packages listed for it, never one above it.
ALLOWED: dict[str, set[str]] = {
    "specs": {"errors"},
    "catalog": {"errors", "specs"},
    "costmodel": {"errors", "specs", "catalog"},
    "planner": {"errors", "specs", "catalog", "costmodel"},
    "validation": {"errors", "specs", "catalog", "costmodel"},
    "measure": {"errors", "specs", "catalog", "costmodel"},
    "runtime": {"errors", "specs", "catalog", "costmodel"},
    "report": {"errors", "specs"},
}

TORCH_FREE = [
    "gpuscale.specs",
    "gpuscale.catalog",
    "gpuscale.costmodel",
    "gpuscale.planner",
    "gpuscale.report",
    "gpuscale.cli.main",
]


def _gpuscale_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "gpuscale" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str) -> None:
    folder = SRC / package
    if not folder.exists():
        pytest.skip(f"{package} not present")
    allowed = ALLOWED[package] | {package}
    bad = {}
    for path in folder.rglob("*.py"):
        wrong = _gpuscale_imports(path) - allowed - {"__init__", "files"}
        # the package root module (__version__, SCHEMA_VERSION) is importable from anywhere,
        # and so is gpuscale.files (the rule for user-named files; standard library only)
        if wrong:
            bad[str(path.relative_to(SRC))] = sorted(wrong)
    assert not bad, f"imports against the layering: {bad}"


def test_core_works_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        + "".join(f"import {m}\n" for m in TORCH_FREE)
        + "from gpuscale.cli.main import main\n"
        + "raise SystemExit(main(['catalog', 'models', '--json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"models"' in proc.stdout
