"""The measure commands through the real entry point: import, bench, calibrate, doctor, and the
effect of a measured profile on ``gpuscale estimate``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile

Run = Callable[..., subprocess.CompletedProcess[str]]
LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), proc.stderr
    return lines[0]


def test_import_real_logs_writes_a_loadable_profile(gpuscale: Run, tmp_path: Path) -> None:
    out = tmp_path / "a100.yaml"
    html = tmp_path / "fit.html"
    proc = gpuscale(
        "import",
        "nccl-tests",
        str(LOGS / "a100-2node-allreduce-oci-oke.log"),
        "--nics-per-node",
        "16",
        "-o",
        str(out),
        "--html",
        str(html),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    fit = doc["fits"]["inter"]
    assert fit["points"] == 31 and fit["ops"] == ["all_reduce"]
    assert doc["profile"]["fit"]["nics_per_gpu"] == 2.0
    assert len(doc["comparisons"]) == 31
    written = yaml.safe_load(out.read_text())
    assert written["links"]["inter"]["bandwidth_gb_per_s"] == pytest.approx(
        fit["bandwidth_gb_per_s"], rel=1e-3
    )
    profile = load_profile(str(out))
    assert profile.links["inter"].latency_us == pytest.approx(fit["latency_us"], rel=1e-3)
    assert "plotly" in html.read_text()


def test_import_single_node_log_fills_intra_and_shows_tables(gpuscale: Run) -> None:
    proc = gpuscale("import", "nccl-tests", str(LOGS / "v100-dgx2-5collectives-oldformat.log"))
    assert proc.returncode == 0, proc.stderr
    assert "predicted (cost model + fitted profile) vs measured" in proc.stdout
    assert "intra" in proc.stdout and "wrong values" in proc.stdout


def test_import_aborted_or_garbage_logs_is_one_line(gpuscale: Run, tmp_path: Path) -> None:
    line = _one_error_line(
        gpuscale("import", "nccl-tests", str(LOGS / "h800-2node-alltoall-cuda-failure.log"))
    )
    assert "nothing to calibrate" in line and "illegal memory access" in line
    junk = tmp_path / "junk.log"
    junk.write_text("hello\n# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n")
    assert "junk.log" in _one_error_line(gpuscale("import", "nccl-tests", str(junk)))
    bad = tmp_path / "bad.log"
    text = (
        (LOGS / "a100-2node-allreduce-oci-oke.log")
        .read_text()
        .replace("     float     sum      -1   1542.0", "     float     sum      -1   15x2.0")
    )
    bad.write_text(text)
    assert ":51: '15x2.0' is not a number" in _one_error_line(
        gpuscale("import", "nccl-tests", str(bad))
    )
    missing = _one_error_line(gpuscale("import", "nccl-tests", str(tmp_path / "nope.log")))
    assert "cannot read" in missing


def _step(gpuscale: Run, *extra: str) -> dict:
    proc = gpuscale(
        "estimate",
        "llama3.1-8b",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "16",
        "--dp",
        "16",
        "--mbs",
        "1",
        "--seq",
        "1024",
        "--zero",
        "3",
        *extra,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_estimate_moves_the_way_the_measured_network_says(gpuscale: Run, tmp_path: Path) -> None:
    """The OCI A100 log measured ~24 GB/s per NIC (one NIC per GPU assumed): slower than the
    catalog's NDR400 port after its efficiency, faster than RoCE 100G. The estimate with the
    imported profile must be slower on the first fabric and faster on the second."""
    profile = tmp_path / "oci.yaml"
    proc = gpuscale(
        "import", "nccl-tests", str(LOGS / "a100-2node-allreduce-oci-oke.log"), "-o", str(profile)
    )
    assert proc.returncode == 0, proc.stderr
    measured = load_profile(str(profile)).links["inter"].bandwidth_gb_per_s
    generic = load_profile("generic")
    for fabric in ("ib-ndr400", "roce-100"):
        link = catalog.link(fabric)
        rated = generic.link("inter", link.kind, link.id).bandwidth(link.bandwidth_gb_per_s)
        base = _step(gpuscale, "--inter", fabric)
        with_profile = _step(gpuscale, "--inter", fabric, "--profile", str(profile))
        slower = measured < rated
        assert (with_profile["step_time_s"] > base["step_time_s"]) is slower, fabric
        exposed = "exposed_comm_parts"
        assert (with_profile[exposed]["comm_zero"] > base[exposed]["comm_zero"]) is slower


@pytest.mark.torch
@pytest.mark.distributed
def test_bench_then_calibrate_from_json(gpuscale: Run, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    coll, mm = tmp_path / "coll.json", tmp_path / "mm.json"
    proc = gpuscale(
        "bench",
        "collectives",
        "--backend",
        "gloo",
        "--nproc",
        "2",
        "--ops",
        "all_reduce,all_gather,send_recv",
        # up to 16 MiB: on loopback gloo the transfer time of 1 MiB is within the noise of a
        # shared host, and a sweep that ends there can show no bandwidth term at all
        "--sizes",
        "1K:16M",
        "--factor",
        "4",
        "--iters",
        "4",
        "--warmup",
        "1",
        "--csv",
        str(tmp_path / "c.csv"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    coll.write_text(proc.stdout)
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "gpuscale.bench.collectives" and doc["jitter_cv_limit"] == 0.2
    assert len(doc["samples"]) == 3 * 8 and all("jittery" in s for s in doc["samples"])
    assert (tmp_path / "c.csv").read_text().startswith("op,level,ranks")
    proc = gpuscale("bench", "matmul", "--shapes", "32,64,128", "--iters", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    mm.write_text(proc.stdout)
    assert [s["m"] for s in json.loads(proc.stdout)["samples"]] == [32, 64, 128]

    profile = tmp_path / "measured.yaml"
    proc = gpuscale(
        "calibrate",
        "--from",
        str(coll),
        "--from",
        str(mm),
        "--gpu",
        "a100-sxm-80gb",
        "-o",
        str(profile),
        "--name",
        "cpu-box",
    )
    assert proc.returncode == 0, proc.stderr
    assert "fitted links" in proc.stdout
    # a CPU's numbers stored for a GPU are said on stderr, not only in a table note
    assert "gpuscale: warning: the GEMM curve was measured on a CPU" in proc.stderr
    assert "gpuscale: warning: links fitted from gloo on a CPU" in proc.stderr
    measured_on = yaml.safe_load(profile.read_text())["measured_on"]
    assert measured_on["device"] == "cpu" and measured_on["backend"] == "gloo"
    loaded = load_profile(str(profile))
    assert loaded.name == "cpu-box" and "intra" in loaded.links
    assert "a100-sxm-80gb" in loaded.gemm and "ampere" in loaded.gemm
    # a CPU's matmul rate, read as an A100's, is a tiny efficiency: compute must get slower
    base = _step(gpuscale)
    slow = _step(gpuscale, "--profile", str(profile))
    assert slow["breakdown"]["compute"] > 10 * base["breakdown"]["compute"]


def test_bench_bad_input_is_one_line(gpuscale: Run) -> None:
    assert "--sizes" in _one_error_line(gpuscale("bench", "collectives", "--sizes", "8:x"))
    # caught before the allocator (was a 35-line RuntimeError) and before spawning (was exit 1)
    assert "needs 12 TB" in _one_error_line(
        gpuscale("bench", "matmul", "--shapes", "1000000", "--iters", "1", "--warmup", "0")
    )
    assert "does not divide the 2 ranks" in _one_error_line(
        gpuscale("bench", "collectives", "--nproc", "2", "--ranks-per-node", "3")
    )
    assert "cannot write --html" in _one_error_line(
        gpuscale(
            "import",
            "nccl-tests",
            str(LOGS / "h100-2node-allreduce-k8s-mpijob.log"),
            "--html",
            "/proc/x/y.html",
        )
    )
    assert "unknown collective 'allreduse'" in _one_error_line(
        gpuscale("bench", "collectives", "--ops", "allreduse")
    )
    assert "shape" in _one_error_line(gpuscale("bench", "matmul", "--shapes", "8x8"))
    assert "unknown GPU" in _one_error_line(
        gpuscale(
            "calibrate", "--from", str(LOGS / "a100-2node-allreduce-oci-oke.log"), "--gpu", "h100"
        )
    )
    # a calibration without a GEMM run just ignores --gpu; an unknown --base is caught
    assert "unknown profile" in _one_error_line(
        gpuscale(
            "import",
            "nccl-tests",
            str(LOGS / "h100-2node-allreduce-k8s-mpijob.log"),
            "--base",
            "megatronn",
        )
    )


@pytest.mark.torch
@pytest.mark.distributed
def test_doctor_on_a_cpu_machine(gpuscale: Run) -> None:
    pytest.importorskip("torch")
    proc = gpuscale("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    areas = {f["area"]: f for f in doc["findings"]}
    assert areas["torch"]["status"] == "ok"
    assert areas["all-reduce"]["status"] in ("ok", "warn")
    assert "matmul" in areas
    assert doc["facts"]["allreduce"]["ranks"] == 2
    if not doc["facts"].get("gpus"):
        assert areas["gpus"]["status"] == "skip"
    human = gpuscale("doctor", "--no-bench")
    assert human.returncode == 0 and "verdict:" in human.stdout
