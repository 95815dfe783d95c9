"""`gpuscale infer --engine-options decode_moe_a2a_deepep=true`: SGLang's DeepEP on the decode
workers of a disaggregated deployment only; asked of an aggregated one, one line and exit 2
(its effect on the decode step: tests/unit/test_nvl72_deepep.py)."""

from __future__ import annotations


def test_decode_deepep_on_an_aggregated_deployment_exits_2_with_one_line(gpuscale) -> None:
    proc = gpuscale(
        "infer", "deepseek-r1", "--gpu", "gb200", "--engine", "sglang", "--concurrency", "64",
        "--tp", "8", "--ep", "8", "--attention-dp", "8",
        "--engine-options", "decode_moe_a2a_deepep=true",
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "disaggregated" in proc.stderr


def test_deepep_without_attention_dp_exits_2_with_one_line(gpuscale) -> None:
    # Priced only under attention DP: without it the option would change no figure.
    proc = gpuscale(
        "infer", "deepseek-r1", "--gpu", "h200-sxm", "--engine", "sglang", "--concurrency", "64",
        "--tp", "8", "--ep", "8", "--engine-options", "moe_a2a_deepep=true",
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--attention-dp > 1" in proc.stderr
