"""benchmarks/first_wave_stall.py: the diagnostic the "TTFT tails: a one-off stall of the first
measured wave?" section of docs/investigations/serving-rows-and-clients.md quotes runs from a
clone, reads the SGLang DeepSeek-R1 H200 rows against the published InferenceX P99s of the same
deployment, and leaves the model unchanged."""

from __future__ import annotations

import re
import subprocess

from tests.benchmark_scripts import run_benchmark


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("first_wave_stall", *args)


def test_sglang_deepseek_rows_meet_the_published_p99s() -> None:
    out = _run("--engines", "sglang", "--model", "DeepSeek-R1$")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "== sglang 0.5.9 DeepSeek-R1 h200_sxm tp8 ep1 dp1 (15 runs)" in text
    # Seven published runs of issue #870 match rows by shape and concurrency.
    pub = [ln for ln in text.splitlines() if "(0.5.7)" in ln]
    assert len(pub) == 7
    # The 1k/1k concurrency-8 run: published P99 1975.4 ms; the stall it implies is the P99
    # minus the model's own burst at that rank, and it is positive (the model has no stall).
    c8 = next(ln for ln in pub if re.search(r"1024x1024\s+c8\b", ln))
    cols = c8.split("|")[1].split()
    assert cols[0] == "330.6" and cols[2] == "1975.4"
    assert float(cols[4]) > 0
    m = re.search(r"stall S from the mean gap: median (\d+) ms", text)
    assert m and int(m.group(1)) > 0
    assert "of the published mean's gap to the model" in text


def test_unknown_engine_prints_nothing_to_read() -> None:
    out = _run("--engines", "tgi")
    assert out.returncode == 0, out.stderr
    assert "no aggregated random-length rows match" in out.stdout
