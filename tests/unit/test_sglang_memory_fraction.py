"""SGLang's default memory fraction follows the GPU, TP, DP attention and MTP; a stated
``--mem-fraction-static`` (InferenceX's launches, ``inferencex_mem_fractions.csv``) wins over it;
a default that leaves no KV room is refused with one clear line.

Expected fractions are worked by hand from sglang/srt/server_args.py
``_handle_gpu_memory_settings`` (0.5.6.post2, 0.5.8.post1, 0.5.9 wheels): reserved MiB = 512 +
1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024 (+ 4.5 x graph_bs x dp with
DP attention and graph_bs > 300), at least 10 GiB above 60 GiB, + 2 GiB for an EAGLE draft;
fraction = round((mem - reserved) / mem, 3)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuscale import api, catalog
from gpuscale.catalog.serving_engines import engine, sglang_gpu_tier, sglang_mem_fraction_static
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import kv_pool
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import COLUMNS, read_record
from gpuscale.validation.inferencex_memory import (
    MEM_FRACTIONS_FILE,
    load_fractions,
    stated_fraction,
)
from gpuscale.validation.inferencex_tables import InferenceXTables
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes

H200_MIB = 143771.0  # nvidia-smi memory.total of an H200 SXM
H100_MIB = 81559.0


@pytest.mark.parametrize(
    ("mem", "tp", "dp", "chunk", "spec", "expected"),
    [
        # 512 + 1.5 x 8192 + 2 x 512 + 1024 = 14848 -> 128923 / 143771
        (H200_MIB, 8, 1, 8192, False, 0.897),
        # 512 + 12288 + 2 x 256 + 128 = 13440 -> 130331 / 143771
        (H200_MIB, 1, 1, 8192, False, 0.907),
        # 14848 on 81559 MiB
        (H100_MIB, 8, 1, 8192, False, 0.818),
        # B200: 512 + 1.5 x 16384 + 1024 + 512 = 26624 -> 156735 / 183359
        (183359.0, 4, 1, 16384, False, 0.855),
        # DP attention 8: 14848 + 3 x 512 x 8 + 1.5 x 512 x 8 = 33280 -> 110491 / 143771
        (H200_MIB, 8, 8, 8192, False, 0.769),
        # EAGLE/MTP draft: 14848 + 2048 = 16896 -> 126875 / 143771
        (H200_MIB, 8, 1, 8192, True, 0.882),
        # 10 GiB floor above 60 GiB: 512 + 3072 + 512 + 128 = 4224 -> 10240 -> 71680 / 81920
        (81920.0, 1, 1, 2048, False, 0.875),
        # A100-40GB, no floor: 512 + 6144 + 64 + 128 = 6848 -> 34112 / 40960
        (40960.0, 1, 1, 4096, False, 0.833),
    ],
)
def test_sglang_fraction_matches_the_source_rule_worked_by_hand(
    mem: float, tp: int, dp: int, chunk: int, spec: bool, expected: float
) -> None:
    got = sglang_mem_fraction_static(
        mem, tp=tp, dp_attention=dp, chunked_prefill_size=chunk, speculative=spec
    )
    assert got == pytest.approx(expected, abs=1e-9)


def test_sglang_chunk_and_graph_batch_tiers_follow_gpu_memory() -> None:
    assert sglang_gpu_tier(40960.0, tp=8) == (4096, 160)
    assert sglang_gpu_tier(H100_MIB, tp=2) == (8192, 256)
    assert sglang_gpu_tier(H200_MIB, tp=8) == (8192, 512)
    assert sglang_gpu_tier(183359.0, tp=1) == (16384, 512)


def test_the_profile_picks_the_tier_chunk_and_fraction_per_gpu() -> None:
    eng = engine("sglang")
    h200, b200 = catalog.gpu("h200-sxm"), catalog.gpu("b200")
    assert eng.for_device(h200).max_num_batched_tokens == 8192
    assert eng.for_device(b200).max_num_batched_tokens == 16384
    f_h200 = eng.for_device(h200).static_memory_fraction(
        h200, tp=8, pp=1, dp_attention=1, speculative=False
    )
    f_b200 = eng.for_device(b200).static_memory_fraction(
        b200, tp=4, pp=1, dp_attention=1, speculative=False
    )
    mib = b200.memory_bytes / 2**20
    assert f_b200 == round((mib - (512 + 1.5 * 16384 + 1024 + 512)) / mib, 3)
    assert f_h200 != f_b200
    # Engines without the rule keep their single fraction.
    vllm = engine("vllm")
    assert vllm.static_memory_fraction(b200, tp=4, pp=1, dp_attention=1, speculative=False) == 0.9


def test_a_stated_fraction_replaces_the_rule_in_the_kv_pool() -> None:
    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h200-sxm", 1)
    eng = engine("sglang").for_device(cl.device)
    prof = load_profile(eng.cost_profile)
    fmt = weight_format("bf16")
    work = Workload(input_len=1024.0, output_len=512.0, input_cv=0.0, output_cv=0.0)
    par = Parallelism()
    _, _, used_rule = kv_pool(m, cl, par, fmt, "bf16", prof, eng, work)
    stated = dataclasses.replace(eng, memory_fraction=0.8, static_memory_rule=None)
    _, _, used_stated = kv_pool(m, cl, par, fmt, "bf16", prof, stated, work)
    mem = cl.device.memory_gib
    # Weights, context and activations are the same: the fractions differ by their KV alone.
    assert used_rule - used_stated == pytest.approx((0.907 - 0.8) * mem, rel=1e-6)


def test_sglang_fraction_holds_weights_and_kv_the_activations_live_outside() -> None:
    # SGLang sizes the pool as frac x total minus what loading left in use (ModelRunner
    # profile_max_num_token); its default rule reserves the activations' room outside the
    # fraction. vLLM's gpu_memory_utilization holds the profiled activation peak too.
    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h200-sxm", 1)
    work = Workload(input_len=1024.0, output_len=512.0, input_cv=0.0, output_cv=0.0)
    fmt = weight_format("bf16")

    def pool(name: str, budget: int) -> float:
        # A stated fraction (the default rule itself reserves more room for a larger chunk).
        eng = dataclasses.replace(
            engine(name).for_device(cl.device), max_num_batched_tokens=budget,
            memory_fraction=0.85, static_memory_rule=None,
        )  # fmt: skip
        kv, _, _ = kv_pool(
            m, cl, Parallelism(), fmt, "bf16", load_profile(eng.cost_profile), eng, work
        )
        return kv

    assert pool("sglang", 32768) == pytest.approx(pool("sglang", 2048), rel=1e-12)
    assert pool("vllm", 32768) < pool("vllm", 2048)


SERVING = DATA_DIR / "serving"
FRACTIONS = load_fractions(SERVING / MEM_FRACTIONS_FILE)
RECIPES = load_recipes(SERVING / RECIPES_FILE)


def _fraction(**kw: object) -> float | None:
    base: dict[str, object] = {"backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
    value, _, refused = stated_fraction(FRACTIONS, **{**base, **kw})  # type: ignore[arg-type]
    assert not refused
    return value


def test_inferencex_scripts_state_their_fraction_by_gpu_tp_and_day() -> None:
    # benchmarks/single_node/dsr1_fp8_b200.sh (1d29967c4 on): MEM_FRAC_STATIC=0.82 at TP 8,
    # 0.95 at TP 4; before it one 0.82 for every TP.
    at = {"system": "b200", "precision": "fp8", "stage": "agg"}
    assert _fraction(**at, day="2026-03-25", tp=8) == 0.82
    assert _fraction(**at, day="2026-03-25", tp=4) == 0.95
    assert _fraction(**at, day="2025-11-18", tp=4) == 0.82
    # The MTP script is its own line: 0.82 (dsr1_fp8_b200_mtp.sh).
    assert _fraction(**at, day="2026-03-25", tp=8, spec="mtp") == 0.82
    # FP4 0.85 (dsr1_fp4_b200.sh), AMD 0.8 (dsr1_fp8_mi355x.sh).
    assert _fraction(system="b200", precision="fp4", stage="agg", day="2025-11-10", tp=4) == 0.85
    assert _fraction(system="mi355x", precision="fp8", stage="agg", day="2026-05-03", tp=8) == 0.8
    # MoRI-SGLang (amd_utils/models.yaml from 8d81e0bf4, 2026-02-19): decode 0.85, prefill 0.8;
    # nothing on file before it.
    mori = {"system": "mi355x", "precision": "fp4", "spec": "mtp"}
    assert _fraction(**mori, stage="decode", day="2026-03-13") == 0.85
    assert _fraction(**mori, stage="prefill", day="2026-03-13") == 0.8
    assert _fraction(**mori, stage="decode", day="2026-02-13") is None
    # A recipe by path: h100-fp8-1p1d-max-dep-mtp decode 0.85, prefill 0.6.
    path = "recipes/h100/1k1k/mtp/h100-fp8-1p1d-max-dep-mtp.yaml"
    assert _fraction(system="h100_sxm", stage="decode", day="2026-02-13", path=path) == 0.85
    assert _fraction(system="h100_sxm", stage="prefill", day="2026-02-13", path=path) == 0.6


def test_launches_that_disagree_leave_the_fraction_unknown() -> None:
    line = {k: "" for k in FRACTIONS[0]}
    line.update(
        system="b200", backend="sglang", model="m", precision="fp8", spec="none", mode="agg",
        stage="agg", from_day="2026-01-01", to_day="2026-01-31", path="a.sh", commit="c1",
    )  # fmt: skip
    table = [
        {**line, "mem_fraction_static": "0.8"},
        {**line, "mem_fraction_static": "0.9", "path": "b.sh", "from_day": "2026-01-31"},
    ]
    at = {"system": "b200", "backend": "sglang", "stage": "agg", "model": "m", "precision": "fp8"}
    assert stated_fraction(table, **at, day="2026-01-15")[0] == 0.8
    value, _, refused = stated_fraction(table, **at, day="2026-01-31")
    assert value is None and "a.sh@c1, b.sh@c1" in refused and "[0.8, 0.9]" in refused


def _record(**kw: str) -> dict[str, str]:
    """An H100 Dynamo-SGLang MTP record of InferenceX's 2026-02-13 sweep (1k/1k at 64)."""
    r = dict.fromkeys(COLUMNS, "")
    r.update(
        page_offset="0", hardware="h100", framework="dynamo-sglang", model="dsr1",
        precision="fp8", spec_method="mtp", disagg="true", is_multinode="true",
        prefill_tp="16", prefill_ep="1", prefill_dp_attention="false", prefill_num_workers="1",
        decode_tp="16", decode_ep="16", decode_dp_attention="true", decode_num_workers="1",
        num_prefill_gpu="16", num_decode_gpu="16", isl="1024", osl="1024", conc="64",
        image="lmsysorg/sglang:v0.5.8-cu130", date="2026-02-13", run_url="1/1",
    )  # fmt: skip
    for k in ("mean_ttft", "median_ttft", "p99_ttft", "mean_tpot", "median_tpot", "p99_tpot"):
        r[k] = "1"
    r.update(kw)
    return r


