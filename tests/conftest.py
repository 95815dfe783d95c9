"""Shared fixtures: paths to shipped test data and the validation set in the repository."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from gpuscale.validation import DATA_DIR as VALIDATION_DATA

# Hypothesis: the test command (and CI) draws the same examples every run, so a green suite on
# one machine is green on a clean checkout; the examples only change with the code. Exploring
# new inputs is a separate, deliberate run: `GPUSCALE_HYPOTHESIS=explore pytest tests/unit`
# (fresh random examples each run; 1000 where a test sets no count of its own). What it finds
# becomes an explicit regression case next to the property.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("GPUSCALE_HYPOTHESIS", "repeatable"))

# Child processes (the several hundred CLI runs and benchmark scripts the tests start) share one
# bytecode cache for the session, in a temporary folder: where PYTHONDONTWRITEBYTECODE is set,
# as in many containers, each would otherwise compile every gpuscale module again (a fifth of a
# short command's run). Nothing is written next to the sources; the folder goes at the end.
_BYTECODE: list[str] = []
_DONT_WRITE: list[str] = []
"""The value of PYTHONDONTWRITEBYTECODE the session found, put back at its end."""


def pytest_configure(config: pytest.Config) -> None:
    dont_write = os.environ.get("PYTHONDONTWRITEBYTECODE")
    if dont_write and not os.environ.get("PYTHONPYCACHEPREFIX"):
        _BYTECODE.append(tempfile.mkdtemp(prefix="gpuscale-test-bytecode-"))
        _DONT_WRITE[:] = [dont_write]
        os.environ["PYTHONPYCACHEPREFIX"] = _BYTECODE[0]
        del os.environ["PYTHONDONTWRITEBYTECODE"]


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _BYTECODE:
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        os.environ["PYTHONDONTWRITEBYTECODE"] = _DONT_WRITE[0] if _DONT_WRITE else "1"
        shutil.rmtree(folder, ignore_errors=True)


ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def validation_data() -> Path:
    """``data/validation``: the published measurements, part of the repository. A clone without
    it is broken, so a missing folder fails the tests instead of skipping them."""
    if not VALIDATION_DATA.is_dir():
        raise FileNotFoundError(
            f"{VALIDATION_DATA} is missing: the validation data is part of the repo"
        )
    return VALIDATION_DATA


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def validation_dir() -> Path:
    return validation_data()
