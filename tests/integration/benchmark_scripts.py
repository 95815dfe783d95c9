"""Run a ``benchmarks/`` script the way docs/benchmarks.md's commands do: from the checkout,
against its ``src`` (``PYTHONPATH=src python benchmarks/NAME.py ARGS``), in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
