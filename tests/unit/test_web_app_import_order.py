"""The web page's tests and the web app itself name every module they use: nothing works only
because another module happened to import a submodule of the lazy :mod:`gpuscale.api` first
(importing ``gpuscale.api.page`` binds ``api.page``, which the lazy package does not otherwise
have)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale import api

ROOT = Path(__file__).resolve().parents[2]
WEB = sorted((ROOT / "src" / "gpuscale" / "web").glob("*.py"))
WEB_TESTS = sorted(
    p for p in (ROOT / "tests" / "unit").glob("test_web_app*.py") if p.name != Path(__file__).name
)


def _api_attributes(path: Path) -> set[str]:
    """Every ``api.X`` read in ``path`` where ``api`` is ``from gpuscale import api``."""
    tree = ast.parse(path.read_text())
    bound = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "gpuscale"
        for alias in node.names
        if alias.name == "api"
    }
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in bound
    }


def _api_names_imported(path: Path) -> set[str]:
    """Every name imported with ``from gpuscale.api import X`` in ``path``."""
    return {
        alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "gpuscale.api"
        for alias in node.names
    }


@pytest.mark.parametrize("path", [*WEB, *WEB_TESTS], ids=lambda p: p.name)
def test_only_public_names_are_read_through_the_lazy_package(path: Path) -> None:
    # A public name is resolved by the package on first use, whatever was imported before; a
    # submodule reached as ``api.page`` exists only once something else imported it.
    assert WEB_TESTS and WEB
    stray = _api_attributes(path) - set(api.__all__)
    assert not stray, f"{path.name} reads {sorted(stray)} through gpuscale.api; import them"


@pytest.mark.parametrize("path", WEB, ids=lambda p: p.name)
def test_the_web_app_imports_each_answer_from_its_module(path: Path) -> None:
    """The app names the module of each answer it uses (``gpuscale.api.planning``), so what it
    depends on is in its imports, not in the lazy package's table."""
    assert not _api_names_imported(path), path.name


PASTED = "pasted"  # the web tests that read a model from a pasted config.json


def test_the_web_tests_pass_when_nothing_bound_api_page_before_them() -> None:
    """Run the web tests that parse a pasted config after undoing what importing the web app
    did to ``gpuscale.api`` (the submodule ``page`` bound on it): the tests must import what
    they use themselves."""
    plugin = (
        "import gpuscale.api\n"
        "class Unbind:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        vars(gpuscale.api).pop('page', None)\n"
        "import pytest, sys\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-k', sys.argv[1],"
        " *sys.argv[2:]], plugins=[Unbind()]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", plugin, PASTED, *map(str, WEB_TESTS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " deselected" in proc.stdout
