"""The fuzz's measurement-command cases through the real entry point (a subprocess): one line on
stderr, exit 2, no file written; and nothing at all on stderr from a large trace's progress bar
when stderr is not a terminal. The in-process cases are tests/unit/test_fuzz_fixes_measure.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscale.cli.trace import PROGRESS_MIN_BYTES
from tests.unit.trace_events import cpu_rank, trace_doc, write

Run = Callable[..., subprocess.CompletedProcess[str]]
LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
H100 = str(LOGS / "h100-2node-allreduce-k8s-mpijob.log")


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    return lines[0]


def test_absurd_nic_count_names_the_flag_and_writes_no_profile(
    gpuscale: Run, tmp_path: Path
) -> None:
    out = tmp_path / "huge.yaml"
    line = _one_error_line(
        gpuscale(
            "import",
            "nccl-tests",
            H100,
            "--nics-per-node",
            "9007199254740992",
            "--gpus-per-node",
            "8",
            "-o",
            str(out),
        )
    )
    assert line.startswith("gpuscale: --nics-per-node 9007199254740992 is ")
    assert "accepted: 1 to 64" in line
    assert not out.exists()


def test_empty_output_path_is_refused(gpuscale: Run) -> None:
    line = _one_error_line(gpuscale("import", "nccl-tests", H100, "-o", ""))
    assert "empty path; accepted: a file path to write" in line


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ("step at 1e308", "'ProfilerStep#1' has ts 1e+308 us, past 2**53 us"),
        ("negated", "has a negative ts"),
    ],
)
def test_impossible_trace_times_exit_2_in_one_line(
    gpuscale: Run, tmp_path: Path, change: str, needle: str
) -> None:
    events = cpu_rank(steps=2)
    for e in events:
        if change == "negated":
            e["ts"] = -e["ts"]
        elif e["name"] == "ProfilerStep#1":
            e["ts"] = 1e308
    trace = write(tmp_path / "rank0.json", events, rank=0)
    line = _one_error_line(gpuscale("trace", "analyze", str(trace), "--json"))
    assert line.startswith(f"gpuscale: {trace}: event #")
    assert needle in line


def test_large_trace_prints_nothing_on_a_stderr_that_is_not_a_terminal(
    gpuscale: Run, tmp_path: Path
) -> None:
    # Padding with blanks puts the file past the progress bar's threshold and costs ijson
    # nothing to skip (a 64 MiB string took 15 s).
    text = json.dumps(trace_doc(cpu_rank(steps=2), rank=0))
    trace = tmp_path / "rank0.json"
    trace.write_text(text[:-1] + " " * PROGRESS_MIN_BYTES + "}")
    try:
        proc = gpuscale("trace", "analyze", str(trace), "--json")
    finally:
        trace.unlink()
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert json.loads(proc.stdout)["trace"]["ranks"][0]["steps"] == 2