def test_held_out_records_use_the_fraction_their_launch_stated() -> None:
    # The entry's recipe (inferencex_disagg_recipes.csv) is h100-fp8-1p1d-max-dep-mtp: decode
    # 0.85, the KV pool the model sizes.
    row = read_record(_record(), InferenceXTables(recipes=RECIPES, fractions=FRACTIONS))
    assert row.expressible and row.kwargs["engine_options"]["memory_fraction"] == 0.85
    assert any("h100-fp8-1p1d-max-dep-mtp.yaml@616191ca7" in n for n in row.assumptions)
    # Without the table SGLang's own rule applies (no option).
    assert "engine_options" not in read_record(_record(), InferenceXTables(recipes=RECIPES)).kwargs
    # Aggregated B200 FP8 at TP 4: the script's 0.95.
    agg = _record(
        hardware="b200", framework="sglang", spec_method="none", disagg="false",
        is_multinode="false", prefill_tp="4", prefill_ep="1", prefill_dp_attention="false",
        decode_tp="4", decode_ep="1", decode_dp_attention="false", num_prefill_gpu="4",
        num_decode_gpu="4", isl="8192", date="2026-03-25", image="lmsysorg/sglang:v0.5.9-cu130",
    )  # fmt: skip
    # (The script's other launch options, inferencex_sglang_launch, ride along.)
    assert (
        read_record(agg, InferenceXTables(fractions=FRACTIONS)).kwargs["engine_options"][
            "memory_fraction"
        ]
        == 0.95
    )


