"""Shared fixtures: paths to shipped test data and the validation set in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.validation import DATA_DIR as VALIDATION_DATA

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
