"""`gpuscale infer` on a GB200 NVL72 rack, through the real entry point: the default node is the
72-GPU NVLink domain (as for estimate), so TP16 is priced on NVLink; --help says the default."""

from __future__ import annotations

import json

TP16 = [
    "infer", "llama3.1-405b", "--gpu", "gb200", "--tp", "16", "--concurrency", "32",
    "--input", "1024", "--output", "512", "--json",
]  # fmt: skip


def _option(gpuscale, *extra: str) -> dict:
    proc = gpuscale(*TP16, *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["options"][0]


def test_infer_on_gb200_defaults_to_the_nvl72_domain(gpuscale) -> None:
    default = _option(gpuscale)
    assert default == _option(gpuscale, "--gpus-per-node", "72")
    eight = _option(gpuscale, "--gpus-per-node", "8")
    assert set(default) == set(eight)  # --json keys unchanged
    assert default["tpot_ms"] < 0.8 * eight["tpot_ms"]
    assert default["ttft_ms"] < eight["ttft_ms"]


def test_every_command_says_its_node_default(gpuscale) -> None:
    commands = (["infer"], ["advise-comm"], ["fit"], ["cluster", "adapt"], ["estimate"], ["export"])
    for command in commands:
        proc = gpuscale(*command, "--help")
        assert proc.returncode == 0, proc.stderr
        text = " ".join(proc.stdout.split())
        assert "72 on GB200/GB300 NVL72" in text, command
