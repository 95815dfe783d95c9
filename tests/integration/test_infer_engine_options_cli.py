"""`gpuscale infer --engine-options`: a launch's scheduler settings, through the real entry point."""

from __future__ import annotations

import json

LOAD = (
    "infer", "llama3.1-70b", "--gpu", "h200-sxm", "--engine", "tensorrt-llm", "--weights", "fp8",
    "--input", "922", "--output", "922", "--input-cv", "0.064", "--output-cv", "0.064",
    "--concurrency", "4", "--num-requests", "40", "--tp", "1", "--json",
)  # fmt: skip


def _ttft_tpot(proc) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    assert proc.returncode == 0, proc.stderr
    o = json.loads(proc.stdout)["options"][0]
    return o["ttft_ms"], o["tpot_ms"]


def test_batch_wait_of_a_launch_lengthens_ttft_at_light_load(gpuscale) -> None:
    # InferenceX's 70b_fp8_h200_trt_slurm.sh on 1k/1k TP1: 20 iterations of batch waiting.
    base = _ttft_tpot(gpuscale(*LOAD, "--engine-options", "max_num_batched_tokens=16384"))
    wait = _ttft_tpot(
        gpuscale(
            *LOAD,
            "--engine-options",
            "max_num_batched_tokens=16384,batch_wait_timeout_iters=20",
            "--engine-options",
            "batch_wait_max_tokens_ratio=0.9",
        )
    )
    assert 15 * wait[1] < wait[0] - base[0] < 21 * wait[1]


def test_bad_engine_options_exit_2_with_one_line(gpuscale) -> None:
    for bad in ("foo=1", "max_num_seqs", "memory_fraction=high", "max_num_seqs=0"):
        proc = gpuscale(*LOAD, "--engine-options", bad)
        assert proc.returncode == 2, bad
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    static = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h200-sxm", "--engine-options", "max_num_seqs=4"
    )
    assert static.returncode == 2 and "under load" in static.stderr


SGLANG = (
    "infer", "llama3.1-8b", "--gpu", "h200-sxm", "--engine", "sglang", "--input", "4000",
    "--output", "200", "--concurrency", "32", "--json",
)  # fmt: skip


def test_sglang_mixed_chunks_and_prefill_limit_split_the_start_burst(gpuscale) -> None:
    # --enable-mixed-chunk --max-prefill-tokens 5500 (AIConfigurator's generator for ISL 4000):
    # the 32 prompts no longer all run ahead of every decode, so the mean TTFT falls and the
    # TPOT carries the other prompts' chunks.
    base = _ttft_tpot(gpuscale(*SGLANG))
    opts = "mixed_chunk=true,max_prefill_tokens=5500"
    mixed = _ttft_tpot(gpuscale(*SGLANG, "--engine-options", opts))
    assert mixed[0] < base[0] and mixed[1] > base[1]
    vllm = gpuscale(*SGLANG[:5], "vllm", *SGLANG[6:], "--engine-options", "mixed_chunk=true")
    assert vllm.returncode == 2 and "sglang" in vllm.stderr
    assert len(vllm.stderr.strip().splitlines()) == 1


LIGHT_SGLANG = (
    "infer", "llama3.1-8b", "--gpu", "h200-sxm", "--engine", "sglang", "--input", "922",
    "--output", "922", "--input-cv", "0.064", "--output-cv", "0.064", "--concurrency", "4",
    "--num-requests", "40", "--json",
)  # fmt: skip


def test_sglang_recv_interval_holds_new_requests_for_the_poll(gpuscale) -> None:
    # --scheduler-recv-interval 10 (InferenceX's B200/B300 SGLang scripts below C = 16): at
    # light load nearly every new request waits ~4.5 decode iterations more for the next poll.
    # The launch without the flag is priced in process (one subprocess keeps the test cheap).
    from gpuscale.api import infer

    light = dict(input_len=922, output_len=922, input_cv=0.064, output_cv=0.064, concurrency=4)
    base = infer("llama3.1-8b", gpu="h200-sxm", engine="sglang", num_requests=40, **light)
    b = base.to_dict()["options"][0]
    polled = _ttft_tpot(gpuscale(*LIGHT_SGLANG, "--engine-options", "recv_interval=10"))
    assert 3.5 * b["tpot_ms"] < polled[0] - b["ttft_ms"] < 5.0 * b["tpot_ms"]
