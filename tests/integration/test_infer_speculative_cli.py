"""`gpuscale infer --speculative mtp --draft-tokens K [--acceptance A]` through the entry point."""

from __future__ import annotations

import json

LOAD = (
    "infer", "deepseek-ai/DeepSeek-R1", "--gpu", "h200-sxm", "--engine", "tensorrt-llm",
    "--tp", "8", "--ep", "8", "--input", "1024", "--output", "1024", "--concurrency", "4",
    "--json",
)  # fmt: skip


def _option(proc):  # type: ignore[no-untyped-def]
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["options"][0]


def test_mtp_shortens_tpot_and_reports_the_acceptance(gpuscale) -> None:
    plain = _option(gpuscale(*LOAD))
    mtp = _option(gpuscale(*LOAD, "--speculative", "mtp", "--draft-tokens", "3"))
    # the contract keys are all still there, plus the speculative ones
    assert set(plain) <= set(mtp)
    assert set(mtp) - set(plain) == {
        "speculative", "draft_tokens", "acceptance", "tokens_per_iteration",
    }  # fmt: skip
    assert mtp["tokens_per_iteration"] == 2.82 or abs(mtp["tokens_per_iteration"] - 2.82) < 1e-9
    assert plain["tpot_ms"] / 2.82 < mtp["tpot_ms"] < plain["tpot_ms"]
    low = _option(
        gpuscale(*LOAD, "--speculative", "mtp", "--draft-tokens", "3", "--acceptance", "0.3")
    )
    assert low["acceptance"] == 0.3 and low["tpot_ms"] > mtp["tpot_ms"]


def test_bad_speculative_options_exit_2_with_one_line(gpuscale) -> None:
    for bad in (
        ("--speculative", "mtp"),
        ("--speculative", "medusa", "--draft-tokens", "3"),
        ("--draft-tokens", "3"),
        ("--speculative", "mtp", "--draft-tokens", "3", "--acceptance", "2"),
        ("--speculative", "mtp", "--draft-tokens", "0"),
    ):
        proc = gpuscale(*LOAD, *bad)
        assert proc.returncode == 2, bad
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    # the static-batch table and a dense model without a draft module refuse it too
    static = gpuscale(
        "infer", "deepseek-ai/DeepSeek-R1", "--gpu", "h200-sxm", "--speculative", "mtp"
    )
    assert static.returncode == 2 and "static-batch" in static.stderr
    dense = gpuscale(
        "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4",
        "--speculative", "mtp", "--draft-tokens", "3", "--acceptance", "0.8",
    )  # fmt: skip
    assert dense.returncode == 2 and "draft module" in dense.stderr
