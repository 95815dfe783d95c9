"""The network testbed end to end on its smallest setting: either it says "skipped" (no root,
no namespaces) and exits 0, or it builds both namespaces, runs two torchrun nodes, reports the
JSON the issue specifies and leaves no namespace behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(240)]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "comm_hooks.py"
TINY = [
    "--rates",
    "unthrottled",
    "--model",
    "gpt-tiny",
    "--hooks",
    "default,hierarchical+bf16",
    "--steps",
    "1",
    "--warmup",
    "1",
    "--timeout",
    "150",
    "--json",
]


def _namespaces() -> set[str]:
    try:
        proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return set()
    return {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("gsbench-")}


def test_testbed_runs_tiny_config_or_skips_cleanly() -> None:
    before = _namespaces()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *TINY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the testbed removes its namespaces and children first
        stdout, stderr = proc.communicate(timeout=30)
        pytest.fail(f"testbed hung:\n{stderr[-3000:]}")
    assert proc.returncode == 0, stderr[-3000:]
    doc = json.loads(stdout)
    if "skipped" in doc:
        return
    rows = doc["rates"]["unthrottled"]
    keys = {"step_time_s", "speedup_vs_default", "slow_link_bytes", "final_loss_delta"}
    assert all(keys <= set(rows[hook]) for hook in ("default", "hierarchical+bf16"))
    # 2 nodes x 2: the flat ring sends 1.5x the gradient out of each node, hierarchical+bf16
    # sends it once at half width: a third of the bytes (plus a little control traffic)
    ratio = rows["hierarchical+bf16"]["slow_link_bytes"] / rows["default"]["slow_link_bytes"]
    assert 0.30 < ratio < 0.40
    assert abs(rows["hierarchical+bf16"]["final_loss_delta"]) < 1e-3
    assert _namespaces() == before, "the testbed left namespaces behind"
