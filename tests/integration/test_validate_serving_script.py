"""benchmarks/validate_serving.py --by: the breakdown the serving figures in docs/benchmarks.md
are quoted from."""

from __future__ import annotations

import subprocess

from tests.benchmark_scripts import run_benchmark


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("validate_serving", *args)


def test_breakdown_by_concurrency_and_workers() -> None:
    out = _run("--limit", "50", "--by", "concurrency,workers")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("rows: ")
    grouped = [line for line in lines if ":concurrency=c" in line]
    assert grouped, out.stdout
    # Every breakdown line names both keys; disaggregated ones say how their workers are known.
    assert all("|workers=" in line for line in grouped)
    assert any("disagg:" in line and "workers=stated" in line for line in grouped)
    assert any("disagg-guess:" in line and "workers=guess" in line for line in grouped)
    # The row classes are counted, and the not-expressible rows stay out of the disagg figures.
    classes = next(line for line in lines if line.startswith("row classes: "))
    assert "disagg not expressible: " in classes and "disagg stated: " in classes
    # Concurrency buckets sort by number (c5-16 before c17-64), not as text.
    agg = [line.split("concurrency=")[1].split("|")[0] for line in grouped if " agg:" in line]
    lows = [int(b[1:].split("-")[0].lstrip(">")) for b in agg]
    engines = [line.split()[0] for line in grouped if " agg:" in line]
    for engine in set(engines):
        mine = [lo for lo, e in zip(lows, engines, strict=True) if e == engine]
        assert mine == sorted(mine)


def test_unknown_breakdown_key_is_one_line_exit_2() -> None:
    out = _run("--by", "colour")
    assert out.returncode == 2
    assert "unknown --by key colour" in out.stderr
    assert "Traceback" not in out.stderr


def test_classes_lists_the_aggregated_rows_recorded_at_the_clients_cap() -> None:
    out = _run("--classes")
    assert out.returncode == 0, out.stderr
    capped = [line for line in out.stdout.splitlines() if "client's cap" in line]
    # InferenceX gpt-oss H100 vLLM rows at 512 (gptoss_fp4_h100_docker.sh, d22bf9ca9..4e135fd3f)
    assert len(capped) == 9
    assert all("_vllm_" in line and "_c512_" in line for line in capped)
    assert all(line.split("\t")[1] == "not expressible" for line in capped)
