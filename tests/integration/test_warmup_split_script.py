"""benchmarks/warmup_split.py: the MoE TTFT miss by client warm-up quoted in
docs/investigations/serving-moe-prefill.md."""

from __future__ import annotations

from tests.benchmark_scripts import run_benchmark


def test_warmup_split_prints_each_warmup_class() -> None:
    out = run_benchmark("warmup_split")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("MoE rows at concurrency <= 64")
    by = {tuple(line.split()[:5]): line.split() for line in lines[2:]}
    # TensorRT-LLM DeepSeek-R1 on H200 at 8k prompts: the aggregated runs of InferenceX's client
    # before its warm-up existed, and the disaggregated runs sa-bench warmed up first
    none = by[("trtllm", "h200_sxm", "DeepSeek", "8192", "none")]
    warm = by[("trtllm", "h200_sxm", "DeepSeek", "8192", "sa-bench")]
    assert float(none[-1]) > 1.3 and 0.8 < float(warm[-1]) < 1.2
    # the classes of the module docstring ("2C copies" prints as two words), no other
    classes = {key[4] for key in by}
    assert {"none", "2C", "sa-bench", "other"} == classes
