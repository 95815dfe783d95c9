"""AMD's ATOM as a serving engine (``serving_engines.yaml`` ``atom``): prompts taken whole
within its token budget, no pipeline stages, at most 8-way tensor parallelism per attention
group, no chunked-prefill or overlap switch, and aggregated only (its disaggregated hand-off is
not read). ``infer`` refuses what ATOM cannot run in one line; the SLO search never offers it."""

from __future__ import annotations

import pytest

from gpuscale.api.serving import ENGINES, infer
from gpuscale.api.serving_search import search
from gpuscale.catalog.serving_engines import engine
from gpuscale.errors import InputError

R1 = "deepseek-ai/DeepSeek-R1"
BASE = {
    "gpu": "mi355x",
    "engine": "atom",
    "weights": "fp8_block",
    "kv_dtype": "fp8",
    "input_len": 1024,
    "output_len": 256,
    "concurrency": 16,
}


def test_atom_is_an_engine_of_the_catalog_and_of_the_api() -> None:
    assert "atom" in ENGINES
    eng = engine("atom")
    assert not eng.disaggregated and not eng.chunked_prefill and not eng.pipeline_parallel
    assert all(engine(e).disaggregated for e in ("tensorrt-llm", "vllm", "sglang"))


def test_atom_aggregated_prediction() -> None:
    o = infer(R1, tp=8, **BASE).to_dict()["options"][0]
    assert o["gpus"] == 8 and o["ttft_ms"] > 0 and o["tpot_ms"] > 0
    # The decode step of one engine is the same whichever scheduler feeds it: ATOM and SGLang
    # share the kernel profile, so at one layout and load their TPOT agree to a few percent.
    sglang = infer(R1, tp=8, **{**BASE, "engine": "sglang"}).to_dict()["options"][0]
    assert o["tpot_ms"] == pytest.approx(sglang["tpot_ms"], rel=0.1)


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        # On a (hypothetical) 16-GPU node: within the node, but past ATOM's TP assert.
        (
            {"tp": 16, "gpus_per_node": 16},
            "at most 8-way tensor parallelism per attention group, got 16",
        ),
        ({"tp": 8, "pp": 2}, "engine atom has no pipeline parallelism; accepted: --pp 1"),
        # Attention DP and EP over part of the instance: ATOM has no such split.
        ({"tp": 8, "attention_dp": 2}, "accepted: --attention-dp 1 or 8"),
        ({"tp": 8, "ep": 4}, "accepted: --ep 1 or 8"),
        # 16 attention-DP ranks would span two nodes; ATOM's DP group meets on 127.0.0.1.
        ({"tp": 16, "attention_dp": 16, "ep": 16}, "runs one instance within one node of 8 GPUs"),
        (
            {"prefill_workers": 1, "decode_workers": 1, "prefill_tp": 8, "decode_tp": 8},
            "engine atom is modelled aggregated only",
        ),
        ({"tp": 8, "engine_options": {"chunked_prefill": True}}, "not atom's"),
        ({"tp": 8, "engine_options": {"overlap_scheduler": False}}, "not atom's"),
        ({"tp": 8, "engine_options": {"max_prefill_tokens": 4096}}, "not atom's"),
        ({"tp": 8, "input_len": 20000}, "below the 20000-token prompt"),
    ],
)
def test_what_atom_cannot_run_is_refused_in_one_line(layout: dict, words: str) -> None:
    with pytest.raises(InputError) as err:
        infer(R1, **{**BASE, **layout})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_atom_accepts_what_it_can_run() -> None:
    # One node's 8 GPUs as 8 attention-DP ranks with experts over all 8, twice (replicas),
    # and a stated budget that takes the long prompt whole.
    infer(R1, **{**BASE, "tp": 8, "attention_dp": 8, "ep": 8, "replicas": 2})
    infer(
        R1,
        **{
            **BASE,
            "tp": 8,
            "input_len": 20000,
            "engine_options": {"max_num_batched_tokens": 20000},
        },
    )


