"""Bad input to the measurement commands (bench, calibrate, import nccl-tests, doctor): one line
``gpuscale: what is wrong; what is accepted``, exit 2, nothing on stdout, and no work started.

The CLI runs in-process (``gpuscale.cli.main.main``) so torch is imported once for the whole
table; tests/integration/test_measure_cli.py covers the subprocess entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cli.main import main
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.measure.calibrate import calibrate, fit_level, profile_document, write_profile
from gpuscale.measure.collectives_bench import (
    CollectiveConfig,
    actual_size,
    parse_sizes,
    whole_elements,
)
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.matmul_bench import check_fits, parse_shapes
from gpuscale.measure.nccl_tests import parse_files
from gpuscale.measure.results import CollectiveRun, GemmRun, GemmSample
from gpuscale.measure.sources import Measurements

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
H100 = str(LOGS / "h100-2node-allreduce-k8s-mpijob.log")
A100 = str(LOGS / "a100-2node-allreduce-oci-oke.log")


def _rejected(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), err
    assert ";" in lines[0], lines[0]  # what is wrong; what is accepted
    assert out == "", "nothing may be printed before an input error"
    return lines[0]


CASES = [
    # B3/J3: zero and empty values are errors, not "use the default"
    (("bench", "collectives", "--nproc", "0"), "--nproc must be >= 2"),
    (("bench", "collectives", "--sizes", ""), "--sizes '': empty"),
    (("bench", "collectives", "--sizes", "1K,,2K"), "empty item"),
    (("bench", "collectives", "--ops", "all_reduce,,broadcast"), "--ops"),  # J6
    (("bench", "collectives", "--ops", ""), "empty item"),
    (("bench", "matmul", "--shapes", ""), "--shapes is empty"),
    (("bench", "matmul", "--shapes", "64,,128"), "empty item"),
    # J2: checked before any rank is spawned, exit 2 (was a rank failure, exit 1)
    (("bench", "collectives", "--nproc", "2", "--ranks-per-node", "3"), "does not divide"),
    (("bench", "collectives", "--ranks-per-node", "0"), "--ranks-per-node must be >= 1"),
    # B6: non-finite floats
    (("bench", "collectives", "--factor", "inf"), "--factor must be a finite number"),
    (("bench", "collectives", "--timeout", "inf"), "--timeout must be a finite number"),
    (("doctor", "--timeout", "inf"), "--timeout must be a finite number"),
    (("doctor", "--timeout", "0"), "--timeout must be a finite number"),
    # A7: a shape larger than memory is refused before allocating it
    (("bench", "matmul", "--shapes", "1000000", "--iters", "1"), "shape 1000000 needs 12 TB"),
    # J5: tf32 is a CUDA mode
    (("bench", "matmul", "--shapes", "64", "--dtype", "tf32", "--device", "cpu"), "tf32"),
    # L4: output paths before the work
    (("bench", "collectives", "--csv", "/proc/nope/x.csv"), "does not exist; create it first"),
    (("bench", "matmul", "--csv", "/"), "is a directory"),
    # A6 + L4 for calibrate and import: --html / -o to a directory or an impossible path
    (("import", "nccl-tests", H100, "--html", "/proc/x/y.html"), "does not exist; create it first"),
    (("import", "nccl-tests", H100, "--html", "/"), "--html '/' is a directory"),
    (("import", "nccl-tests", H100, "-o", "/"), "-o '/' is a directory"),
    (("calibrate", "--from", H100, "--html", "/proc/x/y.html"), "does not exist; create it first"),
    (("calibrate", "--from", H100, "--html", "/"), "is a directory"),
    # K2: benchmark options mean nothing with --from
    (("calibrate", "--from", H100, "--nproc", "0"), "--nproc has no effect with --from"),
    (("calibrate", "--from", H100, "--sizes", "abc"), "--sizes has no effect"),
    (("calibrate", "--from", H100, "--iters", "0"), "--iters has no effect"),
    (("calibrate", "--from", H100, "--timeout", "-1"), "--timeout has no effect"),
    (("calibrate", "--from", H100, "--shapes", "abc"), "--shapes has no effect"),
    (("calibrate", "--from", H100, "--ranks-per-node", "0"), "--ranks-per-node has no effect"),
    (("calibrate", "--from", H100, "--group-by-node"), "--group-by-node has no effect"),
    (("calibrate", "--from", H100, "--backend", "gloo"), "--backend has no effect"),
    # ... and are validated before the collective sweep when calibrate runs them
    (("calibrate", "--shapes", "abc"), "shape 'abc'"),
    (("calibrate", "--timeout", "inf"), "--timeout must be a finite number"),
    # L2 / B3: --gpus-per-node and --nics-per-node
    (("import", "nccl-tests", H100, "--gpus-per-node", "0"), "--gpus-per-node must be >= 1"),
    (("import", "nccl-tests", H100, "--gpus-per-node", "-1"), "--gpus-per-node must be >= 1"),
    (("import", "nccl-tests", H100, "--gpus-per-node", "3"), "no effect without --nics-per-node"),
    (
        ("import", "nccl-tests", H100, "--gpus-per-node", "3", "--nics-per-node", "8"),
        "at least the 8 ranks per node",
    ),
    (("import", "nccl-tests", H100, "--nics-per-node", "0"), "--nics-per-node must be >= 1"),
    (("calibrate", "--from", H100, "--gpus-per-node", "0"), "--gpus-per-node must be >= 1"),
    # L3: --op against what the log's file name says
    (("import", "nccl-tests", H100, "--op", "all_gather"), "contradicts the log's file name"),
    # L6: empty name, the same log twice
    (("import", "nccl-tests", H100, "--name", ""), "--name '' is empty"),
    (("import", "nccl-tests", H100, H100), "is given twice"),
    (("calibrate", "--from", H100, "--from", H100), "is given twice"),
    # L4: a wrong --base is found before the tables are printed
    (("import", "nccl-tests", H100, "--base", "megatronn"), "unknown profile 'megatronn'"),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_before_any_work(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: str
) -> None:
    if argv[0] == "bench" or argv[:2] == ("calibrate", "--shapes"):
        pytest.importorskip("torch")
    assert expected in _rejected(capsys, *argv)


def test_nothing_is_written_when_the_html_path_is_bad(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "p.yaml"
    _rejected(capsys, "import", "nccl-tests", H100, "-o", str(out), "--html", "/proc/x/y.html")
    assert not out.exists()


def test_output_check_leaves_no_file_behind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The pre-check touches the file; a later input error must not leave an empty one."""
    out = tmp_path / "sub" / "p.yaml"
    _rejected(capsys, "import", "nccl-tests", H100, "-o", str(out), "--op", "all_gather")
    assert not out.exists()


