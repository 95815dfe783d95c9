"""Engine options each measured serving row's launch set where they differ from the engine
defaults: InferenceX's launch scripts (:data:`INFERENCEX_LAUNCHES` and its TensorRT-LLM and
Llama-70B scripts), AIConfigurator's generator (:func:`aic_generator_launch`), the engine version
alone (:func:`engine_version_options`), the KV-cache dtype of the disaggregated recipes
(:func:`disagg_kv_dtype`) and the SGLang memory fraction and KV-cache dtype a launch states
(:func:`stated_memory`, :func:`stated_kv_cache_dtype`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuscale import catalog
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism, deepgemm_moe_skipped
from gpuscale.validation.inferencex_memory import (
    Fractions,
    stated_fraction,
    stated_kv_cache,
)
from gpuscale.validation.serving_fields import (
    AIC_GAP_SOURCE,
    INFERENCEX_EXPORTS,
    INFERENCEX_SOURCES,
    _int,
    measured_day,
    sa_bench,
)
from gpuscale.validation.serving_recipes import (
    Recipes,
    disagg_recipe_entries,
)


def disagg_kv_dtype(r: dict[str, str]) -> dict[str, Any]:
    """The KV-cache dtype a disaggregated InferenceX TensorRT-LLM row's srt-slurm recipe states:
    every DeepSeek-R1 recipe of ``recipes/trtllm/{h100-fp8,h200}/`` (sa-submission-q1-2026;
    read: h200/1k1k/stp/c128_ctx1_gen9_dep8_batch512, h200/8k1k/mtp/c4_ctx1_gen7_tep8_batch32,
    h100-fp8/1k1k/mtp/ctx1_gen3_tep16_batch1, h100-fp8/8k1k/stp/ctx1_gen3_tep16_batch1) sets
    ``kv_cache_config: dtype: fp8`` on both the prefill and the decode workers. Without it
    TensorRT-LLM's ``auto`` would keep the FP8-block checkpoint's 16-bit KV."""
    return {"kv_dtype": "fp8"} if sa_bench(r) and r["backend"] == "trtllm" else {}


INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS = 60
"""InferenceX launches TensorRT-LLM with attention DP as ``attention_dp_config:
{batching_wait_iters: 0, enable_balance: true, timeout_iters: 60}`` (``benchmarks/
dsr1_fp8_h200_trt.sh`` and ``dsr1_fp8_h200_trt_mtp.sh``, whenever ``DP_ATTENTION`` is true)."""


INFERENCEX_LLAMA70B_LAST_DAY = "2025-10-29"
"""InferenceX's Llama-70B launch scripts (``benchmarks/70b_fp8_{h100,h200}_{slurm,docker}.sh``,
``70b_fp8_h200_trt_slurm.sh``; image ``release:1.1.0rc2.post2`` and ``vllm-openai:v0.10.2`` in
``.github/workflows/70b-tmpl.yml``) were removed by b89047d5f "remove llama 70b" (#149) on
2025-10-29; their content was unchanged since 1b563c858 (TensorRT-LLM, 2025-09-18), af4ccd03f
(H100 vLLM, 2025-09-23) and eb282d8f6 (H200 vLLM, 2025-09-27). The rows (``measured=``
2025-10-29) ran those scripts."""


INFERENCEX_LLAMA70B_TRT_MAX_NUM_TOKENS = 16384
"""``trtllm-serve ... --max_num_tokens 16384`` (``70b_fp8_h200_trt_slurm.sh``)."""


INFERENCEX_LLAMA70B_TRT_BATCH_WAIT = {
    "batch_wait_timeout_iters": 20,
    "batch_wait_max_tokens_ratio": 0.9,
}
"""``70b_fp8_h200_trt_slurm.sh`` writes ``batch_wait_max_tokens_ratio: 0.9`` and
``batch_wait_timeout_iters: 20`` into ``llama-config.yml`` when ``ISL == 1024 && OSL == 1024
&& TP < 8`` ("For 1k/1k, use batch_wait_max_tokens_ratio and batch_wait_timeout_iters will
improve the performance, by default they are all zeros"); the other shapes get neither."""


def _inferencex_llama70b(r: dict[str, str]) -> bool:
    day = measured_day(r)
    return (
        r["mode"] == "agg"
        and r["silicon_data_source"].startswith(INFERENCEX_EXPORTS)
        and r["model_path"] == "meta-llama/Llama-3.1-70B"
        and "" < day <= INFERENCEX_LLAMA70B_LAST_DAY
    )


INFERENCEX_DSR1_TRT_MEMORY_FRACTION = 0.75
"""``kv_cache_config: {dtype: fp8, free_gpu_memory_fraction: 0.75}`` in InferenceX's
DeepSeek-R1 H200 TensorRT-LLM script (``benchmarks/dsr1_fp8_h200_trt_slurm.sh`` at e06929c70
and 008b91a9d, the scripts of the 2025-11-02 and 2026-01-14 runs; ``dsr1_fp8_h200_trt.sh`` at
d8cc89778, 2026-01-28)."""


INFERENCEX_DSR1_TRT_FLOOR_FROM = "2026-01-28"
"""The same scripts launch ``--max_num_tokens=$(( (CONC + ISL + 64 + 63) / 64 * 64 ))``: room
for one prompt and the running decodes per iteration. From d8cc89778 (the 2026-01-28 runs) the
script raises it to at least 8192 (``MAX_NUM_TOKENS > 8192 ? MAX_NUM_TOKENS : 8192``)."""


INFERENCEX_TRT_EP_FROM_CONFIG = "2025-11-03"
"""Until InferenceX #145 (17d5e204f, 2025-11-03, "candidate search space": the scripts take
``EP_SIZE`` from the configuration entry), its H200 TensorRT-LLM scripts ran expert parallelism
over all the engine's GPUs: ``dsr1_fp8_h200_trt_slurm.sh`` sets ``EP_SIZE="$TP"`` and launches
``--tp_size=$TP --ep_size=$EP_SIZE``, ``gptoss_fp4_h200_trt_slurm.sh`` launches ``--ep_size=$TP
... --tp_size=$TP`` (both at e06929c70, 2025-11-01; last changed by 9596d23d7, 2025-10-29). The
exports write those runs (``measured=`` 2025-11-02) with ``moe_ep_size`` 1."""


INFERENCEX_GPTOSS_TRT = {"max_num_batched_tokens": 20000, "memory_fraction": 0.85}
"""InferenceX's gpt-oss H200 TensorRT-LLM script (``benchmarks/gptoss_fp4_h200_trt_slurm.sh`` at
e06929c70 and f6a9d0b6a, ``gptoss_fp4_h200_trt.sh`` at d8cc89778: the 2025-11-02, 2025-12-15
and 2026-01-28 runs): ``--max_num_tokens 20000``, ``free_gpu_memory_fraction: 0.85`` and
``kv_cache_config dtype: auto``, which keeps the checkpoint's 16-bit KV cache (openai/
gpt-oss-120b quantizes only its experts, MXFP4; no KV scales); ``--max_batch_size $CONC``
(never binds)."""


INFERENCEX_ATOM_KV_DTYPE = "fp8"
"""KV-cache dtype of InferenceX's ATOM launches: every version of its DeepSeek-R1 MI355X ATOM
scripts from the first (``benchmarks/dsr1_fp{4,8}_mi355x_atom_slurm.sh``, cc35702b3 /
2be3de60f, 2026-01-14) to those of 2026-04-01 (``benchmarks/single_node/
dsr1_fp{4,8}_mi355x_atom[_mtp].sh``, 1aa6aa7db), MTP or not, starts ``atom.entrypoints.
openai_server ... --kv_cache_dtype fp8`` (ATOM's default is bf16); the other flags they state
(``--block-size 16``, ``--max-model-len 10240`` off 1k/1k, ``--enable-expert-parallel`` only
when EP > 1, ``--method mtp``) are ATOM's defaults, a context cap that does not bind, or read
elsewhere (``inferencex_mtp_scripts.csv``)."""
DEEPSEEK_TRT = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")


GPTOSS_TRT = ("openai/gpt-oss-120b",)


INFERENCEX_DSR1_B200_TRT_FLOOR_FROM = "2026-01-21"
"""InferenceX's DeepSeek-R1 B200 TensorRT-LLM scripts (``benchmarks/dsr1_fp{8,4}_b200_trt_slurm.sh``
from 9596d23d7, 2025-10-29, to 2ee1e0018, 2026-01-12) launch ``--max_num_tokens=$(( (CONC + ISL
+ 64 + 63) / 64 * 64 ))``, room for one prompt beside the running decodes, as the H200 scripts
do; 64af5a771 (2026-01-21) raises it to at least 8192 in both, and every later version
(b0c4ed21b ``dsr1_fp{8,4}_b200_trt.sh``, ec7bafaae, 6eecc0e66) keeps that. Their
``kv_cache_config`` states ``dtype: fp8`` and ``free_gpu_memory_fraction: 0.8``
(:data:`INFERENCEX_DSR1_B200_TRT_MEMORY_FRACTION`) for FP8 and FP4 checkpoints alike. Not read:
the MoE backend (DEEPGEMM, TRTLLM, CUTLASS: kernels the model does not tell apart). The FP8
script's own variants from 2026-01-29: :data:`INFERENCEX_DSR1_B200_FP8_TRT_FROM`."""
INFERENCEX_DSR1_B200_TRT_MEMORY_FRACTION = 0.8
INFERENCEX_DSR1_B200_FP8_TRT_FROM = "2026-01-29"
"""InferenceX #594 (ec7bafaae, 2026-01-29) rewrote ``benchmarks/dsr1_fp8_b200_trt.sh``, in
force until 8d81e0bf4 (2026-02-19) only moved it: ``KV_CACHE_FREE_MEM_FRACTION`` 0.8, 0.7 at
1k/8k from concurrency 256 and 0.75 at 8k/1k on TP4; ``DELAY_BATCHING`` at 1k/1k from
concurrency 64, which appends ``batch_wait_timeout_iters: 40`` and
``batch_wait_max_tokens_ratio: 0.8`` (:func:`_dsr1_b200_fp8_trt_variants`). The same change set
the configuration entry's EP to 1 (``{ tp: 8, ep: 1 }`` in ``nvidia-master.yaml``): the
records of that day state ``ep1``, the run of the new script. Not read: its MoE backend and
piecewise CUDA graphs of the prefill (``PIECEWISE_CUDA_GRAPHS`` from concurrency 64 at 1k/1k
and 8k/1k, 128 at 1k/8k), which the engine profile does not switch."""


def _dsr1_b200_fp8_trt_variants(r: dict[str, str], conc: int, tp: int) -> dict[str, Any]:
    """Memory fraction and batch waiting of ``dsr1_fp8_b200_trt.sh`` at ec7bafaae
    (:data:`INFERENCEX_DSR1_B200_FP8_TRT_FROM`)."""
    shape = (r["isl"], r["osl"])
    fraction = INFERENCEX_DSR1_B200_TRT_MEMORY_FRACTION
    if shape == ("1024", "8192") and conc >= 256:
        fraction = 0.7
    elif shape == ("8192", "1024") and tp == 4:
        fraction = 0.75
    out: dict[str, Any] = {"memory_fraction": fraction}
    if shape == ("1024", "1024") and conc >= 64:
        out.update(batch_wait_timeout_iters=40, batch_wait_max_tokens_ratio=0.8)
    return out


def _dsr1_b200_trt_script_layout(r: dict[str, str], conc: int, tp: int) -> dict[str, int]:
    """Expert parallelism and attention DP as the DeepSeek-R1 B200 TensorRT-LLM scripts at
    9596d23d7 (2025-10-29, in force until the configuration entry chose them,
    ``INFERENCEX_TRT_EP_FROM_CONFIG``) set them from the shape and concurrency.
    ``dsr1_fp8_b200_trt_slurm.sh``: ``EP_SIZE="$TP"``, ``DP_ATTENTION=true`` above concurrency
    32 at 1k/1k and above 64 at 1k/8k and 8k/1k. ``dsr1_fp4_b200_trt_slurm.sh``, on TP4 and TP8
    only (else EP 1, no DP): EP 1 unless above concurrency 32 (TP4, every shape; TP8 at 8k/1k),
    8 (TP8 1k/1k) or 16 (TP8 1k/8k), then EP = TP; attention DP from concurrency 256 at 1k
    prompts, and with EP at 8k/1k. Under attention DP both append ``attention_dp_config: {enable_balance: true, timeout_iters:
    60}``."""
    shape = (r["isl"], r["osl"])
    shapes = (("1024", "1024"), ("1024", "8192"), ("8192", "1024"))
    if r["precision"] == "fp8":
        ep = tp
        dp_above = dict(zip(shapes, (32, 64, 64), strict=True))
        dp = shape in dp_above and conc > dp_above[shape]
    elif tp in (4, 8) and shape in shapes:  # another TP or shape keeps EP 1, no DP
        ep_above = dict(zip(shapes, (8, 16, 32) if tp == 8 else (32, 32, 32), strict=True))
        ep = tp if conc > ep_above[shape] else 1
        dp = conc >= 256 if shape != shapes[2] else conc > 32
    else:
        ep, dp = 1, False
    out = {"ep": ep}
    if dp:
        out.update(attention_dp=tp, adp_balance_timeout_iters=INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS)
    return out


def _dsr1_trt_budget(
    r: dict[str, str], conc: int, floored: bool, memory_fraction: float
) -> dict[str, Any]:
    """KV dtype and engine options of an InferenceX DeepSeek-R1 TensorRT-LLM launch (H200 and
    B200 scripts alike): ``--max_num_tokens=$(( (CONC + ISL + 64 + 63) / 64 * 64 ))``, at least
    8192 once the script floors it (``floored``), ``kv_cache_config: {dtype: fp8,
    free_gpu_memory_fraction: memory_fraction}``."""
    tokens = (conc + int(r["isl"]) + 64 + 63) // 64 * 64
    if floored:
        tokens = max(tokens, 8192)
    options = {"max_num_batched_tokens": tokens, "memory_fraction": memory_fraction}
    return {"kv_dtype": "fp8", "engine_options": options}


def _dsr1_trt_script_dp(r: dict[str, str], conc: int) -> bool:
    """Attention DP as ``dsr1_fp8_h200_trt_slurm.sh`` at e06929c70 chose it before the
    configuration entry did (``INFERENCEX_TRT_EP_FROM_CONFIG``): ``DP_ATTENTION=true`` above
    concurrency 64 at 1k prompts and above 32 at 8k/1k, with ``attention_dp_config:
    {enable_balance: true, timeout_iters: 60}``."""
    isl, osl = r["isl"], r["osl"]
    if isl == "1024" and osl in ("1024", "8192"):
        return conc > 64
    return isl == "8192" and osl == "1024" and conc > 32


def _inferencex_trt(r: dict[str, str], models: tuple[str, ...], system: str = "h200_sxm") -> str:
    """The run day of an aggregated InferenceX TensorRT-LLM row of ``models`` on ``system``,
    else ''."""
    day = measured_day(r)
    ok = (
        r["mode"] == "agg"
        and r["backend"] == "trtllm"
        and r["system"] == system
        and r["silicon_data_source"].startswith(INFERENCEX_SOURCES)
        and r["model_path"] in models
    )
    return day if ok else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """Scheduler settings an InferenceX single-node script gave an engine, for the rows of
    ``models`` on ``system`` measured from ``first`` to ``last`` (the script's content was the
    same over those days: ``source`` names the file and commits)."""

    engine: str
    system: str
    models: tuple[str, ...]
    first: str
    last: str
    options: dict[str, Any]
    kv_dtype: str | None = None
    expert_parallel: bool = False
    """vLLM ``--enable-expert-parallel``: the MoE layers' experts are split over all the engine's
    GPUs (EP = TP x DP) instead of each expert over the TP ranks."""
    source: str


INFERENCEX_LAUNCHES = (
    Launch(
        engine="sglang",
        system="h200_sxm",
        models=("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"),
        first="2026-03-06",
        last="2026-03-25",
        # --max-running-requests 512 (1k/1k) or 256 never binds at the rows' C <= 64. With
        # --disable-radix-cache and the client's --ignore-eos SGLang 0.5.x admits through
        # PrefillAdder.add_one_req_ignore_eos (no rem_input_tokens check before a request,
        # budget_state after it), so the crossing request runs; the model's 0.5.x rule
        # (cohort_sim) starts at most one prompt fewer per batch, ~3% of the limit at 1k.
        options={
            "max_num_batched_tokens": 32768,
            "max_prefill_tokens": 32768,
            "memory_fraction": 0.82,
        },
        source="benchmarks/single_node/dsr1_fp8_h200.sh at 41aff0afc (2026-03-06), unchanged "
        "to 12ba0ae07: --chunked-prefill-size 32768 --max-prefill-tokens 32768 "
        "--mem-fraction-static 0.82 --disable-radix-cache",
    ),
    Launch(
        engine="sglang",
        system="h200_sxm",
        models=("Qwen/Qwen3.5-397B-A17B",),
        first="2026-03-04",
        last="2026-03-09",
        options={"max_num_batched_tokens": 16384, "max_num_seqs": 128, "memory_fraction": 0.8},
        kv_dtype="fp8",
        source="benchmarks/single_node/qwen3.5_fp8_h200.sh at f65d6b4b1 (#855, 2026-03-04), "
        "flags unchanged to f7135ac10: --chunked-prefill-size 16384 --max-running-requests "
        "128 --mem-fraction-static 0.8 --kv-cache-dtype fp8_e4m3 --disable-radix-cache",
    ),
    Launch(
        engine="sglang",
        system="h200_sxm",
        models=("zhipuai/GLM-5",),
        first="2026-03-18",
        last="2026-03-19",
        options={"memory_fraction": 0.85},
        source="benchmarks/single_node/glm5_fp8_h200.sh at ebb48d4bc (#914, 2026-03-18): "
        "--mem-fraction-static 0.85",
    ),
    Launch(
        engine="vllm",
        system="h200_sxm",
        models=("MiniMaxAI/MiniMax-M2.5",),
        first="2026-03-01",
        last="2026-03-12",
        options={"memory_fraction": 0.95},
        source="benchmarks/single_node/minimaxm2.5_fp8_h200.sh at a36346339 and d8ae4d9ec "
        "(2026-03-01) through 64c20b6b5 (2026-03-11): --gpu-memory-utilization 0.95, no expert "
        "parallelism",
    ),
    Launch(
        engine="vllm",
        system="h200_sxm",
        models=("MiniMaxAI/MiniMax-M2.5",),
        first="2026-03-13",
        last="2026-03-28",
        options={"memory_fraction": 0.95},
        expert_parallel=True,
        source="benchmarks/single_node/minimaxm2.5_fp8_h200.sh from 5e2c705d3 (#869, merged "
        "2026-03-13T19:12Z, squashing the PR branch's 4db963a28 'enable ep' and 1fcdea247 'fix ep "
        "condition' of 2026-03-05) through 1d5cae141, 0f78cf4eb and 626932a11 "
        '(2026-03-27): --gpu-memory-utilization 0.95 and, when [ "$EP_SIZE" -ge 1 ], '
        "--enable-expert-parallel; the minimaxm2.5-fp8-h200-vllm search space names no ep "
        "(.github/configs/nvidia-master.yaml: { tp: 8, conc-start: 4, conc-end: 128 }), so "
        "utils/matrix_logic/generate_sweep_configs.py passes its default ep 1 (the rows' "
        "moe_ep_size 1) and the condition holds: the TP8 runs split the experts over 8 GPUs "
        "(-gt 1 only from 0949de54e, 2026-05-05)",
    ),
    Launch(
        engine="vllm",
        system="h100_sxm",
        models=("MiniMaxAI/MiniMax-M2.5",),
        first="2026-03-27",
        last="2026-03-28",
        options={"memory_fraction": 0.90, "max_num_seqs": 256},
        source="benchmarks/single_node/minimaxm2.5_fp8_h100.sh at 1d5cae141, 0f78cf4eb and "
        "626932a11 (2026-03-27): --gpu-memory-utilization 0.90 --max-num-seqs 256",
    ),
    Launch(
        engine="vllm",
        system="h200_sxm",
        models=("moonshotai/Kimi-K2.5",),
        first="2026-03-02",
        last="2026-03-27",
        options={"memory_fraction": 0.95},
        source="benchmarks/single_node/kimik2.5_int4_h200.sh at 749096c4c (2026-03-02) and "
        "79a42e20a (2026-03-27): --gpu-memory-utilization 0.95 (--max-num-seqs $CONC)",
    ),
    Launch(
        engine="vllm",
        system="h200_sxm",
        models=("openai/gpt-oss-120b",),
        first="2025-10-29",
        last="2025-11-02",
        options={"overlap_scheduler": True},
        source="benchmarks/gptoss_fp4_h200_slurm.sh at 9596d23d7 (2025-10-29), unchanged to "
        "e06929c70: config.yaml async-scheduling: true (max-num-batched-tokens 8192, "
        "--gpu-memory-utilization 0.9: the defaults)",
    ),
    Launch(
        engine="vllm",
        system="h100_sxm",
        models=("openai/gpt-oss-120b",),
        first="2025-09-23",
        last="2025-11-02",
        options={"overlap_scheduler": True},
        source="benchmarks/gptoss_fp4_h100_slurm.sh at af4ccd03f (2025-09-23), unchanged to "
        "e06929c70: config.yaml async-scheduling: true",
    ),
)
"""InferenceX's single-node launches of the aggregated SGLang and vLLM rows, where they differ
from the engine profile (SemiAnalysisAI/InferenceX; the flags read at the commits named;
SGLang ``--chunked-prefill-size`` is the token budget, ``--max-running-requests`` the running
cap, ``--mem-fraction-static`` the memory fraction; vLLM ``--gpu-memory-utilization``,
``--max-num-seqs``, ``async-scheduling``, ``--enable-expert-parallel``). The 2026-03-27 vLLM
gpt-oss scripts (``gptoss_fp4_h{100,200}.sh`` at cec542a9a) keep the defaults."""


def _launch(r: dict[str, str]) -> Launch | None:
    day = measured_day(r)
    if r["mode"] != "agg" or not r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
        return None
    for launch in INFERENCEX_LAUNCHES:
        if (
            (r["backend"], r["system"]) == (launch.engine, launch.system)
            and r["model_path"] in launch.models
            and launch.first <= day <= launch.last
        ):
            return launch
    return None


AIC_GENERATOR_VERSIONS = frozenset(
    {
        ("sglang", "0.5.6.post2"),
        ("vllm", "0.12.0"),
        ("trtllm", "1.2.0rc5"),
        ("trtllm", "1.2.0rc6.post1"),
    }
)
"""Engine versions AIConfigurator's generator templated for Dynamo 0.8.0 (ai-dynamo/aiconfigurator
c46a56b02 "add dynamo 0.8.0 backend template", 2026-01-23: ``backend_templates/sglang/
cli_args.0.5.6.post2.j2``, ``vllm/cli_args.0.12.0.j2``, ``trtllm/extra_engine_args.1.2.0rc5``
and ``1.2.0rc6.post1.yaml.j2``); the gap-analysis rows that carry a job id at these versions ran
Dynamo 0.8.0 images on 2026-01-23/25 (docs/investigations/serving-gap-analysis-rows.md,
"AIConfigurator gap-analysis rows")."""


AIC_PREFILL_SLACK = 1500
"""The generator's agg rules (``generator/rule_plugin/{sglang,trtllm}.rule`` from c46a56b02 to
the benchmark copies of 71bb3d00e): SGLang ``max_prefill_tokens = isl + 1500``, TensorRT-LLM
``max_num_tokens = max_batch_size + isl + 1500`` (rounded to blocks only from 1b41ea1b5,
2026-01-29, after those runs)."""


def aic_generator_launch(r: dict[str, str], concurrency: int) -> dict[str, Any]:
    """Engine options of an aggregated AIConfigurator gap-analysis row at a Dynamo 0.8.0 engine
    version: the launch AIConfigurator's generator writes for the configuration it simulated.

    The row's ``batch_size`` is AIConfigurator's simulated batch, which the generator deploys
    as the running cap (``backend_config_mapping.yaml``: max_batch_size -> SGLang
    ``--max-running-requests``, vLLM ``--max-num-seqs``, TensorRT-LLM ``max_batch_size``). Its
    agg rules (``rule_plugin/*.rule`` at c46a56b02) add, for SGLang, ``--enable-mixed-chunk``
    (rule since 07a377923, 2026-01-19) and ``--max-prefill-tokens isl + 1500``; for
    TensorRT-LLM ``max_num_tokens = batch + isl + 1500``, the overlap scheduler on, and the
    template's defaults ``enable_chunked_prefill: false``, ``free_gpu_memory_fraction: 0.80``;
    vLLM's 0.12.0 template passes no token budget. The rows record neither launch nor image:
    this is the generator's launch for the row's engine version and batch, not a recorded one
    (docs/investigations/serving-gap-analysis-rows.md, "Gap-analysis rows: the generator's
    launch"). A cap at or above the client's ``concurrency`` is left out: a closed loop never
    holds more requests than it sends. Read from the row's source, engine, version, lengths,
    batch and concurrency only, never from its measured latency."""
    version = (r["backend"], r["backend_version"])
    if (
        r["mode"] != "agg"
        or AIC_GAP_SOURCE not in r["silicon_data_source"]
        or version not in AIC_GENERATOR_VERSIONS
    ):
        return {}
    opts: dict[str, Any] = {}
    batch = _int(r["batch_size"], 0)
    if 0 < batch < concurrency:
        opts["max_num_seqs"] = batch
    isl = int(r["isl"])
    if r["backend"] == "sglang":
        opts.update(mixed_chunk=True, max_prefill_tokens=isl + AIC_PREFILL_SLACK)
    elif r["backend"] == "trtllm":
        opts.update(chunked_prefill=False, memory_fraction=AIC_TRT_FREE_MEMORY_FRACTION)
        if batch > 0:
            opts["max_num_batched_tokens"] = batch + isl + AIC_PREFILL_SLACK
    return opts


AIC_TRT_FREE_MEMORY_FRACTION = 0.80
"""``kv_cache_config.free_gpu_memory_fraction`` default of the generator's TensorRT-LLM 1.2.0rc5/
1.2.0rc6.post1 templates (c46a56b02)."""


VLLM_DEEPGEMM_MOE_WORST_CASE = frozenset({"0.12.0"})
"""vLLM versions whose block-FP8 MoE on Hopper (and B200/GB200) runs DeepGEMM at every batch
size and computes the worst-case contiguous layout (engine option ``deepgemm_moe_worst_case``; the code path is
``IterationModel.moe_worst_case_tail_rows``, read in the vLLM 0.12.0 wheel). It needs DeepGEMM
in the image: Dynamo's vLLM runtime build installs it after vLLM (``container/deps/vllm/
install_vllm.sh``: a stored copy pinning ``VLLM_VER="0.12.0"`` lists "3. DeepGEMM" and runs
vLLM's ``tools/install_deepgemm.sh``, as ai-dynamo/dynamo 0271c32's version at vLLM 0.19 still
does), the image of AIConfigurator's Dynamo 0.8.0 runs (``AIC_GENERATOR_VERSIONS``). Other
versions are not read: vLLM 0.16 and 0.18 pick other MoE kernels on Hopper
(``profiles/vllm.yaml``)."""


def engine_version_options(r: dict[str, str], model: str, kw: dict[str, Any]) -> dict[str, Any]:
    """Engine options that follow from the row's engine version (any source, aggregated or
    disaggregated): ``VLLM_DEEPGEMM_MOE_WORST_CASE``, where the version's DeepGEMM MoE runs in
    one of the deployment's pools (``iteration.deepgemm_moe_skipped``, the serving model's rule;
    elsewhere the option changes nothing and ``infer`` refuses it). ``model`` and ``kw``: the
    row's ``infer`` model and arguments."""
    if r["backend"] != "vllm" or r["backend_version"] not in VLLM_DEEPGEMM_MOE_WORST_CASE:
        return {}
    spec = catalog.model(model)
    weights = kw.get("weights", "auto")
    fmt = weight_format(catalog.served_weights(model, spec) if weights == "auto" else weights)
    disagg = "prefill_workers" in kw or "decode_workers" in kw
    pars = tuple(
        Parallelism(
            tp=kw.get(f"{pool}tp", 1),
            ep=kw.get(f"{pool}ep", 1),
            attention_dp=kw.get(f"{pool}attention_dp", 1),
        )
        for pool in (("prefill_", "decode_") if disagg else ("",))
    )
    if deepgemm_moe_skipped(spec, fmt, catalog.gpu(kw["gpu"]), pars) is not None:
        return {}
    return {"deepgemm_moe_worst_case": True}


def launch_options(r: dict[str, str], kw: dict[str, Any]) -> dict[str, Any]:
    """Engine options of an aggregated row's launch that differ from the engine defaults, as
    the launch script of its source states them: AIConfigurator's generator for its
    gap-analysis rows at Dynamo 0.8.0 engine versions (``aic_generator_launch``), InferenceX's
    TensorRT-LLM attention-DP
    context balancing, its DeepSeek-R1 and gpt-oss TensorRT-LLM scripts (with the expert
    parallelism of the runs before ``INFERENCEX_TRT_EP_FROM_CONFIG``), and its Llama-70B
    scripts (``INFERENCEX_LLAMA70B_LAST_DAY``). Read from the row's source, engine, model,
    shape and date only, never from its measured latency."""
    out: dict[str, Any] = {}
    if aic := aic_generator_launch(r, kw["concurrency"]):
        return {"engine_options": aic}
    inferencex = r["silicon_data_source"].startswith(INFERENCEX_SOURCES)
    if inferencex and r["backend"] == "trtllm" and kw.get("attention_dp", 1) > 1:
        out["adp_balance_timeout_iters"] = INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
    if inferencex and r["backend"] == "atom":
        return {**out, "kv_dtype": INFERENCEX_ATOM_KV_DTYPE}
    day = _inferencex_trt(r, DEEPSEEK_TRT + GPTOSS_TRT)
    if day and day < INFERENCEX_TRT_EP_FROM_CONFIG:
        out["ep"] = kw["tp"]
        if r["model_path"] in DEEPSEEK_TRT and _dsr1_trt_script_dp(r, kw["concurrency"]):
            out["attention_dp"] = kw["tp"]
            out["adp_balance_timeout_iters"] = INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
    if day and r["model_path"] in DEEPSEEK_TRT:
        return {
            **out,
            **_dsr1_trt_budget(
                r, kw["concurrency"], day >= INFERENCEX_DSR1_TRT_FLOOR_FROM,
                INFERENCEX_DSR1_TRT_MEMORY_FRACTION,
            ),
        }  # fmt: skip
    if day:
        return {**out, "kv_dtype": "bf16", "engine_options": dict(INFERENCEX_GPTOSS_TRT)}
    if b200 := _inferencex_trt(r, DEEPSEEK_TRT, system="b200"):
        if b200 < INFERENCEX_TRT_EP_FROM_CONFIG:
            out.update(_dsr1_b200_trt_script_layout(r, kw["concurrency"], kw["tp"]))
        b200_launch = _dsr1_trt_budget(
            r, kw["concurrency"], b200 >= INFERENCEX_DSR1_B200_TRT_FLOOR_FROM,
            INFERENCEX_DSR1_B200_TRT_MEMORY_FRACTION,
        )  # fmt: skip
        if r["precision"] == "fp8" and b200 >= INFERENCEX_DSR1_B200_FP8_TRT_FROM:
            b200_launch["engine_options"].update(
                _dsr1_b200_fp8_trt_variants(r, kw["concurrency"], kw["tp"])
            )
        return {**out, **b200_launch}
    if launch := _launch(r):
        kv = {"kv_dtype": launch.kv_dtype} if launch.kv_dtype else {}
        # vLLM's expert-parallel group is the whole engine: TP x DP GPUs (``kw["tp"]``).
        ep = {"ep": kw["tp"]} if launch.expert_parallel else {}
        return {**out, **kv, **ep, "engine_options": dict(launch.options)}
    if not _inferencex_llama70b(r):
        return out
    if r["backend"] == "trtllm":
        # llama-config.yml: kv_cache_config dtype fp8 (the profile's FP8-checkpoint default),
        # enable_block_reuse false (no prefix hits, as modelled); cuda_graph_config max 1024.
        opts: dict[str, Any] = {"max_num_batched_tokens": INFERENCEX_LLAMA70B_TRT_MAX_NUM_TOKENS}
        if r["isl"] == r["osl"] == "1024" and kw.get("tp", 1) < 8:
            opts.update(INFERENCEX_LLAMA70B_TRT_BATCH_WAIT)
        return {"kv_dtype": "fp8", "engine_options": opts}
    if r["backend"] == "vllm":
        # config.yaml of 70b_fp8_{h100,h200}_*.sh: "kv-cache-dtype: fp8" (vLLM's "auto" would
        # keep the checkpoint's 16-bit KV), "async-scheduling: true" (the scheduler prepares
        # step n+1 while step n runs), "no-enable-prefix-caching: true",
        # "max-num-batched-tokens: 8192" (the default); --gpu-memory-utilization 0.9 (the
        # default) and --max-num-seqs $CONC (the client's concurrency: never binds).
        return {"kv_dtype": "fp8", "engine_options": {"overlap_scheduler": True}}
    return {}


def add_engine_options(kw: dict[str, Any], options: dict[str, Any]) -> None:
    """Add launch ``options`` to the engine options of reading ``kw`` (later ones win)."""
    kw["engine_options"] = {**(kw.get("engine_options") or {}), **options}


def add_launch(kw: dict[str, Any], args: dict[str, Any]) -> None:
    """Add a launch reader's ``infer`` arguments ``args`` to reading ``kw``: its
    ``engine_options`` merged into ``kw``'s (:func:`add_engine_options`), the others set."""
    kw.update({k: v for k, v in args.items() if k != "engine_options"})
    if options := args.get("engine_options"):
        add_engine_options(kw, options)


def stated_memory(
    raw: dict[str, str], kw: dict[str, Any], recipes: Recipes, fractions: Fractions
) -> tuple[dict[str, Any], str, str]:
    """The SGLang ``--mem-fraction-static`` record ``raw`` (read as ``kw``) launched with, as
    an engine option: (option, note, reason it is not known). Aggregated: the single-node
    script's, by GPU, precision, MTP, TP and day, unless the launch options already state it
    (:data:`INFERENCEX_LAUNCHES`). Disaggregated: the decode workers' (the KV pool the
    model sizes), from the srt-slurm recipe of the one recipes-table entry that runs the
    record's deployment (:func:`disagg_recipe_entries`), else the launch files in
    force on the day (MI355X MoRI-SGLang). It serves both pools; the prefill workers' own
    stated value is read with their chunk, where the table of the recipes' prefill stages holds
    it (engine option ``prefill_memory_fraction``, ``inferencex_multinode.
    recipes_prefill_chunk``). Nothing where no launch on file states it: SGLang's own rule then
    applies."""
    if raw["backend"] != "sglang" or "memory_fraction" in (kw.get("engine_options") or {}):
        return {}, "", ""
    day = measured_day(raw)
    spec = "mtp" if kw.get("speculative") == "mtp" else "none"
    at: dict[str, Any] = {"system": raw["system"], "backend": "sglang", "day": day}
    launch: dict[str, Any] = {
        "model": raw["model_path"],
        "precision": raw["precision"],
        "spec": spec,
    }
    if raw["mode"] == "agg":
        value, note, refused = stated_fraction(fractions, **at, stage="agg", **launch, tp=kw["tp"])
    else:
        paths = {e["recipe"] for e in disagg_recipe_entries(raw, kw["concurrency"], kw, recipes)}
        value, note, refused = None, "", ""
        if len(paths) == 1:
            value, note, refused = stated_fraction(
                fractions, **at, stage="decode", path=paths.pop()
            )
        if value is None and not refused:
            value, note, refused = stated_fraction(fractions, **at, stage="decode", **launch)
    if value is None:
        return {}, "", refused
    return {"memory_fraction": value}, note, ""


def stated_kv_cache_dtype(
    raw: dict[str, str], kw: dict[str, Any], fractions: Fractions
) -> tuple[dict[str, Any], str, str]:
    """The ``--kv-cache-dtype`` an aggregated SGLang record ``raw`` (read as ``kw``) was
    launched with, as the ``kv_dtype`` keyword: (keyword, note, reason it is not known). The
    single-node script's, by GPU, model, precision, MTP, TP and day
    (``inferencex_memory.stated_kv_cache``), unless the reading already states a KV dtype
    (:data:`INFERENCEX_LAUNCHES`). Nothing for ``auto`` (the engine's own rule, as without a
    launch on file) nor for disaggregated records (their recipes' KV dtype is read elsewhere:
    :func:`disagg_kv_dtype`, ``inferencex_api.nvl72_recipe``,
    ``inferencex_multinode.recipes_kv_dtype``, ``inferencex_mori_launch.mori_launch``)."""
    if raw["backend"] != "sglang" or raw["mode"] != "agg" or "kv_dtype" in kw:
        return {}, "", ""
    value, note, refused = stated_kv_cache(
        fractions,
        system=raw["system"],
        backend="sglang",
        day=measured_day(raw),
        model=raw["model_path"],
        precision=raw["precision"],
        spec="mtp" if kw.get("speculative") == "mtp" else "none",
        tp=kw["tp"],
    )
    if value is None or value == "auto":
        return {}, "", refused
    return {"kv_dtype": value}, note, ""
