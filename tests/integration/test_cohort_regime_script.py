"""benchmarks/cohort_regime.py: the regime fingerprint quoted in
docs/investigations/serving-gap-analysis-rows.md."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

PCT = r"\s*(\d+)%\s+\(\s*([+-]\d+)%\)"
LINE = re.compile(
    rf"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+{PCT}\s+/{PCT}\s+{PCT}\s+/{PCT}\s+(-?[\d.]+)\s+(\d+)%\s+(\d+)%$"
)


def test_cohort_regime_tells_the_lockstep_rows_from_the_staggered_ones() -> None:
    # The SGLang rows carry both findings (the whole set takes ~4x as long).
    out = run_benchmark("cohort_regime", "--engine", "sglang")
    assert out.returncode == 0, out.stderr
    rows = {
        (m.group(1), m.group(2), m.group(3)): m
        for m in map(LINE.match, out.stdout.splitlines())
        if m
    }
    assert len(rows) >= 3 and {k[0] for k in rows} == {"sglang"}
    for m in rows.values():
        assert int(m.group(5)) > 0
    # TPOT |error| under the lockstep reading (group 6) and the staggered one (group 8).
    lock_tpot, stag_tpot = 6, 8
    qwen = rows[("sglang", "0.5.1.post1", "Qwen3-32B")]
    llama = rows[("sglang", "0.5.6.post2", "Llama-3.1-8B-Instruct")]
    # The docs' finding: the SGLang 0.5.1 Qwen3-32B runs moved in lockstep (their TPOT holds
    # no other prompt's prefill), the SGLang 0.5.6 Llama-3.1-8B runs were staggered.
    assert int(qwen.group(lock_tpot)) * 2.5 < int(qwen.group(stag_tpot))
    assert int(llama.group(stag_tpot)) * 2.5 < int(llama.group(lock_tpot))
    # Read with AIConfigurator's generator launch (mixed chunks), the Llama rows' TPOT is near
    # the staggered one, far from the lockstep one; the Qwen rows keep the defaults.
    read_tpot = 15  # groups: 6-13 the four PCT pairs, 14 waiting, 15 TPOT read, 16 TTFT read
    assert int(llama.group(read_tpot)) * 2 < int(llama.group(lock_tpot))
    assert qwen.group(read_tpot) == qwen.group(lock_tpot)


def test_unknown_engine_is_one_line() -> None:
    out = run_benchmark("cohort_regime", "--engine", "tgi")
    assert out.returncode == 2 and "invalid choice" in out.stderr
