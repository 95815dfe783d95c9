"""Shared fixtures: paths to shipped test data and the validation set beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def shared_validation() -> Path | None:
    """``../shared/validation`` next to the checkout (present in development and CI)."""
    candidate = ROOT.parent / "shared" / "validation"
    return candidate if candidate.is_dir() else None


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def validation_dir() -> Path:
    found = shared_validation()
    if found is None:
        pytest.skip("../shared/validation is not beside this checkout")
    return found
