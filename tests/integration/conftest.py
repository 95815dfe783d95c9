"""Integration tests run the real ``gpuscale`` entry point in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuscale.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def gpuscale() -> Callable[..., subprocess.CompletedProcess[str]]:
    return _run
