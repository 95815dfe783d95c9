"""``gpuscale cluster`` through the real entry point."""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Run = Callable[..., subprocess.CompletedProcess[str]]


def test_trace_then_simulate_all_policies(gpuscale: Run, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    made = gpuscale(
        "cluster",
        "trace",
        "--synthetic",
        "philly",
        "--jobs",
        "400",
        "--seed",
        "2",
        "--load-gpus",
        "60",
        "-o",
        str(trace),
    )
    assert made.returncode == 0, made.stderr
    out = tmp_path / "m.csv"
    proc = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--policy",
        "all",
        "--json",
        "-o",
        str(out),
        "--node-mtbf-h",
        "100",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["policy"] for p in doc["policies"]] == ["first-fit", "random", "topology"]
    for p in doc["policies"]:
        for key in (
            "avg_jct_s",
            "p95_jct_s",
            "makespan_s",
            "gpu_utilization",
            "jobs_submitted",
            "jobs_completed",
            "jobs_failed",
        ):
            assert key in p
        assert p["jobs_submitted"] == 400
        assert p["jobs_completed"] + p["jobs_failed"] == 400
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3


def test_table_output(gpuscale: Run, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,model\na,0,8,100,\nb,5,16,100,llama3.1-8b\n")
    adaptive = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--policy",
        "topology",
        "--degrade",
        "spine:0:0.1:0:1000",
        "--adaptive",
        "--json",
    )
    assert adaptive.returncode == 0, adaptive.stderr
    assert "replans" in json.loads(adaptive.stdout)["policies"][0]
    proc = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--policy",
        "topology",
        "--order",
        "sjf",
    )
    assert proc.returncode == 0, proc.stderr
    assert "topology" in proc.stdout


def test_bad_input_is_one_line(gpuscale: Run, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,gpus,duration_s\n0,x,5\n")
    bad_trace = gpuscale(
        "cluster", "simulate", "--cluster", str(EXAMPLES / "lab-64.yaml"), "--trace", str(trace)
    )
    bad_cluster = gpuscale(
        "cluster", "simulate", "--cluster", str(tmp_path / "no.yaml"), "--trace", str(trace)
    )
    bad_policy = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--policy",
        "best",
    )
    bad_degrade = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--degrade",
        "core:1",
    )
    for proc in (bad_trace, bad_cluster, bad_policy, bad_degrade):
        assert proc.returncode == 2
        assert proc.stderr.startswith("gpuscale:")
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


def test_export_formats(gpuscale: Run, tmp_path: Path) -> None:
    out = tmp_path / "topology.conf"
    proc = gpuscale(
        "cluster",
        "export",
        "--cluster",
        str(EXAMPLES / "fat-tree-512.yaml"),
        "--format",
        "slurm-conf",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().count("SwitchName=leaf") == 8
    proc = gpuscale(
        "cluster",
        "export",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--format",
        "volcano",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["format"] == "volcano" and "HyperNode" in doc["text"]
    bad = gpuscale(
        "cluster", "export", "--cluster", str(EXAMPLES / "lab-64.yaml"), "--format", "pbs"
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_adapt(gpuscale: Run) -> None:
    proc = gpuscale(
        "cluster",
        "adapt",
        "gpt3-13b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--event",
        "inter",
        "--factor",
        "0.05",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["tokens_adaptive"] >= doc["tokens_static"]
    assert doc["static"][-1]["end_s"] == doc["horizon_s"]
    bad = gpuscale(
        "cluster",
        "adapt",
        "gpt3-13b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--event",
        "inter",
        "--factor",
        "2",
    )
    assert bad.returncode == 2 and bad.stderr.startswith("gpuscale:")


def test_unknown_model_in_trace(gpuscale: Run, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,model\na,0,8,100,llama9\n")
    proc = gpuscale(
        "cluster", "simulate", "--cluster", str(EXAMPLES / "lab-64.yaml"), "--trace", str(trace)
    )
    assert proc.returncode == 2
    assert "unknown model 'llama9'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_simulate_with_the_tiresias_order(gpuscale: Run, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submit_s,gpus,duration_s\nlong,0,64,360000\nshort,7200,64,600\nsmall,7300,8,60\n"
    )
    proc = gpuscale(
        "cluster",
        "simulate",
        "--cluster",
        str(EXAMPLES / "lab-64.yaml"),
        "--trace",
        str(trace),
        "--policy",
        "topology",
        "--order",
        "las",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["policies"]
    assert run["order"] == "las"
    assert (run["jobs_completed"], run["jobs_failed"]) == (3, 0)
    # the long job, demoted after 16 GPU-hours, yields to the two new ones: a short wait for them
    assert run["avg_queue_s"] < 3600
