"""``gpuscale advise-comm`` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys

BOUND = [
    "gpt3-350m",
    "--gpus",
    "64",
    "--inter",
    "eth-10",
    "--nics-per-node",
    "1",
    "--gpu",
    "a100-sxm-80gb",
]
HIDDEN = ["llama3.2-1b", "--gpus", "16", "--inter", "ib-ndr400", "--seq", "8192"]


def _json(gpuscale, *args: str) -> dict:
    proc = gpuscale("advise-comm", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_bandwidth_bound_job_gets_a_hook_and_its_gain(gpuscale) -> None:
    doc = _json(gpuscale, *BOUND)
    assert doc["bandwidth_bound"] is True
    hooks = {h["hook"]: h for h in doc["hooks"]}
    pick = hooks[doc["recommendation"]]
    assert pick["speedup_vs_default"] > 1.02
    assert pick["step_time_s"] < hooks["default"]["step_time_s"]
    assert f"{pick['speedup_vs_default']:.2f}x" in doc["verdict"]


def test_compute_bound_job_is_told_to_keep_the_default(gpuscale) -> None:
    doc = _json(gpuscale, *HIDDEN)
    assert doc["bandwidth_bound"] is False
    assert doc["recommendation"] is None
    assert doc["verdict"].startswith("not bandwidth-bound")
    # Hidden sync still slows the compute it overlaps, so fewer bytes help, but not enough to
    # pass the advisor's bar.
    assert all(h["speedup_vs_default"] < 1.0 + doc["options"]["min_gain"] for h in doc["hooks"])


def test_hidden_sync_still_pays_when_its_interference_is_large(gpuscale) -> None:
    # BERT-large at seq 8192 on 100 GbE: the all-reduce fits under backward, but it slows a
    # tenth of the step; sending half the bytes clears the advisor's bar.
    doc = _json(
        gpuscale,
        "bert-large",
        "--gpus",
        "16",
        "--inter",
        "eth-100",
        "--seq",
        "8192",
        "--mbs",
        "2",
        "--gpu",
        "a100-sxm-80gb",
    )
    assert doc["bandwidth_bound"] is False
    hooks = {h["hook"]: h for h in doc["hooks"]}
    assert doc["recommendation"] is not None
    gain = hooks[doc["recommendation"]]["speedup_vs_default"]
    assert gain >= 1.0 + doc["options"]["min_gain"]
    assert doc["verdict"].startswith("not bandwidth-bound") and f"{gain:.2f}x" in doc["verdict"]


def test_default_step_is_the_estimate_commands(gpuscale) -> None:
    doc = _json(gpuscale, *BOUND)
    proc = gpuscale(
        "estimate",
        "gpt3-350m",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "64",
        "--inter",
        "eth-10",
        "--nics-per-node",
        "1",
        "--dp",
        "64",
        "--gbs",
        "64",
        "--seq",
        "4096",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert doc["step_time_s"] == json.loads(proc.stdout)["step_time_s"]
    default = next(h for h in doc["hooks"] if h["hook"] == "default")
    assert default["step_time_s"] == doc["step_time_s"]


def test_table_output_names_the_verdict(gpuscale) -> None:
    proc = gpuscale("advise-comm", *BOUND)
    assert proc.returncode == 0, proc.stderr
    assert "hierarchical+bf16" in proc.stdout and "verdict" in proc.stdout


def test_runs_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from gpuscale.cli.main import main\n"
        f"raise SystemExit(main(['advise-comm', *{BOUND!r}, '--json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_bad_input_is_one_line(gpuscale) -> None:
    for args, needle in (
        (["gpt3-350m", "--gpus", "1"], "--gpus must be >= 2"),
        (["gpt3-350m", "--gpus", "16", "--inter", "ib-ndr"], "did you mean"),
        (["gpt3-350m", "--gpus", "16", "--topk-ratio", "0"], "--topk-ratio must be in (0, 1]"),
        (["no-such-model", "--gpus", "16"], "unknown model"),
    ):
        proc = gpuscale("advise-comm", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuscale") and needle in lines[0], lines
