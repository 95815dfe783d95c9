"""``gpuscale export`` end to end: from estimate/plan --json to files on disk."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ESTIMATE = [
    "estimate", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "64", "--tp", "8", "--pp", "2",
    "--mbs", "1", "--gbs", "256", "--seq", "4096", "--recompute", "selective", "--zero", "1",
    "--json",
]  # fmt: skip


@pytest.fixture(scope="module")
def estimate_doc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale.cli.main", *ESTIMATE],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    path = tmp_path_factory.mktemp("doc") / "estimate.json"
    path.write_text(proc.stdout)
    return path


@pytest.mark.parametrize(
    ("target", "names"),
    [
        ("megatron", ["launch_megatron.sh"]),
        ("torchtitan", ["launch_torchtitan.sh"]),
        ("slurm", ["train.sbatch"]),
        ("kueue", ["job.yaml"]),
        ("volcano", ["volcano-job.yaml"]),
    ],
)
def test_writes_the_target_files(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
    estimate_doc: Path,
    tmp_path: Path,
    target: str,
    names: list[str],
) -> None:
    out = tmp_path / "out"
    proc = gpuscale("export", "--to", target, "--from", str(estimate_doc), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["plan"]["tp"] == 8 and doc["plan"]["gbs"] == 256 and doc["seq"] == 4096
    assert sorted(p.name for p in out.iterdir()) == names
    for name in names:
        if name.endswith((".sh", ".sbatch")):
            assert os.stat(out / name).st_mode & stat.S_IXUSR


def test_reads_standard_input_from_plan(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    plan = gpuscale(
        "plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "16", "--top", "1", "--json"
    )
    assert plan.returncode == 0, plan.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscale.cli.main",
            "export",
            "--to",
            "deepspeed",
            "--from",
            "-",
            "--json",
        ],
        input=plan.stdout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    chosen = json.loads(plan.stdout)["plans"][0]["plan"]
    assert json.loads(proc.stdout)["plan"]["dp"] == chosen["dp"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "megatron", "--from", "/no/such.json"], "no such file"),
        (["--to", "megatron", "--from", "/dev/zero"], "device"),
        (["--to", "nope", "--from", "x.json"], "--to"),
        (["--to", "accelerate", "--from", "ESTIMATE"], "megatron or torchtitan"),
        (["--to", "megatron", "--from", "ESTIMATE", "-o", "/no/such/dir"], "does not exist"),
        (["--to", "megatron", "--from", "NOTJSON"], "not JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
    estimate_doc: Path,
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    args = [
        str(estimate_doc) if a == "ESTIMATE" else str(bad) if a == "NOTJSON" else a for a in args
    ]
    proc = gpuscale("export", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (
            ["--to", "torchtitan", "--torchtitan-version", "0.2.x"],
            ["launch_torchtitan.sh", "torchtitan_job.toml"],
        ),
        (
            ["--to", "slurm", "--cluster", "examples/fat-tree-512.yaml"],
            ["topology.conf", "topology.yaml", "train.sbatch"],
        ),
        (
            ["--to", "volcano", "--cluster", "examples/fat-tree-512.yaml"],
            ["hypernodes.yaml", "volcano-job.yaml"],
        ),
    ],
)
def test_version_and_cluster_flags(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
    estimate_doc: Path,
    tmp_path: Path,
    flags: list[str],
    names: list[str],
) -> None:
    root = Path(__file__).resolve().parents[2]
    flags = [str(root / f) if f.startswith("examples/") else f for f in flags]
    out = tmp_path / "out"
    proc = gpuscale("export", *flags, "--from", str(estimate_doc), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == names
    bad = gpuscale("export", *flags[:2], "--from", str(estimate_doc), "--torchtitan-version", "9")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"tp": 2**40}, "the document's plan cannot run: --tp"),
        ({"tp": 128, "pp": 1, "dp": 1, "zero": 0}, "the document's plan cannot run: --tp"),
        ({"tp": 1, "pp": 64, "dp": 1}, "the document's plan cannot run"),
        ({"gpus": -8}, "the document's gpus -8"),
        ({"schema_version": 99}, "schema_version 99"),
    ],
)
def test_an_edited_document_is_checked_like_estimate(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
    estimate_doc: Path,
    tmp_path: Path,
    edit: dict[str, int],
    message: str,
) -> None:
    # An estimate --json edited by hand was exported as is: TP 2^40, TP 128 on 64 heads,
    # PP 64 on 80 layers, a negative GPU count (a fuzz of the CLI, 2026-12-04).
    doc = json.loads(estimate_doc.read_text())
    for key, value in edit.items():
        (doc["plan"] if key in doc["plan"] else doc)[key] = value
    if "gpus" not in edit:  # an edit of the plan alone, its GPU count kept in step
        p = doc["plan"]
        doc["gpus"] = p["tp"] * p["pp"] * p["dp"] * p["cp"]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "job"
    proc = gpuscale("export", "--to", "megatron", "--from", str(path), "-o", str(out))
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_the_priced_recompute_modules_loss_and_gradients_reach_megatron(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    priced = [
        *ESTIMATE[:-1],
        "--framework", "megatron", "--recompute-modules", "core_attn,mlp", "--loss", "te",
        "--grad-reduce-in-bf16", "--json",
    ]  # fmt: skip
    est = gpuscale(*priced)
    assert est.returncode == 0, est.stderr
    doc = tmp_path / "estimate.json"
    doc.write_text(est.stdout)
    out = tmp_path / "out"
    proc = gpuscale("export", "--to", "megatron", "--from", str(doc), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    script = (out / "launch_megatron.sh").read_text()
    for words in (
        "--recompute-modules core_attn mlp",
        "--cross-entropy-fusion-impl te",
        "--grad-reduce-in-bf16",
    ):
        assert words in " ".join(script.split()), words
    refused = gpuscale(
        "export", "--to", "torchtitan", "--from", str(doc), "-o", str(tmp_path / "t")
    )
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no setting for --recompute-modules core_attn,mlp" in lines[0]


def test_offloaded_layers_reach_megatron_and_a_pipeline_refuses_them(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    run = [
        "estimate", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "64", "--tp", "8",
        "--mbs", "1", "--gbs", "64", "--seq", "8192", "--framework", "megatron",
        "--activation-offload-layers", "40",
    ]  # fmt: skip
    est = gpuscale(*run, "--json")
    assert est.returncode == 0, est.stderr
    assert json.loads(est.stdout)["activation_offload_layers"] == 40
    doc = tmp_path / "estimate.json"
    doc.write_text(est.stdout)
    out = tmp_path / "out"
    proc = gpuscale("export", "--to", "megatron", "--from", str(doc), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "--cpu-offloading-num-layers 40" in " ".join(
        (out / "launch_megatron.sh").read_text().split()
    )
    table = gpuscale(*run)
    assert table.returncode == 0 and "offloaded-layers=40" in " ".join(table.stdout.split())
    refused = gpuscale(*run[:-2], "--pp", "2", "--activation-offload-layers", "40")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "runs without pipeline parallelism" in lines[0], refused.stderr
