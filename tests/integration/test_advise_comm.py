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


def _json(gpuscale, *args: str) -> dict:
    proc = gpuscale("advise-comm", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_carries_the_recommendation_and_every_hook(gpuscale) -> None:
    doc = _json(gpuscale, *BOUND)
    hooks = {h["hook"]: h for h in doc["hooks"]}
    assert hooks.keys() >= {"default", "bf16"} and doc["recommendation"] in hooks
    assert doc["verdict"]


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
