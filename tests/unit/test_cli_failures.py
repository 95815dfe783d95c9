"""A run that fails for a reason other than the user's input (a rank crashed or timed out) is one
line and exit code 1 from every command, mapped once in ``gpuscale.cli.main``."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.api.measure import RankFailure
from gpuscale.cli import bench
from gpuscale.cli.main import main
from gpuscale.errors import RunFailure


def test_a_failed_rank_is_one_line_and_exit_code_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crash(**kwargs: Any) -> None:
        raise RankFailure("rank 1 exited with code 139 (SIGSEGV)\n  during all_reduce", 1)

    monkeypatch.setattr(bench, "bench_collectives", crash)
    assert issubclass(RankFailure, RunFailure)
    assert main(["bench", "collectives", "--json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "gpuscale: rank 1 exited with code 139 (SIGSEGV) during all_reduce\n"
