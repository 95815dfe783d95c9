"""The measurement API (gpuscale.api.measure): typed results whose to_dict() is the command's
--json, the same numbers as the CLI, and the torch-free parts usable with torch blocked."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import gpuscale.api as gs
from gpuscale.api.result import Result
from gpuscale.cli.main import main
from gpuscale.errors import InputError
from tests.unit.trace_events import cpu_rank, write

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
A100 = LOGS / "a100-2node-allreduce-oci-oke.log"
V100 = LOGS / "v100-dgx2-5collectives-oldformat.log"


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _without_dates(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["profile"].get("measured_on", {}).pop("date", None)
    return doc


def test_import_nccl_tests_is_the_commands_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = gs.import_nccl_tests([A100], name="oci")
    assert isinstance(result, Result)
    cli = _cli_json(capsys, "import", "nccl-tests", str(A100), "--name", "oci")
    assert _without_dates(result.to_dict()) == _without_dates(cli)
    assert next(iter(result.to_dict())) == "schema_version"
    assert result.to_dict()["fits"]["inter"]["bandwidth_gb_per_s"] > 0
    assert len(result.figures()) == 1  # collectives only: no GEMM measured
    with pytest.raises(FrozenInstanceError):
        result.title = "x"  # type: ignore[misc]


def test_calibrate_from_is_the_commands_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "cal.yaml"
    result = gs.calibrate([V100], output=out, html=tmp_path / "cal.html")
    assert result.fit.written == out and out.exists() and (tmp_path / "cal.html").exists()
    cli = _cli_json(capsys, "calibrate", "--from", str(V100), "-o", str(out))
    assert _without_dates(result.to_dict()) == _without_dates(cli)


def test_bad_input_names_the_argument(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        gs.import_nccl_tests([A100], output=tmp_path / "missing" / "x.yaml")
    assert exc.value.field == "output"
    with pytest.raises(InputError) as exc:
        gs.calibrate([A100], name=" ")
    assert exc.value.field == "name"
    with pytest.raises(InputError) as exc:
        gs.calibrate([])
    assert exc.value.field == "sources"


def test_analyze_trace_is_the_commands_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        write(folder / f"rank{rank}.json", cpu_rank(comm_us=500), rank=rank)
    result = gs.analyze_trace([folder], workers=1)
    cli = _cli_json(capsys, "trace", "analyze", str(folder), "--workers", "1")
    assert result.to_dict() == cli
    assert [r["rank"] for r in result.to_dict()["trace"]["ranks"]] == [0, 1]
    assert len(result.figures()) == 3  # shares, then one timeline per rank


_BLOCKED = """
import sys
sys.modules["torch"] = None
from pathlib import Path
import gpuscale.api as gs
import gpuscale.measure.bench_setup, gpuscale.measure.calibrate, gpuscale.measure.doctor
import gpuscale.measure.launcher, gpuscale.measure.bench_run, gpuscale.measure.stats
from gpuscale.measure import nccl_tests, profile_fit, sources
from gpuscale.measure.trace import analyze
from tests.unit.trace_events import cpu_rank, write

log, folder = Path(sys.argv[1]), Path(sys.argv[2])
runs = nccl_tests.parse_files([log])
assert runs and runs[0].samples()
fit = gs.import_nccl_tests([log])
assert fit.to_dict()["fits"]
folder.mkdir()
for rank in (0, 1):
    write(folder / f"rank{rank}.json", cpu_rank(comm_us=500), rank=rank)
report = analyze([folder], workers=2)
assert len(report.ranks) == 2
assert gs.analyze_trace([folder], workers=1).to_dict()["trace"]["ranks"]
assert "torch" not in {m.split(".")[0] for m in sys.modules if sys.modules[m] is not None}
print("ok")
"""


def test_trace_analyzer_and_nccl_importer_work_with_torch_blocked(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKED, str(A100), str(tmp_path / "traces")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_json_keys_are_pinned(tmp_path: Path) -> None:
    """The machine-readable contract of the measurement commands: the top-level keys scripts
    read (add keys freely; renaming or dropping one is a breaking change)."""
    cal = gs.import_nccl_tests([A100]).to_dict()
    assert list(cal) == [
        "schema_version",
        "profile",
        "written",
        "fits",
        "gemm",
        "comparisons",
        "notes",
        "warnings",
    ]
    assert set(cal["fits"]["inter"]) >= {
        "level",
        "latency_us",
        "bandwidth_gb_per_s",
        "rms_rel_residual",
        "points",
    }
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank in (0, 1):
        write(folder / f"rank{rank}.json", cpu_rank(comm_us=500), rank=rank)
    trace = gs.analyze_trace([folder], workers=1).to_dict()
    assert list(trace) == ["schema_version", "trace"]
    assert {"ranks", "collectives", "skew", "diagnoses", "warnings"} <= set(trace["trace"])
    doctor = gs.doctor(bench=False).to_dict()
    assert list(doctor) == ["schema_version", "verdict", "facts", "findings", "next_steps"]
