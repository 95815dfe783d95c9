"""Bad input found by driving the CLI as a new user would: each case is one line on stderr and
exit code 2 (never a traceback, a silently ignored flag, or a search that does not end)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]
INFER = ("infer", "llama3.1-8b", "--gpu", "h100-sxm")
DISAGG = ("--prefill-workers", "1", "--decode-workers", "1")
HUGE_GPN = ("--gpus-per-node", "99999999999999999999")
FI_GEMM = "flashinfer_fp8_gemm=true"
MTP_DP64 = (
    *("infer", "deepseek-r1", "--gpu", "b200", "--engine", "sglang", "--weights", "fp8_block"),
    *("--concurrency", "64", "--tp", "64", "--ep", "64", "--attention-dp", "64"),
    *("--speculative", "mtp", "--draft-tokens", "2"),
)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # An integer past int64 overflowed numpy's plan arrays with a traceback.
        (
            (*("estimate", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8"), *HUGE_GPN),
            "'--gpus-per-node': 99999999999999999999 is too large; accepted: a whole number up "
            "to 2^53",
        ),
        (
            ("fit", "llama3.1-8b", "--gpu", "h100-sxm", "--mbs", "99999999999999999999"),
            "'--mbs': 99999999999999999999 is too large",
        ),
        (
            (*INFER, "--concurrency", "1,99999999999999999999"),
            "--concurrency '1,99999999999999999999': give a whole number of requests, 1 to "
            "1,000,000, or several comma-separated",
        ),
        # A search over 10^12 GPUs ran for minutes and took tens of GB.
        (
            ("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "1000000000000"),
            "--gpus must be 1 to 1,048,576 (2^20 GPUs, above the largest clusters built), got "
            "1000000000000",
        ),
        # Flags the chosen question does not take were ignored without a word.
        ((*INFER, "--pp", "2"), "--pp: the static-batch table"),
        ((*INFER, "--concurrency", "8", "--batch", "4"), "--batch: the serving model under load"),
        ((*INFER, "--concurrency", "8", "--price", "2"), "--price: the serving model under load"),
        ((*INFER, "--search", "--gpus", "8", "--tp", "2"), "--tp: --search chooses the layout"),
        (
            (*INFER, "--concurrency", "8", *DISAGG, "--tp", "4"),
            "--tp 4 applies only to aggregated serving",
        ),
        ((*INFER, "--concurrency", "8", "--tp", "2", "--attention-dp", "2"), "is dense"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    gpuscale: Run, args: tuple[str, ...], expected: str
) -> None:
    result = gpuscale(*args, "--json")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), result.stderr
    assert expected in lines[0]


ADAPT = ("cluster", "adapt", "gpt3-13b", "--gpu", "h100-sxm")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # numpy was asked for 7 TiB (a MemoryError traceback) in both.
        (
            ("cluster", "trace", "--synthetic", "philly", "--jobs", "1000000000000"),
            "--jobs must be at most 1,000,000",
        ),
        ((*ADAPT, "--gpus", "1000000000000", "--event", "inter"), "--gpus must be 1 to 1,048,576"),
        # A node loss has no bandwidth factor: --factor was dropped without a word.
        (
            (*ADAPT, "--gpus", "64", "--event", "node-loss", "--factor", "0.5"),
            "a node loss has none",
        ),
    ],
)
def test_cluster_bad_input_is_refused_before_any_file_is_written(
    gpuscale: Run, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    out = tmp_path / "trace.csv"
    extra = ("-o", str(out)) if "trace" in args else ()
    result = gpuscale(*args, *extra)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr
    assert not out.exists()


def test_cluster_export_writes_the_file_with_json_too(gpuscale: Run, tmp_path: Path) -> None:
    # -o was ignored when --json was given; cluster trace had no --json at all.
    out = tmp_path / "kueue.yaml"
    cluster = Path(__file__).parents[2] / "examples" / "fat-tree-512.yaml"
    result = gpuscale("cluster", "export", "--cluster", str(cluster), "--format", "kueue")
    exported = gpuscale(
        *("cluster", "export", "--cluster", str(cluster), "--format", "kueue"),
        "-o",
        str(out),
        "--json",
    )
    assert exported.returncode == 0 and json.loads(exported.stdout)["format"] == "kueue"
    assert out.read_text() == result.stdout
    trace = tmp_path / "t.csv"
    made = gpuscale(
        "cluster", "trace", "--synthetic", "philly", "--jobs", "20", "-o", str(trace), "--json"
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["jobs"] == 20 and trace.is_file()


@pytest.fixture(scope="module")
def plan_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    est = ("estimate", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq", "4096")
    result = subprocess.run(
        [sys.executable, "-m", "gpuscale.cli.main", *est, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    path.write_text(result.stdout)
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # Each flag silently replaced the document's value: a plan priced at one sequence
        # length, precision or node size was exported under another.
        (("--seq", "8192"), "--seq 8192 contradicts the document's 4096"),
        (("--precision", "fp16"), "--precision fp16 contradicts the document's bf16"),
        (("--gpus-per-node", "4"), "--gpus-per-node 4 contradicts the document's 8"),
    ],
)
def test_export_refuses_flags_that_contradict_the_document(
    gpuscale: Run, plan_json: Path, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    out = tmp_path / "job"
    result = gpuscale("export", "--to", "megatron", "--from", str(plan_json), *args, "-o", str(out))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert expected in result.stderr and not out.exists()


def test_export_into_a_file_is_one_line(gpuscale: Run, plan_json: Path, tmp_path: Path) -> None:
    # -o naming an existing file ended in a FileExistsError traceback from mkdir.
    taken = tmp_path / "taken"
    taken.write_text("mine")
    result = gpuscale("export", "--to", "megatron", "--from", str(plan_json), "-o", str(taken))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "is not a folder" in result.stderr and taken.read_text() == "mine"


@pytest.mark.parametrize("args", [("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8")])
def test_a_reader_that_closes_the_pipe_is_exit_code_0(args: tuple[str, ...]) -> None:
    # `gpuscale plan ... | head -1`: rich ended the run with a silent exit code 1.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscale.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


ESTIMATE = ("estimate", "llama3.1-8b", "--gpu", "h100-sxm")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # An H100 SXM node was priced with 16 GPUs on one NVLink fabric (HGX holds 8).
        (
            (*ESTIMATE, "--gpus", "16", "--gpus-per-node", "16"),
            "--gpus-per-node 16: one h100-sxm node holds at most 8 GPUs (nvlink4 joins 8); "
            "accepted: 1 to 8",
        ),
        (
            (*INFER, "--concurrency", "8", "--tp", "2", "--gpus-per-node", "16"),
            "--gpus-per-node 16: one h100-sxm node holds at most 8 GPUs",
        ),
        # Without --gpus the error named --gpus, a flag never typed.
        (
            (*ESTIMATE, "--dp", "1000000000000000"),
            "--dp 1000000000000000: tp x pp x dp x cp = 1 x 1 x 1000000000000000 x 1",
        ),
        (
            (*ESTIMATE, "--tp", "8", "--dp", "1", "--cp", "1048576"),
            "--cp 1048576: tp x pp x dp x cp = 8 x 1 x 1 x 1048576",
        ),
        # A step of 10^12-token sequences or 10^15 sequences was priced (10^11 s, 10^13 s).
        (
            (*ESTIMATE, "--gpus", "8", "--seq", "1000000000000"),
            "--seq 1000000000000 is longer than any model's context; accepted: 1 to 16,777,216",
        ),
        (
            (*ESTIMATE, "--gpus", "8", "--gbs", "1000000000000000"),
            "--gbs 1000000000000000 x --seq 4096 = 4,096,000,000,000,000,000 tokens in one step",
        ),
        (
            ("fit", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus-per-node", "16"),
            "--gpus-per-node 16: one h100-sxm node holds at most 8 GPUs",
        ),
        # 10^9 requests in flight were priced as an 8-hour queue.
        (
            (*INFER, "--concurrency", "1000000000"),
            "--concurrency must be 1 to 1,000,000 requests (the most one benchmark run holds), "
            "got 1000000000",
        ),
        ((*INFER, "--concurrency", "1,8,2000000"), "--concurrency must be 1 to 1,000,000"),
        ((*INFER, "--batch", "1000000000"), "--batch must be 1 to 1,000,000 requests"),
        (
            (*INFER, "--concurrency", "8", *DISAGG, "--decode-batch", "1000000000000"),
            "--decode-batch must be 1 to 1,000,000 requests",
        ),
        # Tokens past 2^53 and past the model's context are refused, never priced.
        ((*INFER, "--input", "10000000000000000000000000000000000000000"), "is too large"),
        (
            (*INFER, "--concurrency", "8", "--output", "1000000000"),
            "--input 512 + --output 1000000000 = 1,000,000,512 tokens exceed llama3.1-8b's "
            "maximum context of 131,072",
        ),
        # The help's vocabulary is the accepted one: one not in it is refused naming it.
        ((*INFER, "--concurrency", "8", "--weights", "int3"), "--weights 'int3' is not a known"),
        # A ZeroDivisionError traceback in the serving placement.
        (
            (*INFER, "--concurrency", "8", "--gpus-per-node", "0"),
            "--gpus-per-node must be a positive integer, got 0; accepted: the GPUs of one node",
        ),
        # Each was launched as something else without a word: vLLM for an empty engine, the
        # last of two values, the defaults for an option naming no setting.
        ((*INFER, "--concurrency", "8", "--engine", ""), "--engine: unknown engine ''"),
        (
            (*INFER, "--concurrency", "8", "--engine-options", "max_num_seqs=4,max-num-seqs=8"),
            "--engine-options 'max_num_seqs' is given twice; accepted: each NAME once",
        ),
        (
            (*INFER, "--concurrency", "8", "--engine-options", ","),
            "--engine-options ',' names no setting; give NAME=VALUE",
        ),
        # FlashInfer's block-FP8 GEMM is a Blackwell kernel for block-FP8 layers: elsewhere the
        # option would change nothing, silently.
        (
            (*INFER, "--concurrency", "8", "--engine", "sglang", "--engine-options", FI_GEMM),
            "engine option flashinfer_fp8_gemm prices FlashInfer's block-FP8 GEMM, which SGLang "
            "runs on Blackwell GPUs for fp8_block weights; got h100-sxm (hopper) with bf16",
        ),
        # SGLang's own 48 running requests under MTP leave 64 attention-DP ranks none: the
        # server refuses to start (tp_worker.py asserts a positive share).
        (MTP_DP64, "sglang's own 48 split over 64 attention-DP ranks leaves 0 per rank"),
        # Whether the prefill workers run the draft module means nothing without speculation.
        (
            (
                *INFER,
                "--concurrency",
                "8",
                "--engine",
                "sglang",
                *DISAGG,
                "--engine-options",
                "prefill_speculative=false",
            ),
            "engine option prefill_speculative sets whether the prefill workers run the draft "
            "module of speculative decoding, which this deployment does not run",
        ),
    ],
)
def test_leftover_bad_input_is_one_line_and_exit_code_2(
    gpuscale: Run, args: tuple[str, ...], expected: str
) -> None:
    result = gpuscale(*args, "--json")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), result.stderr
    assert expected in lines[0]


def test_infer_help_lists_every_weight_format_accepted(gpuscale: Run) -> None:
    # `--weights int8` was accepted under load though --help left it out.
    from gpuscale.api import infer
    from gpuscale.api.serving import WEIGHT_FORMATS

    shown = " ".join(gpuscale("infer", "--help").stdout.split())
    listed = shown.split("--weights TEXT", 1)[1].split("[default: auto]", 1)[0]
    for name in WEIGHT_FORMATS:
        assert f" {name}," in listed or f" {name} " in listed, name
        # accepted by the function the flag feeds (in-process: one engine start each is slow)
        assert infer("llama3.1-8b", gpu="h100-sxm", concurrency=4, weights=name).weights


def test_an_empty_name_lists_what_is_accepted(gpuscale) -> None:
    # Fuzz (helper-146): --inter '' answered "did you mean eth-10, eth-100, eth-25?".
    proc = gpuscale(*INFER, "--concurrency", "4", "--inter", "")
    assert proc.returncode == 2, proc.stderr
    assert "unknown fabric ''; known: " in proc.stderr and "ib-ndr400" in proc.stderr
