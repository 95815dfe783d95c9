"""benchmarks/disagg_loop_cost.py: the disaggregated closed loop's continuity at fixed lengths
and its cost against the run's length, as quoted in
docs/investigations/serving-disaggregated.md."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark


def test_script_prints_one_reading_and_a_bounded_cost() -> None:
    proc = run_benchmark("disagg_loop_cost")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    spread = [
        [float(v) for v in line.split()]
        for line in out.split("1. ")[1].split("2. ")[0].splitlines()
        if re.match(r"^\s+\d+(\s+\d+){6}\s*$", line)
    ]
    assert [int(r[0]) for r in spread] == [64, 576]
    for _, cv0, cv6, cv4, cv3, _, _ in spread:
        assert cv0 == cv6 == cv4  # under half a token of spread: the fixed-length run
        assert abs(cv3 / cv0 - 1.0) < 0.05
    rounds = [float(v) for v in out.split("2. ")[1].split("3. ")[0].splitlines()[1].split()]
    assert len(rounds) == 24 and rounds[0] > 5 * max(rounds[12:])
    runs = {
        int(m.group(1)): (float(m.group(2)), int(m.group(3)), int(m.group(4)))
        for m in re.finditer(r"^\s+(\d+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+[\d.]+$", out, re.M)
    }
    assert runs[10**6][1:] == runs[10**5][1:] == runs[24 * 576][1:]
    assert abs(runs[10**6][0] - runs[10**5][0]) < abs(runs[10**5][0] - runs[24 * 576][0])
    assert re.search(r"4\. disaggregated validation rows \(\d+\): mean \d+ ms", out)
    # The edge loads: at most MOST_FOLLOWED requests and no more iterations than two a request
    # (a first chunk, a last), where 12-13 million were followed one by one.
    edges = re.findall(
        r"^\s+(budget 1 token.*|83k.*?)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+[\d.]+$", out, re.M
    )
    assert len(edges) == 2
    for _, _, followed, iterations in edges:
        assert int(followed) <= 200_000
        assert int(iterations) <= 2 * int(followed)
