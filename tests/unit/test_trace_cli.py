"""``gpuscale trace analyze`` through the CLI entry point (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.cli import trace as trace_cli
from gpuscale.cli.main import COMMAND_MODULES, main
from tests.unit.trace_events import cpu_rank, write


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    write(folder / "rank0.json", cpu_rank(comm_us=500), rank=0)
    write(folder / "rank1.json.gz", cpu_rank(comm_us=500), rank=1)
    return folder


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)["trace"]


def test_table_names_the_bottleneck(ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "analyze", str(ranks)]) == 0
    out = capsys.readouterr().out
    assert "Network-bound" in out and "exp.comm" in out and "all_reduce" in out


def test_progress_and_workers_do_not_change_the_result(
    ranks: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "analyze", str(ranks), "--json", "--workers", "1"]) == 0
    plain = _json(capsys)
    monkeypatch.setattr(trace_cli, "PROGRESS_MIN_BYTES", 0)
    assert main(["trace", "analyze", str(ranks), "--json", "--workers", "2"]) == 0
    assert _json(capsys) == plain
    assert [d["id"] for d in plain["diagnoses"]] == ["network_bound"]


def test_html_report(ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "out" / "trace.html"
    assert main(["trace", "analyze", str(ranks), "--html", str(html), "--json"]) == 0
    assert _json(capsys)["html"] == str(html)
    page = html.read_text()
    assert "Per-step timeline" in page and "rank 1: per-step breakdown" in page


@pytest.mark.skipif("estimate" not in COMMAND_MODULES, reason="gpuscale estimate not built")
def test_inline_plan_runs_the_estimate(ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = "model=llama3.1-8b,gpu=h100-sxm,gpus=8,seq=2048"
    assert main(["trace", "analyze", str(ranks), "--predict-with", plan, "--json"]) == 0
    prediction = _json(capsys)["prediction"]
    assert prediction["source"].startswith("estimate llama3.1-8b --gpu h100-sxm --gpus 8")
    assert {f["part"] for f in prediction["findings"]} >= {"exposed_comm", "compute"}


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ("model=llama3.1-8b,gpux=h100-sxm", "unknown estimate option 'gpux'"),
        ("gpu=h100-sxm,gpus=8", "needs model=NAME"),
        ("model=llama3.1-8b,gpu", "is not key=value"),
        ("no-such-file.json", "neither a file nor key=value"),
    ],
)
def test_bad_plans_are_one_line_errors(
    ranks: Path, plan: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "estimate" not in COMMAND_MODULES and "model=" in plan:
        pytest.skip("gpuscale estimate not built")
    assert main(["trace", "analyze", str(ranks), "--predict-with", plan]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: ") and err.count("\n") == 1 and words in err
