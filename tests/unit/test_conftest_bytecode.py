"""tests/conftest.py's session bytecode cache: the environment it changes for child processes
comes back as it was, and nothing changes where bytecode writing was never turned off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import conftest


def _round_trip(monkeypatch: pytest.MonkeyPatch) -> tuple[str | None, dict[str, str | None]]:
    # The session's own folder (if any) stays with the session: this run uses its own list.
    monkeypatch.setattr(conftest, "_BYTECODE", [])
    monkeypatch.setattr(conftest, "_DONT_WRITE", [])
    conftest.pytest_configure(None)  # type: ignore[arg-type]
    during = os.environ.get("PYTHONPYCACHEPREFIX")
    folder = list(conftest._BYTECODE)
    conftest.pytest_unconfigure(None)  # type: ignore[arg-type]
    assert all(not Path(f).exists() for f in folder)
    after = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    return during, after


def test_the_bytecode_environment_is_restored_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "yes")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    during, after = _round_trip(monkeypatch)
    assert during is not None
    assert after == {"PYTHONDONTWRITEBYTECODE": "yes", "PYTHONPYCACHEPREFIX": None}


def test_nothing_changes_where_bytecode_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    during, after = _round_trip(monkeypatch)
    assert during is None
    assert after == {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": None}