H100_DEP16 = {
    "gpu": "h100-sxm", "engine": "sglang", "input_len": 1024, "output_len": 1024,
    "concurrency": 64, "prefill_workers": 1, "prefill_tp": 16, "decode_workers": 1,
    "decode_tp": 16, "decode_ep": 16, "decode_attention_dp": 16, "speculative": "mtp",
    "draft_tokens": 2,
}  # fmt: skip


def test_a_default_fraction_without_kv_room_is_refused_with_one_line() -> None:
    # H100 TP16 DP16 with an EAGLE draft: reserved 512 + 1.5 x 8192 + 2 x 512 + 16 x 128
    # + 4.5 x 512 x 16 + 2048 = 54,784 MiB of 81,559 -> 0.328, below the FP8 weights per GPU.
    with pytest.raises(InputError) as err:
        api.infer("deepseek-r1", **H100_DEP16)  # type: ignore[arg-type]
    msg = str(err.value)
    assert err.value.field == "engine_options" and "\n" not in msg
    assert "default mem_fraction_static (0.328" in msg and "TP 16, attention DP 16, MTP" in msg
    assert "leaves the decode workers room" in msg and "memory_fraction=F" in msg
    # Engines without the rule keep their single fraction and are not checked.
    assert engine("vllm").static_memory_rule is None