def test_matching_op_is_accepted() -> None:
    (run,) = parse_files([H100], "all_reduce")
    assert run.op == "all_reduce" and run.op_source == "--op"


# --------------------------------------------------------------------------------------------
# L5: a latency fitted only from the bandwidth plateau is not a measurement


def test_latency_from_large_messages_only_is_not_determined(tmp_path: Path) -> None:
    (run,) = parse_files([H100])
    fit = fit_level(run.samples(), "inter")
    assert fit.latency_us is None
    assert fit.bandwidth_gb_per_s == pytest.approx(24.4, rel=0.01)
    assert fit.rms_rel_residual < 0.02
    assert any("latency not determined" in a for a in fit.assumptions)
    cal = calibrate(run.samples())
    doc = profile_document(cal, name="h100", base="generic", source="t")
    assert "latency_us" not in doc["links"]["inter"]
    profile = load_profile(str(write_profile(tmp_path / "h.yaml", doc)))
    # the catalog's rated latency applies, not an unphysical fitted one
    assert profile.links["inter"].latency_us is None
    assert profile.links["inter"].latency(20.0) == 20.0


def test_a_full_sweep_still_fits_its_latency() -> None:
    (run,) = parse_files([A100])
    fit = fit_level(run.samples(), "inter")
    assert fit.latency_us is not None and fit.latency_us > 1.0


# --------------------------------------------------------------------------------------------
# K3/K4: what a profile was measured on


def _gloo_run() -> CollectiveRun:
    return CollectiveRun(
        samples=(),
        backend="gloo",
        world_size=2,
        nodes=1,
        ranks_per_node=2,
        device="x86_64",
        host="box",
        started="2026-03-01T10:00:00+00:00",
    )


def _cpu_gemm(**kw: object) -> GemmRun:
    return GemmRun(
        samples=(GemmSample(m=64, n=64, k=64, dtype="float32", time_us=10.0, tflops=0.05),),
        device="x86_64",
        gpu_id="h100-sxm",
        host="box",
        started="2026-03-02T10:00:00+00:00",
        **kw,  # type: ignore[arg-type]
    )


