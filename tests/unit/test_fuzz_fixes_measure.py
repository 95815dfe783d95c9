"""Bad input a fuzz found in the measurement commands: an absurd ``--nics-per-node`` that left an
unloadable profile on disk, an empty ``-o``/``--html`` taken as "no output", a stray blank line
from the byte progress bar off a terminal, and trace times that gave negative step times.

Each is refused as one line (``gpuscale: what is wrong; what is accepted``, exit 2) with no file
written; the CLI runs in process here, through its subprocess entry point in
tests/integration/test_fuzz_fixes_measure_cli.py."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import gpuscale.api.measure as api
from gpuscale.cli import trace as trace_cli
from gpuscale.cli.main import main
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.measure.profile_fit import MAX_NICS_PER_GPU, topology
from gpuscale.measure.trace import analyze
from gpuscale.measure.trace.timeline import MAX_DUR_US, MAX_TS_US, BadEvent, TimelineBuilder
from gpuscale.report.progress import bytes_progress_bar, lazy_progress_bar
from tests.unit.trace_events import cpu_rank, ev, write

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
H100 = str(LOGS / "h100-2node-allreduce-k8s-mpijob.log")
"""Two nodes of 8 H100s: the 'inter' level, ~196 GB/s bus bandwidth at the largest size."""
HUGE = 9007199254740992  # 2**53, what the fuzz passed


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    assert "accepted" in text, text
    return text


def _rejected(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), err
    assert out == ""
    return lines[0]


def _slow_log(path: Path, factor: float = 1e8) -> Path:
    """The H100 log with every time ``factor`` longer: a measured rate of ~2e-6 GB/s, which a
    per-NIC split takes below the 1e-6 GB/s a profile may state."""
    rows = []
    for line in Path(H100).read_text().splitlines():
        parts = line.split()
        if len(parts) == 13 and parts[0].isdigit():
            for i in (5, 9):
                parts[i] = f"{float(parts[i]) * factor:.6g}"
            for i in (6, 7, 10, 11):
                parts[i] = f"{float(parts[i]) / factor:.6g}"
            line = "  " + "  ".join(parts)
        rows.append(line)
    path.write_text("\n".join(rows) + "\n")
    return path


# ------------------------------------------------------------------- 1. import nccl-tests


@pytest.mark.parametrize("gpus_per_node", [8, None])
def test_absurd_nic_count_is_refused_naming_the_flag_and_nothing_is_written(
    tmp_path: Path, gpus_per_node: int | None
) -> None:
    out = tmp_path / "huge.yaml"
    with pytest.raises(InputError) as err:
        api.import_nccl_tests([H100], nics_per_node=HUGE, gpus_per_node=gpus_per_node, output=out)
    text = _one_line(err.value)
    assert err.value.field == "nics_per_node"
    assert text.startswith(f"--nics-per-node {HUGE} is ")
    assert f"accepted: 1 to {8 * MAX_NICS_PER_GPU}" in text
    assert "huge.yaml" not in text  # the flag is at fault, not the output file
    assert not out.exists()


def test_nic_count_bound_is_per_gpu() -> None:
    assert topology(8, None, 8 * MAX_NICS_PER_GPU).nics_per_gpu == MAX_NICS_PER_GPU
    assert topology(None, 4, 4 * MAX_NICS_PER_GPU).nics_per_gpu == MAX_NICS_PER_GPU
    with pytest.raises(InputError, match="for --gpus-per-node 4; accepted: 1 to 32"):
        topology(None, 4, 4 * MAX_NICS_PER_GPU + 1)
    with pytest.raises(InputError, match="for the 8 ranks per node measured"):
        topology(8, None, 8 * MAX_NICS_PER_GPU + 1)
    # Before the logs are read the ranks per node are unknown: no bound yet.
    assert topology(None, None, 8 * MAX_NICS_PER_GPU + 1).nics_per_gpu > MAX_NICS_PER_GPU


def test_densest_nic_count_still_writes_a_loadable_profile(tmp_path: Path) -> None:
    out = tmp_path / "p5.yaml"
    result = api.import_nccl_tests([H100], nics_per_node=32, gpus_per_node=8, output=out)
    assert result.fit.written == out
    assert load_profile(str(out)).links["inter"].bandwidth_gb_per_s == pytest.approx(
        result.fit.calibration.links["inter"].bandwidth_gb_per_s, rel=1e-3
    )


def test_unloadable_fit_is_refused_before_writing_and_blames_the_nic_flag(
    tmp_path: Path,
) -> None:
    slow, out = _slow_log(tmp_path / "slow-allreduce.log"), tmp_path / "slow.yaml"
    with pytest.raises(InputError) as err:
        api.import_nccl_tests([slow], nics_per_node=64, output=out)
    text = _one_line(err.value)
    assert err.value.field == "nics_per_node"
    assert text.startswith("--nics-per-node 64 leaves each NIC too little")
    assert "links.inter.bandwidth_gb_per_s must be a finite number > 0" in text
    assert "slow.yaml" not in text
    assert not out.exists()


def test_unloadable_fit_without_the_flag_names_the_fit_and_writes_nothing(
    tmp_path: Path,
) -> None:
    slow, out = _slow_log(tmp_path / "slow-allreduce.log", 1e9), tmp_path / "slow.yaml"
    with pytest.raises(InputError) as err:
        api.import_nccl_tests([slow], output=out)
    text = _one_line(err.value)
    assert text.startswith("the profile fitted to the measurements: links.inter.bandwidth")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["-o", "--html"])
def test_empty_output_path_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _rejected(capsys, "import", "nccl-tests", H100, flag, "")
    assert "empty path; accepted: a file path to write" in line
    assert list(tmp_path.iterdir()) == []


def test_empty_output_path_is_refused_by_the_api() -> None:
    for kwargs, field in (({"output": ""}, "output"), ({"html": ""}, "html")):
        with pytest.raises(InputError, match="empty path") as err:
            api.import_nccl_tests([H100], **kwargs)  # type: ignore[arg-type]
        assert err.value.field == field
        with pytest.raises(InputError, match="empty path"):
            api.calibrate([H100], **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ 2. progress bars


@pytest.mark.parametrize("bar", [bytes_progress_bar, lazy_progress_bar])
def test_progress_bars_print_nothing_off_a_terminal(bar: Any) -> None:
    stream = io.StringIO()
    console = Console(file=stream)
    assert not console.is_terminal
    with bar("reading traces", console) as update:
        update(1, 2)
        update(2, 2)
    assert stream.getvalue() == ""


def test_large_trace_analysis_leaves_stderr_empty_off_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write(tmp_path / "rank0.json", cpu_rank(), rank=0)
    monkeypatch.setattr(trace_cli, "PROGRESS_MIN_BYTES", 0)  # as if it were >= 64 MiB
    assert main(["trace", "analyze", str(trace), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert json.loads(out)["trace"]["ranks"][0]["steps"] == 10


# ------------------------------------------------------------------------------ 3. traces


def _with_step_at(ts: float) -> list[dict[str, Any]]:
    events = cpu_rank(steps=2)
    for e in events:
        if e["name"] == "ProfilerStep#1":
            e["ts"] = ts
    return events


def _negated() -> list[dict[str, Any]]:
    return [{**e, "ts": -e["ts"]} for e in cpu_rank(steps=2)]


def _renumbered() -> list[dict[str, Any]]:
    """Steps 1 and 2 swapped: step 2 starts before step 1."""
    swap = {"ProfilerStep#1": "ProfilerStep#2", "ProfilerStep#2": "ProfilerStep#1"}
    return [{**e, "name": swap.get(e["name"], e["name"])} for e in cpu_rank(steps=2)]


BAD_TRACES = {
    "step at ts 1e308": (
        lambda: _with_step_at(1e308),
        "event #1 'ProfilerStep#1' has ts 1e+308 us, past 2**53 us",
    ),
    "all timestamps negated": (_negated, "'aten::mm' has a negative ts (-10 us)"),
    "steps out of order": (
        _renumbered,
        "ProfilerStep#2 starts at ts 0 us, before ProfilerStep#1 at ts 1130 us",
    ),
    "kernel longer than a day": (
        lambda: [*cpu_rank(steps=2), ev("aten::mm", 5, 2 * MAX_DUR_US)],
        "'aten::mm' lasts 48 hours",
    ),
    "negative duration": (
        lambda: [*cpu_rank(steps=2), ev("aten::mm", 5, -3)],
        "'aten::mm' has a negative dur (-3 us)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
@pytest.mark.parametrize("workers", [1, 2])
def test_impossible_trace_times_are_refused_naming_the_event(
    tmp_path: Path, case: str, workers: int
) -> None:
    events, needle = BAD_TRACES[case]
    bad = write(tmp_path / "rank0.json", events(), rank=0)
    good = write(tmp_path / "rank1.json", cpu_rank(steps=2), rank=1)
    with pytest.raises(InputError) as err:
        analyze([bad, good], workers=workers)
    text = _one_line(err.value)
    assert text.startswith(f"{bad}: ")
    assert needle in text, text


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_cli_refuses_impossible_trace_times_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    events, needle = BAD_TRACES[case]
    trace = write(tmp_path / "rank0.json", events(), rank=0)
    html = tmp_path / "report.html"
    line = _rejected(capsys, "trace", "analyze", str(trace), "--json", "--html", str(html))
    assert needle in line
    assert not html.exists()


@pytest.mark.parametrize(
    ("ts", "dur", "needle"),
    [
        (math.inf, 1.0, "has ts inf, not a finite number"),
        (math.nan, 1.0, "has ts nan, not a finite number"),
        (1.0, math.inf, "has dur inf, not a finite number"),
        (1.0, math.nan, "has dur nan, not a finite number"),
        (MAX_TS_US * 2, 1.0, "past 2**53 us"),
    ],
)
def test_non_finite_times_are_refused(ts: float, dur: float, needle: str) -> None:
    builder = TimelineBuilder()
    with pytest.raises(BadEvent, match=needle.replace("*", r"\*")) as err:
        builder.add(ev("aten::mm", ts, dur))
    _one_line(err.value)


def test_begin_end_pair_that_ends_before_it_begins_is_refused() -> None:
    builder = TimelineBuilder()
    builder.add({"ph": "B", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 50})
    with pytest.raises(BadEvent, match="ends at ts 10 us, before it begins at ts 50 us"):
        builder.add({"ph": "E", "pid": 1, "tid": 1, "ts": 10})


def test_impossible_times_on_events_the_analysis_ignores_are_not_fatal(tmp_path: Path) -> None:
    """A flow arrow or Python frame cannot move a step: the trace is still read."""
    stray = [
        ev("train.py(12): forward", -5, -1, cat="python_function"),
        {"ph": "X", "name": "flow", "cat": "ac2g", "ts": 1e308, "dur": 1},
    ]
    report = analyze([write(tmp_path / "r.json", [*cpu_rank(steps=2), *stray])])
    assert report.ranks[0].breakdown.step_s.tolist() == pytest.approx([0.00113, 0.00113])


def test_the_largest_accepted_times_still_give_sane_steps() -> None:
    builder = TimelineBuilder()
    start = MAX_TS_US - 2 * MAX_DUR_US
    builder.add(ev("ProfilerStep#1", start, MAX_DUR_US, cat="user_annotation"))
    builder.add(ev("aten::mm", start, 1000.0))
    windows = builder.build().windows
    assert (windows.ends - windows.starts).tolist() == pytest.approx([MAX_DUR_US * 1e-6])
