"""Uneven pipeline stages through the real entry point: Megatron-Bridge's Llama 3.1 405B recipe
(PP 8 x VP 8 over 126 layers) is accepted, the explicit split flags work, bad splits are one line."""

from __future__ import annotations

import json

RECIPE = [
    "estimate",
    "llama3.1-405b",
    "--gpu",
    "h100-sxm",
    "--gpus",
    "1024",
    "--tp",
    "8",
    "--pp",
    "8",
    "--mbs",
    "1",
    "--gbs",
    "512",
    "--seq",
    "8192",
    "--zero",
    "1",
    "--recompute",
    "full",
    "--framework",
    "megatron",
    "--json",
]


def test_405b_pp8_vp8_recipe_is_accepted(gpuscale) -> None:
    auto = gpuscale(*RECIPE, "--vp", "8")
    assert auto.returncode == 0, auto.stderr
    flags = gpuscale(*RECIPE, "--vp", "8", "--embedding-as-layer", "--loss-as-layer")
    assert flags.returncode == 0, flags.stderr
    a, b = json.loads(auto.stdout), json.loads(flags.stdout)
    assert a["step_time_s"] == b["step_time_s"]
    assert a["breakdown"]["bubble"] < json.loads(gpuscale(*RECIPE).stdout)["breakdown"]["bubble"]


def test_explicit_first_and_last_stage_layers(gpuscale) -> None:
    even = json.loads(
        gpuscale(*RECIPE, "--first-stage-layers", "15", "--last-stage-layers", "15").stdout
    )
    heavy = gpuscale(*RECIPE, "--first-stage-layers", "7", "--last-stage-layers", "23")
    assert heavy.returncode == 0, heavy.stderr
    assert json.loads(heavy.stdout)["step_time_s"] > even["step_time_s"]


def test_a_split_that_does_not_add_up_is_one_line(gpuscale) -> None:
    proc = gpuscale(*RECIPE, "--vp", "7")
    assert proc.returncode == 2
    assert "must divide the 126 layers" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = gpuscale(*RECIPE, "--first-stage-layers", "14", "--last-stage-layers", "14")
    assert proc.returncode == 2 and "do not split evenly" in proc.stderr


def test_nvfp4_is_accepted_on_blackwell_and_refused_elsewhere_in_one_line(gpuscale) -> None:
    base = ["estimate", "llama3.1-8b", "--gpus", "8", "--mbs", "1", "--seq", "4096"]
    ok = gpuscale(*base, "--gpu", "gb200", "--precision", "nvfp4", "--json")
    assert ok.returncode == 0, ok.stderr
    assert 0 < json.loads(ok.stdout)["mfu"] < 1
    bad = gpuscale(*base, "--gpu", "h100-sxm", "--precision", "nvfp4")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "no nvfp4" in bad.stderr