def test_a_stated_fraction_wins_over_the_default_rule() -> None:
    res = api.infer(
        "deepseek-r1",
        **H100_DEP16,
        engine_options={"memory_fraction": 0.85},  # type: ignore[arg-type]
    )
    assert res.prediction.fits and res.prediction.kv_tokens_per_rank > 2048


def test_weights_that_fit_no_fraction_are_not_blamed_on_it() -> None:
    # DeepSeek-R1 in BF16 (~1.3 TB) on 8 H200s: no fraction makes room, so the answer is the
    # one every engine gives (fits false, the note says why), not the fraction's refusal.
    res = api.infer(
        "deepseek-r1", gpu="h200-sxm", engine="sglang", weights="bf16", tp=8, concurrency=4
    )
    assert not res.prediction.fits


@pytest.mark.parametrize("engine_name", ["sglang", "vllm"])
def test_a_stated_fraction_without_kv_room_is_refused_naming_it(engine_name: str) -> None:
    # Llama-3.1-70B BF16 on two H100s: ~70 GB of weights per GPU; 0.4 of the memory holds
    # less than the weights, while the whole GPU leaves room for thousands of KV tokens. The
    # engines stop at start-up (SGLang "increase --mem-fraction-static", vLLM "try increasing
    # gpu_memory_utilization"); before, this was a prediction with `fits` false and the advice
    # to add GPUs or quantize, which blamed the deployment for the launch's fraction.
    kw: dict[str, Any] = {"gpu": "h100-sxm", "engine": engine_name, "tp": 2, "concurrency": 4}
    with pytest.raises(InputError) as err:
        api.infer("llama3.1-70b", **kw, engine_options={"memory_fraction": 0.4})
    msg = str(err.value)
    assert err.value.field == "engine_options" and "\n" not in msg
    assert "memory_fraction=0.4 leaves the engine room for 0 KV tokens" in msg
    assert "a larger fraction makes room" in msg
    roomy = api.infer("llama3.1-70b", **kw, engine_options={"memory_fraction": 0.9})
    assert roomy.prediction.fits


