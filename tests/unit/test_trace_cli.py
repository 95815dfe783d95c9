"""``gpuscale trace analyze`` through the CLI entry point (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuscale.api
import gpuscale.api.measure
from gpuscale.cli import trace as trace_cli
from gpuscale.cli.main import main
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
    html = tmp_path / "trace.html"
    assert main(["trace", "analyze", str(ranks), "--html", str(html), "--json"]) == 0
    assert _json(capsys)["html"] == str(html)
    page = html.read_text()
    assert "Per-step timeline" in page and "rank 1: per-step breakdown" in page


def test_inline_plan_runs_the_estimate(ranks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = "model=llama3.1-8b,gpu=h100-sxm,gpus=8,seq=2048"
    assert main(["trace", "analyze", str(ranks), "--predict-with", plan, "--json"]) == 0
    prediction = _json(capsys)["prediction"]
    assert prediction["source"].startswith("estimate llama3.1-8b gpu=h100-sxm gpus=8")
    assert {f["part"] for f in prediction["findings"]} >= {"exposed_comm", "compute"}


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ("model=llama3.1-8b,gpux=h100-sxm", "unknown key 'gpux'; did you mean gpu, gpus?"),
        (
            "model=llama3.1-8b,gpu=h100-sxm,gpus=abc",
            "--predict-with gpus='abc': not an integer; accepted: an integer",
        ),
        ("model=llama3.1-8b", "the plan lacks gpu= (gpuscale.estimate needs gpu)"),
        (
            "model=llama3.1-8b,gpu=h100-sxm,gpus=8,gpus=16",
            "gpus is given twice (gpus=8 and gpus=16); give each key once",
        ),
        (
            "model=llama3.1-8b,gpu=h100-sxm,gpus=8,zero=9",
            "--predict-with: ",
        ),
        (
            "model=llama3.1-8b,gpu=h100-sxm,gpus=8,offload-optimizer=maybe",
            "offload-optimizer='maybe' is not true or false",
        ),
        ("model=llama3.1-8b,gpu=h100,gpus=8", "--predict-with: unknown GPU 'h100'"),
        ("gpu=h100-sxm,gpus=8", "needs model=NAME"),
        ("model=llama3.1-8b,gpu", "is not key=value"),
        ("no-such-file.json", "neither a file nor key=value"),
    ],
)
def test_bad_plans_are_one_line_errors(
    ranks: Path, plan: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "analyze", str(ranks), "--predict-with", plan]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: ") and err.count("\n") == 1 and words in err
    assert "gpuscale estimate:" not in err and "--help" not in err


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["model", "gpu", "gpus", "tp", "zero", "recompute", "seq", "gpux"]),
            st.sampled_from(["", "llama3.1-8b", "h100-sxm", "8", "0", "-1", "abc", "full", "2"]),
        ),
        max_size=5,
    )
)
def test_any_inline_plan_is_a_prediction_or_one_line(
    ranks: Path, capsys: pytest.CaptureFixture[str], pairs: list[tuple[str, str]]
) -> None:
    plan = ",".join(f"{k}={v}" for k, v in pairs) or "="
    code = main(["trace", "analyze", str(ranks), "--predict-with", plan, "--json"])
    out, err = capsys.readouterr()
    if code == 0:
        assert "prediction" in json.loads(out)["trace"]
    else:
        assert code == 2 and err.startswith("gpuscale: --predict-with") and err.count("\n") == 1


@pytest.mark.parametrize("where", ["/proc/x/y.html", "{tmp}/afile/y.html"])
def test_unwritable_html_fails_before_any_trace_is_read(
    ranks: Path,
    tmp_path: Path,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A folder that is a regular file: unwritable for every user, root included (a chmod-ed
    # folder is not, so the test would have to skip where CI runs as root).
    (tmp_path / "afile").write_text("not a folder")
    path = where.format(tmp=tmp_path)

    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the traces were read before --html was checked")

    monkeypatch.setattr(gpuscale.api.measure, "analyze", must_not_run)
    assert main(["trace", "analyze", str(ranks), "--html", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("gpuscale: ") and f"--html '{path}'" in err
    assert err.rstrip().endswith(
        ("; accepted: a file path in a writable folder", "does not exist; create it first")
    )


def test_html_probe_leaves_nothing_behind_when_the_analysis_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    html = tmp_path / "new" / "dir" / "report.html"
    assert main(["trace", "analyze", str(bad), "--html", str(html)]) == 2
    assert not (tmp_path / "new").exists()


def test_cpu_trace_against_a_gpu_prediction_warns_on_stderr(
    ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "gpu": "h100-sxm",
                "step_time_s": 1.0,
                "breakdown": {
                    "compute": 0.8,
                    "exposed_comm": 0.1,
                    "bubble": 0.0,
                    "optimizer": 0.1,
                    "other": 0.0,
                },
            }
        )
    )
    assert main(["trace", "analyze", str(ranks), "--predict-with", str(plan)]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "warning: the trace is a CPU timeline" in err
    assert "x the predicted" not in out and "share of step time" in out
