"""`gpuscale infer` under load, disaggregated and --search, through the real entry point."""

from __future__ import annotations

import json

import pytest

SERVING_KEYS = {
    "mode", "gpus", "fits", "memory_per_gpu_gib", "kv_cache_tokens_per_rank",
    "ttft_ms", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "tpot_ms", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "tpot_definition",
    "e2e_s", "e2e_s_p50", "e2e_s_p90", "e2e_s_p99",
    "requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
    "kv_cache_occupancy", "preemptions_per_request", "running_requests_per_rank",
    "queue_wait_ms", "saturated", "iteration_ms", "gemm_precision", "weight_only", "notes",
    "tp", "pp", "ep", "attention_dp", "replicas", "nodes", "gpus_per_node",
}  # fmt: skip


def test_json_key_snapshot_of_the_serving_contract(gpuscale) -> None:
    proc = gpuscale(
        "infer", "meta-llama/Llama-3.1-70B", "--gpu", "h200-sxm", "--engine", "tensorrt-llm",
        "--weights", "fp8", "--input", "1024", "--output", "1024", "--concurrency", "32",
        "--tp", "4", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {
        "schema_version", "model", "gpu", "engine", "profile", "weights", "input", "output",
        "client", "options", "verdict", "uncertainty",
    }  # fmt: skip
    assert set(doc["options"][0]) == SERVING_KEYS
    assert doc["model"] == "llama3.1-70b" and doc["engine"] == "tensorrt-llm"
    assert doc["profile"] == "tensorrt-llm"


def test_a_profile_laid_over_the_engine_is_named_in_the_result(gpuscale) -> None:
    # --profile lays another cost profile over the engine's; the figures change, so the result
    # names it (it carried the engine's name alone: a fuzz of the CLI, 2026-12-04).
    for extra in ([], ["--concurrency", "8"]):
        proc = gpuscale(
            "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--tp", "1", "--engine", "vllm",
            "--profile", "sglang", "--json", *extra,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert (doc["engine"], doc["profile"]) == ("vllm", "sglang")


def test_disaggregated_contract(gpuscale) -> None:
    proc = gpuscale(
        "infer", "deepseek-ai/DeepSeek-R1", "--gpu", "h200-sxm", "--engine", "sglang",
        "--weights", "fp8_block", "--concurrency", "64", "--prefill-workers", "1",
        "--prefill-tp", "8", "--prefill-ep", "8", "--prefill-attention-dp", "8",
        "--decode-workers", "1", "--decode-tp", "8", "--decode-ep", "8",
        "--decode-attention-dp", "8", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    o = json.loads(proc.stdout)["options"][0]
    assert o["mode"] == "disaggregated" and o["gpus"] == 16
    assert o["ttft_ms"] > 0 and o["tpot_ms_p99"] >= o["tpot_ms"] * 0.99


def test_static_batch_table_still_works(gpuscale) -> None:
    proc = gpuscale("infer", "llama2-7b", "--gpu", "h100-sxm", "--batch", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [o["tp"] for o in json.loads(proc.stdout)["options"]] == [1, 2, 4, 8]


def test_human_table_says_tpot_excludes_first_token(gpuscale) -> None:
    proc = gpuscale(
        "infer", "openai/gpt-oss-120b", "--gpu", "h100-sxm", "--engine", "vllm",
        "--weights", "nvfp4", "--concurrency", "16",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "TPOT excludes the first token" in proc.stdout


def test_search_explains_winner_and_runner_up(gpuscale) -> None:
    proc = gpuscale(
        "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--slo-ttft-ms", "500",
        "--slo-tpot-ms", "40", "--search", "--price", "2.5", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert all(o["tokens_per_dollar"] > 0 for o in doc["options"])
    assert doc["options"] and "winner:" in doc["explanation"] and "Runner-up" in doc["explanation"]
    per_gpu = [o["goodput_tokens_per_s_per_gpu"] for o in doc["options"]]
    assert per_gpu == sorted(per_gpu, reverse=True)
    top = doc["options"][0]
    assert top["ttft_ms_p99"] <= 500 and top["tpot_ms_p99"] <= 40


def test_bad_serving_input_is_one_line(gpuscale) -> None:
    proc = gpuscale(
        "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4", "--weights", "fp9"
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "accepted" in proc.stderr
    proc = gpuscale("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--search")
    assert proc.returncode == 2 and "--gpus" in proc.stderr


def test_search_answers_tp_across_nodes_vs_pipeline_by_fabric(gpuscale) -> None:
    # The article's question: a model that needs two nodes. On InfiniBand NDR, tensor
    # parallelism across the nodes wins; on a slow 100G RoCE fabric, TP inside each node with a
    # pipeline split between the nodes wins.
    def winner(inter: str) -> str:
        proc = gpuscale(
            "infer", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "16", "--input", "1024",
            "--output", "512", "--slo-ttft-ms", "3000", "--slo-tpot-ms", "100", "--search",
            "--inter", inter, "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["options"][0]["label"]

    assert winner("ib-ndr400") == "1 x TP16"
    assert winner("roce-100") == "1 x TP8-PP2"


def test_concurrency_list_sweeps_the_load() -> None:
    import json
    import subprocess
    import sys

    args = ["infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", "1,16,256", "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "gpuscale.cli.main", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    doc = json.loads(out)
    assert doc["load"] == "concurrency"
    assert [p["concurrency"] for p in doc["points"]] == [1, 16, 256]
    import gpuscale

    assert (
        doc
        == gpuscale.infer_sweep(
            "llama3.1-8b", gpu="h100-sxm", concurrency=[1, 16, 256], input_len=512, output_len=256
        ).to_dict()
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuscale.cli.main",
            "infer",
            "llama3.1-8b",
            "--gpu",
            "h100-sxm",
            "--concurrency",
            "4,4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--concurrency" in bad.stderr


def test_an_engine_refuses_a_kv_dtype_it_cannot_store(gpuscale) -> None:
    args = ["infer", "openai/gpt-oss-120b", "--gpu", "h200-sxm", "--tp", "8", "--concurrency"]
    proc = gpuscale(*args, "8", "--engine", "sglang", "--kv-dtype", "int8")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "accepted: auto, bf16, fp16, fp32, fp8" in proc.stderr


def test_search_winner_is_what_infer_prints_for_it(gpuscale) -> None:
    # The search prices the places it shows with infer's own prediction under Poisson arrivals:
    # `infer --request-rate R` of the winner's layout prints the winner's figures.
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", "--weights", "fp8",
        "--input", "1024", "--output", "1024", "--slo-ttft-ms", "500", "--slo-tpot-ms", "30",
        "--search", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    top = doc["options"][0]
    assert top["exact"] and top["mode"] == "disaggregated"
    args = top["infer"]
    layout = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in args.items()
        if k.startswith(("prefill_", "decode_")) and v is not None
    ]
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h100-sxm", "--weights", "fp8", "--input", "1024",
        "--output", "1024", f"--request-rate={args['request_rate']!r}", *layout, "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["options"][0]
    for key, theirs in (
        ("ttft_ms_p99", "ttft_ms_p99"),
        ("tpot_ms_p99", "tpot_ms_p99"),
        ("goodput_tokens_per_s", "output_tokens_per_s"),
    ):
        assert top[key] == pytest.approx(got[theirs], rel=1e-12), key
    # The human table and verdict say the load is a request rate.
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", "--weights", "fp8",
        "--slo-ttft-ms", "500", "--slo-tpot-ms", "30", "--search", "--input-cv", "0.3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "req/s" in proc.stdout and "requests/s of Poisson arrivals" in proc.stdout


def test_a_deployment_that_does_not_fit_shows_no_latency_table(gpuscale) -> None:
    # Fuzz (helper-146): bf16 Llama-3.1-70B on one H100 printed TTFT 3,491,348 ms and a KV cache
    # "75% full" from a pool of one request the GPU cannot hold; only the verdict said so.
    args = ("infer", "llama3.1-70b", "--gpu", "h100-sxm", "--engine", "vllm", "--tp", "1",
            "--input", "1024", "--output", "1024", "--concurrency", "64")  # fmt: skip
    proc = gpuscale(*args)
    assert proc.returncode == 0, proc.stderr
    assert "TTFT ms" not in proc.stdout and "throughput:" not in proc.stdout
    assert "verdict: does not fit" in proc.stdout
    doc = json.loads(gpuscale(*args, "--json").stdout)
    assert doc["options"][0]["fits"] is False


def test_the_gpu_id_is_the_catalogs_whatever_case_it_was_typed_in(gpuscale) -> None:
    # --gpu H100-SXM was accepted and echoed as typed (a fuzz of the CLI, 2026-12-04).
    for extra in ([], ["--concurrency", "8"]):
        proc = gpuscale(
            "infer", "llama3.1-8b", "--gpu", "H100-SXM", "--tp", "1", "--json", *extra
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["gpu"] == "h100-sxm"


def test_the_title_is_one_line_above_the_latency_table(gpuscale) -> None:
    # As the table's own title rich wrapped it to the four narrow columns' width, splitting the
    # model, GPU and engine over three padded lines on an 80-column terminal.
    proc = gpuscale(
        "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--input", "1024",
        "--output", "128", "--concurrency", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == "llama3.1-8b on h100-sxm (vllm, bf16): 1024 in / 128 out, concurrency 4"
    assert "verdict: aggregated on 1 GPU: " in proc.stdout  # not "1 GPUs"


def test_the_static_table_fits_80_columns(gpuscale) -> None:
    # Nine columns with a "tok/s/GPU" header ran one character past an 80-column terminal and
    # rich cut that header to "tok/s/G…".
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h100-sxm", "--batch", "8", "--input", "2048",
        "--output", "256", "--tp", "2,4,8",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80


def test_the_search_table_never_cuts_a_pool_at_80_columns(gpuscale) -> None:
    # The figures' headers left the deployment column ten wide and rich cut every pool label
    # to "TP8-EP8-D…"; it now wraps at spaces only.
    proc = gpuscale(
        "infer", "deepseek-ai/DeepSeek-R1", "--gpu", "h200-sxm", "--gpus", "16",
        "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--search",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    assert "TP8-EP8-DP-attn8" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