def test_an_unchunked_engine_refuses_a_prompt_above_its_default_budget() -> None:
    # TensorRT-LLM without chunked prefill: "The sum of prompt length ... should not exceed
    # max_num_tokens" (tensorrt_llm/llmapi/llm.py _check_arguments); vLLM chunks it.
    kw = {**BASE, "engine": "tensorrt-llm", "gpu": "h200-sxm", "tp": 8, "input_len": 10000}
    with pytest.raises(InputError, match="tensorrt-llm's max_num_batched_tokens 8192"):
        infer(R1, **kw)
    infer(R1, **{**kw, "engine": "vllm"})


def test_the_search_offers_atom_only_layouts_it_can_run() -> None:
    r = search(
        R1, gpu="mi355x", gpus=16, engine="atom", weights="fp8_block",
        input_len=1024, output_len=1024, slo_ttft_ms=2000, slo_tpot_ms=50,
    )  # fmt: skip
    assert r.ranked
    for s in r.ranked:
        c = s.cand
        assert c.mode != "disaggregated" and c.prefill is None
        assert c.par.pp == 1 and c.par.tp <= 8
    # The same search on SGLang does offer layouts ATOM cannot run.
    sg = search(
        R1, gpu="mi355x", gpus=16, engine="sglang", weights="fp8_block",
        input_len=1024, output_len=1024, slo_ttft_ms=2000, slo_tpot_ms=50,
    )  # fmt: skip
    assert any(s.cand.prefill is not None or s.cand.par.tp > 8 for s in sg.ranked)
    # The search takes no engine options: its remedy names what it can do instead.
    with pytest.raises(InputError, match="below the 20000-token prompt") as err:
        search(R1, gpu="mi355x", gpus=8, engine="atom", input_len=20000, output_len=16)
    assert "search an engine that chunks prompts (vllm, sglang)" in str(err.value)
    assert "--engine-options max_num_batched_tokens" in str(err.value)


def test_atom_keeps_sliding_window_layers_at_full_length() -> None:
    # ATOM sizes a KV block over every layer (model_runner.py block_bytes): gpt-oss's
    # sliding-window half holds the whole context, so the pool holds about half the tokens
    # vLLM's per-window manager holds in the same memory rule (both: 0.9 of total memory for
    # weights, KV and the activation peak).
    kw = {"gpu": "mi355x", "tp": 1, "input_len": 8192, "output_len": 1024, "concurrency": 64}
    atom = infer("openai/gpt-oss-120b", engine="atom", **kw).to_dict()["options"][0]
    vllm = infer("openai/gpt-oss-120b", engine="vllm", **kw).to_dict()["options"][0]
    ratio = atom["kv_cache_tokens_per_rank"] / vllm["kv_cache_tokens_per_rank"]
    assert 0.45 < ratio < 0.6


def test_atom_auto_kv_is_its_bf16_default_whatever_the_checkpoint() -> None:
    # A ModelOpt FP8 checkpoint declares an FP8 KV cache; TensorRT-LLM, vLLM and SGLang follow
    # it under "auto", ATOM keeps its --kv_cache_dtype default (bf16).
    kw = {"gpu": "mi355x", "tp": 1, "input_len": 1024, "output_len": 128, "concurrency": 4}
    model = "nvidia/Llama-3.1-70B-Instruct-FP8"

    def tokens(engine: str, kv: str) -> float:
        o = infer(model, engine=engine, kv_dtype=kv, **kw).to_dict()["options"][0]
        return o["kv_cache_tokens_per_rank"]

    assert tokens("atom", "auto") == tokens("atom", "bf16") < 0.6 * tokens("atom", "fp8")
    assert tokens("sglang", "auto") == tokens("sglang", "fp8")


