"""What keeps a command's start cheap (every integration test pays it in a subprocess): the API
loads an answer's module on first use, the flags load no simulator or benchmark, and the files
gpuscale ships are parsed by libyaml into the same objects the pure-Python parser builds."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import gpuscale
from gpuscale import api, shipped_yaml

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuscale"


@pytest.mark.parametrize("name", api.__all__)
def test_every_api_name_is_its_modules_object(name: str) -> None:
    value = getattr(api, name)
    module = api._LAZY.get(name)
    if module is not None:
        assert value is getattr(sys.modules[f"gpuscale.api.{module}"], name)
    assert name in dir(api)


def test_a_submodule_never_hides_the_function_of_its_name() -> None:
    # Importing the submodule binds it on its package, unless the package keeps the function.
    importlib.import_module("gpuscale.api.calibrate_run")

    assert callable(api.calibrate_run) and api.calibrate_run.__name__ == "calibrate_run"
    assert gpuscale.calibrate_run is api.calibrate_run
    with pytest.raises(AttributeError, match="no_such_answer"):
        _ = api.no_such_answer


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_a_command_loads_only_what_it_answers() -> None:
    """``gpuscale catalog`` and ``gpuscale estimate`` (with every shared flag built) load no
    cluster simulator, trace analysis or benchmark code, nor the serving search."""
    heavy = {
        "gpuscale.api.cluster",
        "gpuscale.cluster.simulate",
        "gpuscale.cluster.placement",
        "gpuscale.api.measure",
        "gpuscale.measure.trace",
        "gpuscale.measure.collectives_bench",
        "gpuscale.api.fitting",
        "gpuscale.api.advise",
    }
    for code in (
        "from gpuscale.cli.main import main\nmain(['catalog', 'models', '--json'])",
        "import gpuscale.cli.estimate",
    ):
        loaded = _loaded_after(code)
        assert not heavy & loaded, sorted(heavy & loaded)
    assert "gpuscale.planner.serving.search" not in _loaded_after("import gpuscale.cli.estimate")


def test_shipped_yaml_parses_as_safe_load_does() -> None:
    shipped = sorted(SRC.rglob("*.yaml"))
    assert len(shipped) >= 20
    for path in shipped:
        text = path.read_text()
        assert shipped_yaml.load(text) == yaml.safe_load(text), path.name


def test_shipped_yaml_uses_libyaml_where_pyyaml_has_it() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert shipped_yaml.LOADER is expected
