"""A ``benchmarks/`` script from a test: run the way docs/benchmarks.md's commands do (from the
checkout, against its ``src``: ``PYTHONPATH=src python benchmarks/NAME.py ARGS``, in a
subprocess), or loaded as a module to test its functions."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<name>.py ARGS``: its exit code, stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=timeout,
        check=False,
    )


def load_benchmark(script: Path, name: str | None = None) -> ModuleType:
    """The benchmark ``script`` (a path) loaded as a module, registered in ``sys.modules`` under
    ``name`` (default ``<stem>_benchmark``): frozen dataclasses resolve their annotations
    through it."""
    name = name or f"{script.stem}_benchmark"
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