def test_a_stated_fraction_is_not_blamed_when_no_fraction_fits() -> None:
    # One H100 cannot hold Llama-3.1-70B's BF16 weights at any fraction: the prediction says
    # so (fits false), not the fraction's refusal.
    res = api.infer(
        "llama3.1-70b", gpu="h100-sxm", engine="vllm", tp=1, concurrency=4,
        engine_options={"memory_fraction": 0.4},
    )  # fmt: skip
    assert not res.prediction.fits


@pytest.mark.parametrize(
    ("model", "gpu", "engine", "tp"),
    [
        ("llama3.1-70b", "h100-sxm", "sglang", 2),
        ("llama3.1-70b", "h100-sxm", "vllm", 2),
        ("deepseek-r1", "h200-sxm", "sglang", 8),
        ("gpt-oss-120b", "mi355x", "sglang", 1),
    ],
)
def test_a_whole_memory_fraction_uses_no_more_memory_than_the_gpu_has(
    model: str, gpu: str, engine: str, tp: int
) -> None:
    # Fuzz (helper-146): memory_fraction=1 counted the activations beside a KV pool that took
    # every byte, 81.7 GiB in use on a 79.6 GiB H100, reported as fitting.
    o = api.infer(
        model, gpu=gpu, engine=engine, tp=tp, input_len=1024, output_len=1024, concurrency=64,
        engine_options={"memory_fraction": 1.0},
    ).to_dict()["options"][0]  # fmt: skip
    assert o["fits"]
    assert o["memory_per_gpu_gib"] <= catalog.gpu(gpu).memory_bytes / 2**30 + 1e-9


def test_a_prefill_pool_without_room_names_the_prefill_workers_own_fraction() -> None:
    # Fuzz (helper-146): the refusal for the prefill workers named memory_fraction, which sets
    # both pools; SGLang launches state the prefill workers' apart (prefill_memory_fraction).
    kw: dict[str, Any] = dict(
        gpu="mi355x", engine="sglang", weights="fp8_block", input_len=7372, output_len=922,
        concurrency=4, prefill_workers=1, prefill_tp=8, decode_workers=2, decode_tp=8,
        decode_ep=8, engine_options={"max_num_batched_tokens": 262144},
    )  # fmt: skip
    with pytest.raises(InputError, match="leaves the prefill workers room") as err:
        api.infer("deepseek-r1", **kw)
    assert "--engine-options prefill_memory_fraction=F" in str(err.value)
    # the rule's fraction is below 0 here (a 262,144-token chunk's reserve): said as such
    assert "(-0.344 on AMD Instinct MI355X 288GB" in str(err.value)
    assert "below 0: its reserve for the token budget exceeds the GPU" in str(err.value)
    fixed = kw | {
        "engine_options": {
            "max_num_batched_tokens": 262144,
            "prefill_memory_fraction": 0.8,
            "memory_fraction": 0.8,
        }
    }
    assert api.infer("deepseek-r1", **fixed).to_dict()["options"][0]["fits"]


def test_prefill_workers_that_cannot_hold_a_prompt_do_not_fit() -> None:
    # Review (helper-148): only the decode pool decided ``fits``; bf16 Llama-3.1-70B prefill
    # workers on one H100 each (133.8 GiB) were shown as fitting, priced with a 1.7 s TTFT.
    res = api.infer(
        "llama3.1-70b", gpu="h100-sxm", engine="vllm", weights="bf16", prefill_workers=1,
        prefill_tp=1, decode_workers=1, decode_tp=8, concurrency=8,
    )  # fmt: skip
    assert not res.prediction.fits
    assert "prefill workers hold no room for one prompt's KV cache" in res.prediction.notes
    assert res.to_dict()["verdict"].startswith("does not fit")