@pytest.mark.parametrize(
    ("name", "gpu", "accepted"),
    [
        ("atom", "h200-sxm", "accepted: tensorrt-llm, vllm, sglang"),
        ("tensorrt-llm", "mi355x", "accepted: vllm, sglang, atom"),
    ],
)
def test_an_engine_is_refused_on_a_vendor_it_does_not_run_on(
    name: str, gpu: str, accepted: str
) -> None:
    # ATOM is built on ROCm and AITER, TensorRT-LLM on CUDA (serving_engines.yaml vendors):
    # refused by infer and by the search, naming the engines that do run there.
    kw = {"input_len": 1024, "output_len": 128}
    with pytest.raises(InputError, match=accepted) as err:
        infer("llama3.1-8b", gpu=gpu, engine=name, concurrency=4, **kw)
    assert err.value.field == "engine"
    with pytest.raises(InputError, match=accepted):
        search("llama3.1-8b", gpu=gpu, gpus=8, engine=name, **kw)
    for other in ("vllm", "sglang"):  # both run on NVIDIA and AMD GPUs
        infer("llama3.1-8b", gpu=gpu, engine=other, concurrency=4, **kw)


def test_atom_computes_shared_prefixes_again_unless_prefix_caching_is_on() -> None:
    # ATOM's --enable_prefix_caching is off by default: a client's shared prefix is computed in
    # every prompt, and the answer says so; turned on, the hit shortens the prefill.
    kw = {**BASE, "tp": 8, "input_len": 4096}
    plain = infer(R1, **kw)
    hit = infer(R1, prefix_hit=0.5, **kw)
    on = infer(R1, prefix_hit=0.5, engine_options={"prefix_caching": True}, **kw)

    def ttft(r: object) -> float:
        return r.to_dict()["options"][0]["ttft_ms"]  # type: ignore[attr-defined]

    assert ttft(hit) == ttft(plain) and ttft(on) < 0.8 * ttft(plain)
    assert any("--prefix-hit 0.5 not applied" in n for n in hit.prediction.notes)
    assert not any("prefix" in n for n in on.prediction.notes)
    # The same switch turns another engine's default reuse off.
    sg = {**kw, "engine": "sglang"}
    off = infer(R1, prefix_hit=0.5, engine_options={"prefix_caching": False}, **sg)
    assert ttft(off) == ttft(infer(R1, **sg))
    assert ttft(infer(R1, prefix_hit=0.5, **sg)) < 0.8 * ttft(off)
    assert any("(engine option prefix_caching=false)" in n for n in off.prediction.notes)


def test_atom_takes_at_most_four_draft_tokens() -> None:
    # Config.__post_init__ raises above 4 (ATOM from 2026-02-25 on, v0.1.2 included).
    kw = {**BASE, "tp": 8, "speculative": "mtp"}
    infer(R1, draft_tokens=4, **kw)
    with pytest.raises(InputError, match="accepted: --draft-tokens 1 to 4") as err:
        infer(R1, draft_tokens=5, **kw)
    assert err.value.field == "draft_tokens"
    infer(R1, draft_tokens=5, **{**kw, "engine": "sglang"})


def test_atom_moe_exchanges_all_to_all_only_with_expert_parallelism() -> None:
    # moe.py: MoRI's all-to-all kernels "when expert parallel is enabled"; without EP the DP
    # group's hidden states are all-gathered and the output reduce-scattered.
    atom = engine("atom")
    assert atom.moe_gathers(1) and not atom.moe_gathers(8)
    assert engine("sglang").moe_gathers(1) and engine("sglang").moe_gathers(8)
    kw = {**BASE, "tp": 8, "attention_dp": 8, "concurrency": 64}
    gathered = infer(R1, ep=1, **kw).to_dict()["options"][0]
    exchanged = infer(R1, ep=8, **kw).to_dict()["options"][0]
    assert gathered["tpot_ms"] != exchanged["tpot_ms"]


def test_the_static_batch_table_takes_atom_as_its_kernel_profile() -> None:
    # It was "unknown profile 'atom'": the static table prices a cost profile, and ATOM's is
    # SGLang's (serving_engines.yaml), so the two tables agree but for the engine's name.
    from gpuscale.api import infer_static

    atom = infer_static("llama3.1-8b", gpu="mi355x", engine="atom").to_dict()
    sglang = infer_static("llama3.1-8b", gpu="mi355x", engine="sglang").to_dict()
    assert atom.pop("engine") == "atom" and sglang.pop("engine") == "sglang"
    assert atom == sglang