def test_measured_on_names_device_backend_and_date() -> None:
    nccl = Measurements(nccl=parse_files([H100]))
    assert nccl.measured_on("2026-05-05") == {
        "device": "h100-sxm",
        "backend": "nccl",
        "date": "2026-05-05",  # nccl-tests logs do not say when they ran
    }
    cpu = Measurements(collectives=[_gloo_run()], gemm=[_cpu_gemm(device_type="cpu")])
    assert cpu.measured_on("2026-05-05") == {
        "device": "cpu",
        "backend": "gloo",
        "date": "2026-03-01",
    }
    # files from before device_type existed: the CPU note still tells
    old = Measurements(gemm=[_cpu_gemm(notes=("CPU run (2 threads)",))])
    assert old.measured_on("x")["device"] == "cpu"
    mixed = Measurements(nccl=parse_files([H100]), gemm=[_cpu_gemm(device_type="cpu")])
    assert mixed.measured_on("x")["device"] == "h100-sxm+cpu"


def test_cpu_measurements_written_for_a_gpu_warn_loudly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    coll = tmp_path / "bc.json"
    gloo = CollectiveRun.from_dict(
        {
            **_gloo_run().to_dict(),
            "samples": [
                {
                    "op": "all_reduce",
                    "level": "intra",
                    "ranks": 2,
                    "ranks_per_node": 2,
                    "size_bytes": s,
                    "count": s // 4,
                    "dtype": "float32",
                    "time_us": 100.0 + s / 3e3,
                    "algbw_gb_per_s": s / (100.0 + s / 3e3) / 1e3,
                    "busbw_gb_per_s": s / (100.0 + s / 3e3) / 1e3,
                }
                for s in (1024, 65536, 2**20, 2**22)
            ],
        },
        "t",
    )
    coll.write_text(json.dumps(gloo.to_dict()))
    mm = tmp_path / "bm.json"
    mm.write_text(json.dumps(_cpu_gemm(device_type="cpu").to_dict()))
    out = tmp_path / "cal.yaml"
    code = main(
        ["calibrate", "--from", str(coll), "--from", str(mm), "--gpu", "h100-sxm", "-o", str(out)]
    )
    _, err = capsys.readouterr()
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("gpuscale: warning:")]
    assert len(warnings) == 2, err
    assert "measured on a CPU and is stored as h100-sxm's" in warnings[0]
    assert "links fitted from gloo on a CPU" in warnings[1]
    doc = yaml.safe_load(out.read_text())
    assert doc["measured_on"] == {"device": "cpu", "backend": "gloo", "date": "2026-03-01"}
    assert load_profile(str(out)).name == "measured"


# --------------------------------------------------------------------------------------------
# parsers and pre-checks


def test_sizes_below_one_element_are_merged_and_said() -> None:
    assert whole_elements([3, 6, 12, 24], "float64") == (
        [8, 24],
        "sizes are whole float64 elements (8 B): 3 B, 6 B, 12 B run as 8 B",
    )
    assert whole_elements([8, 16], "float32") == ([8, 16], "")


def test_actual_size_is_whole_elements_per_rank() -> None:
    assert actual_size("all_reduce", 3, 8, 4) == (8, 1)
    assert actual_size("all_reduce", 20, 8, 4) == (16, 2)
    assert actual_size("all_gather", 8, 8, 4) == (32, 1)  # one element per rank at least
    assert actual_size("reduce_scatter", 100, 4, 4) == (96, 6)


def test_collective_config_rejects_non_finite_timeout() -> None:
    for bad in (float("inf"), float("nan"), 0.0):
        with pytest.raises(InputError, match="finite"):
            CollectiveConfig(timeout_s=bad)


def test_check_fits() -> None:
    check_fits([(1024, 1024, 1024)], "float32", 3 * 4 * 2**20)
    with pytest.raises(InputError, match=r"shape 1025 needs 12.6 MB .* accepted: smaller"):
        check_fits([(1025, 1025, 1025)], "float32", 3 * 4 * 2**20)
    with pytest.raises(InputError, match="shape 8x16x32"):
        check_fits([(8, 16, 32)], "bfloat16", 10)


def test_match_gpu_reads_memory_from_the_name() -> None:
    assert match_gpu("NVIDIA A100-SXM4-40GB") == "a100-sxm-40gb"
    assert match_gpu("NVIDIA A100-SXM4-80GB") == "a100-sxm-80gb"
    assert match_gpu("NVIDIA H800") is None


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="0123456789KMGkmg:,. x-", max_size=16))
def test_size_and_shape_parsers_answer_or_refuse(text: str) -> None:
    try:
        sizes = parse_sizes(text)
        assert sizes and all(s > 0 for s in sizes) and len(sizes) <= 64
    except InputError as exc:
        assert str(exc).startswith("--sizes")
    try:
        shapes = parse_shapes(text)
        assert shapes and all(min(s) >= 1 for s in shapes)
    except InputError as exc:
        assert "accepted" in str(exc)
