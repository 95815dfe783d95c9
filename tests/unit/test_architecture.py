"""Layering rules of DESIGN.md, enforced: imports point down, torch stays optional, and no CLI
command reaches into another command."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import gpuscale

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuscale"

BELOW_API = {
    "errors",
    "specs",
    "catalog",
    "costmodel",
    "planner",
    "validation",
    "cluster",
    "export",
    "measure",
    "runtime",
    "report",
}

# A package may import itself and the packages listed for it, never one above it.
ALLOWED: dict[str, set[str]] = {
    "specs": {"errors"},
    "catalog": {"errors", "specs"},
    "costmodel": {"errors", "specs", "catalog"},
    "planner": {"errors", "specs", "catalog", "costmodel"},
    "validation": {"errors", "specs", "catalog", "costmodel"},
    "cluster": {"errors", "specs", "catalog", "costmodel", "planner"},
    "measure": {"errors", "specs", "catalog", "costmodel"},
    "runtime": {"errors", "specs", "catalog", "costmodel"},
    "export": {"errors", "specs", "catalog", "costmodel"},
    # report renders what the layers below return (rich tables, plotly figures, HTML)
    "report": {"errors", "specs", "catalog", "costmodel", "planner", "measure"},
    "api": BELOW_API,
    # web: the local page over the API and the report layer, beside cli
    "web": {"errors", "specs", "api", "report"},
    # cli: parse, call the API, render (`gpuscale serve` starts web)
    "cli": {"errors", "specs", "catalog", "api", "report", "web"},
}


TORCH_FREE = [
    "gpuscale",
    "gpuscale.specs",
    "gpuscale.catalog",
    "gpuscale.costmodel",
    "gpuscale.planner",
    "gpuscale.report",
    "gpuscale.export",
    "gpuscale.api",
    "gpuscale.cli.main",
]


def _module_name(path: Path) -> list[str]:
    parts = ["gpuscale", *path.relative_to(SRC).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path) -> set[str]:
    """Every gpuscale module ``path`` imports, in every form: ``import gpuscale.a.b``, ``from
    gpuscale.a import b``, ``from gpuscale import a``, ``from . import a``, ``from ..a import b``
    (anywhere in the file, lazy imports in functions included)."""
    tree = ast.parse(path.read_text())
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            # `from gpuscale import catalog`, `from gpuscale.cli import bench`: submodules
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m == "gpuscale" or m.startswith("gpuscale.")}


def _layer(module: str) -> str | None:
    """The layer (top-level package) a module belongs to. ``None`` for the foundation every
    layer may import: the package root (``from gpuscale import SCHEMA_VERSION``) and its
    single-file modules (``gpuscale.errors``), which import no layer themselves."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    name = parts[1]
    if name in gpuscale._API:  # `from gpuscale import estimate` is the API, re-exported
        return "api"
    return name if (SRC / name).is_dir() else None


def test_foundation_modules_import_no_layer() -> None:
    bad = {
        path.name: sorted(_layers(path)) for path in SRC.glob("*.py") if path.name != "__init__.py"
    }
    assert not any(bad.values()), f"root modules must import no layer: {bad}"


def _layers(path: Path) -> set[str]:
    return {layer for m in imported_modules(path) if (layer := _layer(m)) is not None}


def test_every_import_form_is_seen(tmp_path: Path) -> None:
    folder = SRC / "cli"
    probe = folder / "_probe_for_test.py"
    probe.write_text(
        "import gpuscale.costmodel.step\n"
        "from gpuscale import planner\n"
        "from gpuscale.measure import stats\n"
        "from .. import runtime\n"
        "from ..validation import published_runs\n"
        "from . import bench\n"
        "from gpuscale import plan\n"
        "def lazy():\n    from gpuscale.cli import main\n"
    )
    try:
        layers = _layers(probe)
        modules = imported_modules(probe)
    finally:
        probe.unlink()
    assert layers >= {"costmodel", "planner", "measure", "runtime", "validation", "cli", "api"}
    assert {"gpuscale.cli.bench", "gpuscale.cli.main"} <= modules


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str) -> None:
    folder = SRC / package
    assert folder.exists(), f"{package} is missing"
    allowed = ALLOWED[package] | {package}
    bad = {}
    for path in folder.rglob("*.py"):
        name = str(path.relative_to(SRC))
        wrong = _layers(path) - allowed
        if wrong:
            bad[name] = sorted(wrong)
    assert not bad, f"imports against the layering: {bad}"


def _command_modules() -> set[str]:
    from gpuscale.cli.main import COMMAND_MODULES

    return {*COMMAND_MODULES.values(), "gpuscale.cli.main"}


def test_no_cli_module_imports_another_command() -> None:
    commands = _command_modules()
    bad = {}
    for path in (SRC / "cli").rglob("*.py"):
        name = str(path.relative_to(SRC))
        me = ".".join(_module_name(path))
        wrong = (imported_modules(path) & commands) - {me}
        if wrong and me != "gpuscale.cli.main":
            bad[name] = sorted(wrong)
    assert not bad, f"cli modules importing another command: {bad}"


def test_core_works_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        + "".join(f"import {m}\n" for m in TORCH_FREE)
        + "import gpuscale\n"
        + "assert callable(gpuscale.estimate) and callable(gpuscale.plan)\n"
        + "from gpuscale.cli.main import main\n"
        + "raise SystemExit(main(['catalog', 'models', '--json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"models"' in proc.stdout


def test_import_gpuscale_is_cheap() -> None:
    """``import gpuscale`` loads no numpy, click or rich: the API arrives on first use."""
    code = (
        "import sys, gpuscale\n"
        "heavy = {'numpy', 'click', 'rich', 'plotly', 'gpuscale.api'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "gpuscale.fit\n"
        "assert 'gpuscale.api' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
