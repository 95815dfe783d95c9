"""Hold the cost model against published, measured runs (``data/validation`` in the repository)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "validation"
"""The published measurements, copied into the repository with their sources and licences
(``data/validation/README.md``). Present in a clone; not shipped in the wheel, because only the
benchmarks and the tests read it."""
