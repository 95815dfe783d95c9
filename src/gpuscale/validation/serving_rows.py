"""Read the measured serving rows (``data/validation/serving``) into the deployment each one ran.

One row of AIConfigurator's ``silicon_sample.csv`` is one benchmark of a real engine. An
aggregated row states its engine's parallelism; a disaggregated row must state its prefill and
decode worker counts as well, or the deployment it measured is unknown: AIConfigurator's own
replay of the file (``tools/accuracy_regression_testing/predict_silicon_sample.py`` at commit
095f58a5, ``REQUIRED_DISAGG_FIELDS``) refuses a disaggregated row without ``prefill_num_workers``
and ``decode_num_workers``, and its InferenceX adapter (``sdk/config_adapter/inferencex.py``)
derives them only from ``num_prefill_gpu`` / ``prefill_num_workers``, fields these rows do not
carry. Each row is read into one of four classes, with every assumption written next to it:

- ``stated``: the row names its workers (or is aggregated);
- ``twin``: the row leaves its workers empty, but the same measurement (same engine, system,
  lengths, concurrency and identical TTFT and TPOT) is also recorded in a row that names them
  (the file holds both the InferenceX CSV export and the AIConfigurator database dump of the
  same runs): the deployment is that row's;
- ``recipe``: worker counts empty and no twin, but InferenceX's configuration at the run date
  (``inferencex_disagg_recipes.csv``) has exactly one entry at the row's engine, system,
  lengths and concurrency whose prefill ``tp``/``ep`` labels are the export's (the export's only
  parallelism fields that agree with every independently known deployment,
  :data:`EXPORT_RELIABLE`): the deployment is that entry's recipe (never chosen by the measured
  latency), with MTP speculative decoding where it is an MTP recipe whose draft count is on file
  (TensorRT-LLM ``_mtpN``; SGLang ``speculative-num-steps`` of the recipes read);
- ``not expressible``: worker counts not stated, no twin and no single entry (the reason names
  the candidate recipes: mostly a plain and an MTP recipe at one key, which nothing in the row
  tells apart), or no client concurrency stated
  (the id's ``_c_`` is empty and ``silicon_data_source`` has no ``silicon_concurrency``; for the
  disaggregated gap-analysis rows AIConfigurator's benchmark swept several concurrencies,
  :data:`AIC_DISAGG_SWEEP`). These
  carry a ``guess`` reading (one worker of each kind; AIConfigurator's decode batch x workers x
  attention-DP as the concurrency) for comparison lines only. Aggregated rows are not
  expressible when their recorded concurrency is the benchmark client's cap rather than the load
  the engine ran (``client_cap_only``), or when the InferenceX sweep that measured them ran both
  an MTP and a plain entry at their shape; their ``guess`` is the row as recorded. A row whose
  sweep ran only an MTP entry there is read as MTP (``inferencex_sweeps``).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.validation.inferencex_memory import (
    MEM_FRACTIONS_FILE,
    Fractions,
    load_fractions,
    stated_fraction,
)
from gpuscale.validation.inferencex_sweeps import (
    SWEEPS_FILE,
    Sweeps,
    load_sweeps,
    speculative_reading,
)

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
STATED, TWIN, NOT_EXPRESSIBLE = "stated", "twin", "not expressible"
TWIN_RTOL = 1e-9
"""Twins are the same measurement written twice, so their TTFT and TPOT agree to the digit."""

LATENCIES = ("silicon_ttft_ms", "silicon_tpot_ms")


def same_latencies(a: dict[str, str], b: dict[str, str]) -> bool:
    """Two rows record the same TTFT and TPOT to the last digit (:data:`TWIN_RTOL`): the test
    every rule that folds records of one run into one measurement uses."""
    return all(math.isclose(float(a[k]), float(b[k]), rel_tol=TWIN_RTOL) for k in LATENCIES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRow:
    """One measured row and the deployment it is read as."""

    id: str
    engine: str
    mode: str
    """``agg`` or ``disagg``."""
    kind: str
    """``stated``, ``twin``, ``recipe`` or ``not expressible`` (module docstring)."""
    reason: str = ""
    """Why a row is not expressible."""
    ttft_ms: float
    tpot_ms: float
    concurrency: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The keyword arguments of ``gpuscale.api.infer`` that express the row (empty when not
    expressible)."""
    guess: dict[str, Any] = field(default_factory=dict)
    """For a row that is not expressible: the reading used before rows were classed, for
    comparison only (never counted with the expressible rows)."""
    assumptions: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict)
    copy_of: str = ""
    """The id of the row whose measurement this row repeats at fewer digits
    (:func:`rounded_copies`); empty for an original."""

    @property
    def expressible(self) -> bool:
        return self.kind != NOT_EXPRESSIBLE


def _int(v: str | None, default: int = 1) -> int:
    return int(v) if v not in ("", None) and int(v) > 0 else default


def parallelism(r: dict[str, str], prefix: str = "") -> dict[str, int]:
    """GPUs per engine instance (``tp``: all GPUs of one stage), attention-DP ranks and EP of
    row ``r``'s aggregated engine (``prefix=""``) or its prefill/decode workers."""
    # aiconfigurator: GPUs per instance = tp * pp * attention_dp; moe_tp * moe_ep spans them.
    tp = _int(r[f"{prefix}tp_size"])
    dp = _int(r[f"{prefix}attention_dp_size"])
    ep = _int(r[f"{prefix}moe_ep_size"])
    moe = _int(r[f"{prefix}moe_tp_size"]) * ep
    launch = re.search(r"_tp(\d+)_ep(\d+)_", r["id"])
    flags = (int(launch.group(1)), int(launch.group(2))) if launch else None
    moe_tp = _int(r[f"{prefix}moe_tp_size"])
    gpu = SYSTEMS.get(r["system"])
    node = catalog.default_gpus_per_node(gpu) if gpu else 0
    if (
        flags is None
        and r["silicon_data_source"].startswith(DB_DUMP)
        and moe_tp > 1
        and node
        and tp * dp > node
    ):
        # AIConfigurator's dump of InferenceX's database writes a launch as the 2026-04-06
        # export does (moe_tp x moe_ep = TP x EP, tp_size x attention_dp the same product) but
        # its ids carry no launch flags: moe_tp is the launch's TP. Its config 181 (TensorRT-LLM
        # DeepSeek-R1 H200, 2025-12-15: tp_size 64, moe 8 x 8) ran InferenceX's
        # `dsr1-fp8-h200-trt` entry of .github/configs/nvidia-master.yaml at f6a9d0b6a,
        # `{ tp: 8, ep: 8 }` on one 8-GPU H200 node (`multinode: false`). Only where the
        # product exceeds one node, as no aggregated engine of the dump's does: within a node,
        # moe_tp x moe_ep = tp_size x attention_dp is also how expert TP x EP writes its GPUs
        # (moe 2 x 4 on 8 GPUs).
        flags = (moe_tp, ep)
    if not prefix and flags and ep > 1:
        gpus, launch_ep = flags
        if tp * dp == moe == gpus * launch_ep and launch_ep > 1:
            # The InferenceX export of 2026-04-06 writes a `--tp 8 --ep 8` launch (8 GPUs) as
            # 64 GPUs: tp_size x attention_dp = moe_tp x moe_ep = TP x EP. The 2026-03-25
            # export of the same measurements (identical TTFT and TPOT) writes 8 GPUs (tp 8,
            # or attention DP 8 with tp 1; moe 1 x 8), so the id's launch flags give the GPUs.
            # The recorded attention width tp_size stays: attention DP = GPUs / tp_size (1
            # where tp_size was written as TP x EP).
            tp_att = min(tp, gpus)
            tp, dp, ep = tp_att, gpus // tp_att, launch_ep
            moe = gpus
    if moe > tp * dp and moe % tp == 0:
        # vLLM rows leave attention_dp empty when --data-parallel-size runs attention DP under
        # an expert group wider than TP: the MoE group size gives the GPUs.
        dp = moe // tp
    return {"tp": tp * dp, "attention_dp": dp, "ep": ep}


def source_fields(r: dict[str, str]) -> dict[str, str]:
    """The ``key=value`` fields of the row's ``silicon_data_source`` (``;``-separated)."""
    out = {}
    for part in r["silicon_data_source"].split(";"):
        key, _, value = part.strip().partition("=")
        out[key] = value
    return out


def measured_day(r: dict[str, str]) -> str:
    """The row's measurement day, ``YYYY-MM-DD`` from ``measured=`` (empty when not stated)."""
    return source_fields(r).get("measured", "")[:10]


def concurrency(r: dict[str, str]) -> int | None:
    """The client's concurrency, or None when the row does not state it.

    ``silicon_concurrency`` (the benchmark client's setting) first. ``batch_size`` is
    AIConfigurator's per-attention-DP-rank batch, not the client's concurrency: its estimator
    reads concurrency = batch_size x attention_dp_size (``aic-core/.../sdk/backends/
    base_backend.py`` line 712, ``global_bs = bs * model.config.attention_dp_size``), and the
    rows agree (e.g. DeepSeek-R1 TP8 attention-DP 8 at silicon_concurrency 256: batch 32)."""
    src = source_fields(r)
    if "silicon_concurrency" in src:
        return int(src["silicon_concurrency"])
    if r["batch_size"]:
        return int(r["batch_size"]) * _int(r["attention_dp_size"])
    return None


def decode_slots(r: dict[str, str]) -> int:
    """AIConfigurator's reading of a disaggregated row's decode batch: its InferenceX adapter
    (``_worker``) sets decode batch = concurrency / (decode workers x attention-DP ranks)."""
    dp = parallelism(r, "decode_")["attention_dp"]
    return _int(r["decode_batch_size"]) * _int(r["decode_num_workers"]) * dp


def _named(r: dict[str, str]) -> bool:
    return bool(r["prefill_num_workers"] and r["decode_num_workers"])


INFERENCEX_EXPORTS = ("source_file=2026-03-25.csv", "source_file=2026-04-06.csv")
"""The InferenceX CSV exports in the file (SOURCES.md)."""
INFERENCEX_RANGE_RATIO = 0.8
"""InferenceX's client draws each request's input and output length uniformly from the integers
[int(L x ratio), L] (``utils/bench_serving/benchmark_serving.py`` ``sample_uniform``) with
``RANDOM_RANGE_RATIO: 0.8`` (``.github/workflows/benchmark-tmpl.yml``, env and input default)."""
INFERENCEX_ROUNDS = 10
"""InferenceX measures ``--num-prompts $((CONC * 10))`` requests after ``--num-warmups
$((2 * CONC))`` (``benchmarks/benchmark_lib.sh`` ``run_benchmark_serving``)."""


DB_DUMP = "db-dump/"
INFERENCEX_SOURCES = (*INFERENCEX_EXPORTS, DB_DUMP)
"""Rows run by InferenceX's workflows: its exports, and AIConfigurator's database dump of the
same runs. Aggregated: 63 of the dump's 78 rows repeat an export row's measurement to the digit
(same engine, system, lengths, concurrency, TTFT and TPOT; SGLang and TensorRT-LLM DeepSeek-R1
written as ``deepseek-ai/DeepSeek-V3``, vLLM MiniMax-M2.5), and every dump row carries an
InferenceX ``workflow_run_id`` and image: they ran InferenceX's scripts and client
(``INFERENCEX_RANGE_RATIO``, ``INFERENCEX_ROUNDS``). Disaggregated: the dump's rows repeat the
exports' measurements to the digit (the ``twin`` class); its images are the
``dynamo-trt``/``dynamo-sglang`` entries of InferenceX ``.github/configs/nvidia-master.yaml``."""
SA_BENCH_ROUNDS = 5
"""InferenceX's multi-node disaggregated runs launch srt-slurm recipes whose ``benchmark.type``
is ``sa-bench`` (e.g. ``recipes/trtllm/h200/1k1k/stp/c64_ctx1_gen9_tep8_batch256_eplb0_mtp0
.yaml``, ishandhanani/srt-slurm branch ``sa-submission-q1-2026``, named by InferenceX
``nvidia-master.yaml`` at 49f8ceee0 and launched as ``srtctl apply -f "$CONFIG_FILE"`` by
``runners/launch_h200-dgxc-slurm.sh``). sa-bench (``src/srtctl/benchmarks/scripts/sa-bench/
bench.sh``) runs a separate warm-up of ``5*C`` prompts first, then measures ``--num-prompts
$((concurrency * 5))`` with ``--request-rate inf --max-concurrency C --random-range-ratio
0.8 --ignore-eos``: five rounds of C requests, lengths uniform over [0.8 L, L]."""


def sa_bench(r: dict[str, str]) -> bool:
    """Whether the row is a disaggregated InferenceX run, measured by sa-bench or a client of
    the same lengths (``disagg_client_rounds`` gives the count of each)."""
    return r["mode"] == "disagg" and r["silicon_data_source"].startswith(INFERENCEX_SOURCES)


DYNAMO_TRTLLM_SWEEP_ROUNDS = 8
"""InferenceX's GB200 Dynamo-TensorRT-LLM runs before srt-slurm launched ai-dynamo/dynamo
``release/0.5.1-rc0.20251105`` ``components/backends/trtllm/performance_sweeps/
benchmark_disagg.slurm`` (SemiAnalysisAI/InferenceX ``runners/launch_gb200-nv.sh`` at 175fe5364,
then ``benchmarks/dsr1_fp4_gb200_dynamo-trt_slurm.sh`` from 93e1b3ca1), which runs
``scripts/bench.sh`` with ``MULTI_ROUND="${MULTI_ROUND:-8}"`` (InferenceX sets none; the
default is 8 in every version of the file on Dynamo's ``main``, 86a4a58e4 2025-08-19 to
cf433e682 2026-01-02, read in zinuga/dynamo). ``bench.sh`` (read at 0857f8c63) warms up with
``multi_round`` prompts at ``--max-concurrency 1``, then measures ``--num-prompts
$((concurrency * multi_round))`` at ``--max-concurrency $concurrency``, ``concurrency`` the
``conc-list`` value x decode servers: eight rounds of C."""
DYNAMO_TRTLLM_SWEEP_LAST_DAY = "2026-01-30"
"""InferenceX 4e9a376bf (#510, merged 2026-01-31T04:24Z) moved GB200 Dynamo-TensorRT-LLM to
``srtctl apply`` of srt-slurm recipes (sa-bench); the runs of earlier days used Dynamo's
``bench.sh`` (:data:`DYNAMO_TRTLLM_SWEEP_ROUNDS`)."""
MORI_BENCH_ROUNDS = 10
"""InferenceX's MI355X MoRI-SGLang disaggregated runs (the only MI355X SGLang disaggregated
framework, ``amd-master.yaml``): from 8d81e0bf4 (#666, 2026-02-19) InferenceX's own
``benchmarks/multi_node/amd_utils/bench.sh`` measures ``--num-prompts $(( $max_concurrency *
$num_prompts_multiplier ))`` with ``submit.sh``'s ``export BENCH_NUM_PROMPTS_MULTIPLIER=10``
(same at 4706e7009 and 4230b97ca), after ``run_benchmark_serving``'s ``--num-warmups
$((2 * max_concurrency))`` (``benchmarks/benchmark_lib.sh``). Before, the launch scripts cloned
billishyahao/sglang_disagg, whose ``bench.sh`` has the same line (every public version,
a309434 2025-12-19 to be693a3 2026-01-08), ``sglang_disagg_server.sh`` at the pinned
14606ff7c passes ``BENCH_NUM_PROMPTS_MULTIPLIER`` (default 10), and ``submit_disagg.sh`` exports
10 in every public version but two intermediate commits of 2026-01-06 (61d3ac2, fef2265: 1,
back to 10 the same day). The pinned commits' ``submit_disagg.sh`` is not public."""


def disagg_client_rounds(r: dict[str, str]) -> int:
    """Rounds of C requests the client of a disaggregated InferenceX row measured, by the
    client its launch ran: Dynamo's TensorRT-LLM ``bench.sh`` (GB200 to
    :data:`DYNAMO_TRTLLM_SWEEP_LAST_DAY`), the MoRI launchers' ``bench.sh`` (MI355X SGLang) or
    sa-bench (the srt-slurm recipes, :data:`SA_BENCH_ROUNDS`; Dynamo's SGLang ``slurm_jobs``
    client of the GB200 Dynamo-SGLang runs of 2025-12, ``scripts/vllm/bench.sh``, also
    measures ``num_prompts=$((concurrency * 5))`` in every version of the file, 4b3a2c1a5
    2025-09-10 to b7107d008, the commit ``dsr1_fp{4,8}_gb200_dynamo-sglang_slurm.sh`` pin
    from c040b5cf2)."""
    system, backend, day = r["system"], r["backend"], measured_day(r)
    if system == "gb200" and backend == "trtllm" and "" < day <= DYNAMO_TRTLLM_SWEEP_LAST_DAY:
        return DYNAMO_TRTLLM_SWEEP_ROUNDS
    if system == "mi355x" and backend == "sglang":
        return MORI_BENCH_ROUNDS
    return SA_BENCH_ROUNDS


def disagg_kv_dtype(r: dict[str, str]) -> dict[str, Any]:
    """The KV-cache dtype a disaggregated InferenceX TensorRT-LLM row's srt-slurm recipe states:
    every DeepSeek-R1 recipe of ``recipes/trtllm/{h100-fp8,h200}/`` (sa-submission-q1-2026;
    read: h200/1k1k/stp/c128_ctx1_gen9_dep8_batch512, h200/8k1k/mtp/c4_ctx1_gen7_tep8_batch32,
    h100-fp8/1k1k/mtp/ctx1_gen3_tep16_batch1, h100-fp8/8k1k/stp/ctx1_gen3_tep16_batch1) sets
    ``kv_cache_config: dtype: fp8`` on both the prefill and the decode workers. Without it
    TensorRT-LLM's ``auto`` would keep the FP8-block checkpoint's 16-bit KV."""
    return {"kv_dtype": "fp8"} if sa_bench(r) and r["backend"] == "trtllm" else {}


CLIENT_CAP_RUNS = (("vllm", "h100_sxm", "openai/gpt-oss-120b"),)
"""Engine, system and model of the InferenceX runs whose client ran at a fixed cap: the H100
docker runner (``runners/launch_h100-cr.sh`` runs ``benchmarks/*_h100_docker.sh``) ran
``gptoss_fp4_h100_docker.sh``, the only script with the cap hard-coded."""
CLIENT_CAP = 512
"""``gptoss_fp4_h100_docker.sh`` passed ``--max-concurrency 512`` to the client whatever the
sweep's ``$CONC``, while the engine ran ``vllm serve --max-num-seqs=$CONC`` on ``--num-prompts
$((CONC * 10))`` (SemiAnalysisAI/InferenceX, from d22bf9ca9 of 2025-11-21 until 4e135fd3f "fix h100
docker error" of 2025-12-08, which passes ``"$CONC"``). The sweep was ``conc-start: 4, conc-end:
64`` for every TP and length (``.github/configs/nvidia-master.yaml`` ``gptoss-fp4-h100-vllm``), so
a row of that run recorded at 512 is the client's cap: the engine held at most ``$CONC`` <= 64
requests, and for ``$CONC`` <= 51 the client sent all ``10 x $CONC`` prompts at once (an open
burst, not a closed loop). ``$CONC`` is not recorded."""
CLIENT_CAP_WINDOW = ("2025-11-21", "2025-12-08")
"""First and last day (inclusive; ``measured=`` in ``silicon_data_source``) the cap was in the
script (``CLIENT_CAP``)."""


def client_cap_only(r: dict[str, str]) -> bool:
    """True when the row's concurrency is the client's cap, not the engine's load (``CLIENT_CAP``)."""
    day = measured_day(r)
    return (
        r["mode"] == "agg"
        and r["silicon_data_source"].startswith(INFERENCEX_EXPORTS)
        and (r["backend"], r["system"], r["model_path"]) in CLIENT_CAP_RUNS
        and concurrency(r) == CLIENT_CAP
        and CLIENT_CAP_WINDOW[0] <= day <= CLIENT_CAP_WINDOW[1]
    )


def uniform_lengths(length: int, ratio: float) -> tuple[float, float]:
    """Mean and coefficient of variation of a length drawn uniformly from the integers
    [int(length x ratio), length] (discrete uniform: variance (n^2 - 1) / 12 over n values)."""
    low = int(length * ratio)
    n = length - low + 1
    mean = (low + length) / 2
    return mean, ((n * n - 1) / 12) ** 0.5 / mean


def client_lengths(r: dict[str, str]) -> dict[str, Any]:
    """The prompt and output lengths the row's benchmark client sent.

    AIConfigurator's own clients send fixed lengths with ``ignore_eos``: its eval runner
    (``eval/benchmarks/genai_perf_runner.py``, 2025-08 to 2026-03) passes
    ``--synthetic-input-tokens-stddev 0 --output-tokens-stddev 0``, its generator's
    ``benchmark/bench_run.sh.j2`` ``--isl-stddev``/``--osl-stddev``, 0 by default
    (``generator/config/deployment_config.yaml``). The aggregated rows of the InferenceX exports ran InferenceX's client,
    whose lengths are uniform over [0.8 L, L] (``INFERENCEX_RANGE_RATIO``); their mean is below
    the row's ``isl``/``osl`` and they differ per request, so a closed loop's requests do not
    stay in lockstep cohorts."""
    isl, osl = int(r["isl"]), int(r["osl"])
    agg_ix = r["mode"] == "agg" and r["silicon_data_source"].startswith(INFERENCEX_SOURCES)
    if not (agg_ix or sa_bench(r)):
        return {"input_len": isl, "output_len": osl}
    (im, icv), (om, ocv) = (uniform_lengths(n, INFERENCEX_RANGE_RATIO) for n in (isl, osl))
    return {"input_len": round(im), "output_len": round(om), "input_cv": icv, "output_cv": ocv}


def client_requests(r: dict[str, str], conc: int) -> dict[str, Any]:
    """Requests the row's client measured after its warm-up (the first ``conc`` of them are the
    start burst), where its source states them: InferenceX's scripts pass ``--num-prompts
    $((CONC * 10))`` (e.g. ``benchmarks/*.sh`` ``run_benchmark_serving``), disaggregated runs
    the count of their launch's client (``disagg_client_rounds``: sa-bench ``5*C``);
    AIConfigurator's gap-analysis rows the count of the client of their date
    (``aic_client_rounds``). Otherwise none: the client's default
    (``deployment.measured_requests``)."""
    if "input_cv" in client_lengths(r):
        ix_rounds = disagg_client_rounds(r) if sa_bench(r) else INFERENCEX_ROUNDS
        return {"num_requests": ix_rounds * conc}
    rounds = aic_client_rounds(r)
    return {} if rounds is None else {"num_requests": rounds * conc}


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


DEEPSEEK_TRT = ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3")
GPTOSS_TRT = ("openai/gpt-oss-120b",)


def _dsr1_trt_script_dp(r: dict[str, str], conc: int) -> bool:
    """Attention DP as ``dsr1_fp8_h200_trt_slurm.sh`` at e06929c70 chose it before the
    configuration entry did (``INFERENCEX_TRT_EP_FROM_CONFIG``): ``DP_ATTENTION=true`` above
    concurrency 64 at 1k prompts and above 32 at 8k/1k, with ``attention_dp_config:
    {enable_balance: true, timeout_iters: 60}``."""
    isl, osl = r["isl"], r["osl"]
    if isl == "1024" and osl in ("1024", "8192"):
        return conc > 64
    return isl == "8192" and osl == "1024" and conc > 32


def _inferencex_trt(r: dict[str, str], models: tuple[str, ...]) -> str:
    """The run day of an aggregated InferenceX TensorRT-LLM H200 row of ``models``, else ''."""
    day = measured_day(r)
    ok = (
        r["mode"] == "agg"
        and r["backend"] == "trtllm"
        and r["system"] == "h200_sxm"
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


AIC_GAP_SOURCE = "aic-auto-gap-analysis"
"""``silicon_data_source`` of AIConfigurator's gap-analysis rows (``source_file=.../aic-auto-gap-
analysis/data/<system>/<engine>/<version>/<model>.csv``)."""
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


AIC_DISAGG_SWEEP = (
    "AIConfigurator's benchmark of a generated deployment sweeps several client concurrencies "
    "(eval/pipeline.py _auto_concurrency_values at c46a56b02: up to six points to the decode "
    "max_batch_size; generator bench_run.sh.j2 from f90534bc2, 2026-02-11: 1-128 plus decode "
    "workers x max_batch_size x 0.95/1/1.05) and the row does not say which point it is"
)
"""Why a disaggregated gap-analysis row's concurrency cannot be read from its decode batch and
workers. At the run dates (2026-01-23/25, Dynamo 0.8.0) ai-dynamo/aiconfigurator's eval pipeline
(``src/aiconfigurator/eval/pipeline.py`` at c46a56b02) benchmarked a generated disaggregated
deployment at ``_auto_concurrency_values(max_batch_size)`` of ``disagg/decode_config.yaml`` (the
decode engine's batch, not multiplied by the decode workers; agg multiplies by ``AGG_WORKERS``):
1, then 1/8, 1/4, 1/2, 3/4 of it snapped to a grid, and the batch itself. The generator's own
``benchmark/bench_run.sh.j2`` (added after the runs, f90534bc2) sweeps ``[1, 2, 8, 16, 32, 64,
128]`` plus 0.95/1/1.05 x ``decode_workers x max_batch_size`` (``rule_plugin/benchmark/*.rule``).
AIConfigurator's own disaggregated summary calls decode concurrency x decode workers "not exact
matching" (``sdk/inference_session.py``). The gap-analysis tool that picked one point per row
(``aic-auto-gap-analysis``) is not published."""


AIC_TRT_FREE_MEMORY_FRACTION = 0.80
"""``kv_cache_config.free_gpu_memory_fraction`` default of the generator's TensorRT-LLM 1.2.0rc5/
1.2.0rc6.post1 templates (c46a56b02)."""


AIC_CLIENT_ERAS: tuple[tuple[str, int | None], ...] = (
    ("2025-08-19", 10),
    ("2026-02-11", None),
    ("2026-03-03", 50),
    ("2026-04-01", 20),
)
"""Rounds of ``C`` requests AIConfigurator's published benchmark client measured, from each
first day (UTC author dates in ai-dynamo/aiconfigurator) to the next; every one after a warm-up
of ``2*C`` that drains first (``cohort_sim.BENCHMARK_ROUNDS``):

- 10: the eval pipeline's runner (``src/aiconfigurator/eval/benchmarks/genai_perf_runner.py``,
  f188ca45c 2025-08-19, in 961028348 "automation eval" 2025-08-22: genai-perf ``--concurrency C
  --request-count 10*C --warmup-request-count 2*C --num-dataset-entries 12*C``, fixed lengths;
  aiperf from 4361371a6, 2025-10-14, same counts; unchanged at c46a56b02, 2026-01-23);
- None: from f90534bc2 (2026-02-11) the generator's ``benchmark/bench_run.sh.j2`` (``aiperf
  --num-requests 50*C``) existed beside that runner: a run of those days is not tied to one;
- 50: the eval module removed (c0c44d911, 2026-03-03), the generator's template alone
  (``BENCH_MULTI_ROUND`` default 50 at 2fc13d121, 2026-03-17);
- 20: ``BENCH_MULTI_ROUND`` default 20 from 1cc3526b4 (2026-04-01) to 095f58a51."""
AIC_EVAL_ERA_VERSIONS = frozenset(
    {("trtllm", "1.0.0rc3"), ("sglang", "0.5.1.post1"), *AIC_GENERATOR_VERSIONS}
)
"""Engine versions whose gap-analysis rows record no ``measured=`` day but ran in the eval
runner's era (``AIC_CLIENT_ERAS``, 10 rounds). The Dynamo 0.8.0 versions
(``AIC_GENERATOR_VERSIONS``): the campaign's dated rows of exactly these versions ran on
2026-01-23/25, the day the launch of those rows is read at too (``aic_generator_launch``).
TensorRT-LLM 1.0.0rc3 and SGLang 0.5.1.post1: versions of August-September 2025, in
AIConfigurator's database from its first commit (efcae124c, 2025-08-11; TensorRT-LLM 1.0.0rc3
templates) and from dfbae5c66 (2025-09-18, SGLang 0.5.1.post1 data); older than the versions of
every Dynamo release in AIConfigurator's Dynamo matrix (``generator/facts/runtimes/dynamo.yaml``
at 095f58a51: from 0.6.0, TensorRT-LLM 1.1.0rc5 and SGLang 0.5.3.post2). SGLang 0.5.8.post1
(database from 2026-02-09) and later versions are not placed: their days may fall after the
generator's template appeared."""


def aic_client_rounds(r: dict[str, str]) -> int | None:
    """Rounds of ``C`` requests an AIConfigurator gap-analysis row's client measured: by its
    ``measured=`` day, else by its engine version's era (``AIC_CLIENT_ERAS``,
    ``AIC_EVAL_ERA_VERSIONS``); None when neither places it."""
    if AIC_GAP_SOURCE not in r["silicon_data_source"]:
        return None
    day = measured_day(r)
    if not day:
        era = (r["backend"], r["backend_version"]) in AIC_EVAL_ERA_VERSIONS
        return AIC_CLIENT_ERAS[0][1] if era else None
    rounds: int | None = None
    for first, count in AIC_CLIENT_ERAS:
        if day >= first:
            rounds = count
    return rounds


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


def engine_version_options(r: dict[str, str]) -> dict[str, Any]:
    """Engine options that follow from the row's engine version alone (every row of it, any
    source, aggregated or disaggregated): ``VLLM_DEEPGEMM_MOE_WORST_CASE``."""
    if r["backend"] == "vllm" and r["backend_version"] in VLLM_DEEPGEMM_MOE_WORST_CASE:
        return {"deepgemm_moe_worst_case": True}
    return {}


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
    day = _inferencex_trt(r, DEEPSEEK_TRT + GPTOSS_TRT)
    if day and day < INFERENCEX_TRT_EP_FROM_CONFIG:
        out["ep"] = kw["tp"]
        if r["model_path"] in DEEPSEEK_TRT and _dsr1_trt_script_dp(r, kw["concurrency"]):
            out["attention_dp"] = kw["tp"]
            out["adp_balance_timeout_iters"] = INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
    if day and r["model_path"] in DEEPSEEK_TRT:
        tokens = (kw["concurrency"] + int(r["isl"]) + 64 + 63) // 64 * 64
        if day >= INFERENCEX_DSR1_TRT_FLOOR_FROM:
            tokens = max(tokens, 8192)
        dsr1 = {
            "max_num_batched_tokens": tokens,
            "memory_fraction": INFERENCEX_DSR1_TRT_MEMORY_FRACTION,
        }
        return {**out, "kv_dtype": "fp8", "engine_options": dsr1}
    if day:
        return {**out, "kv_dtype": "bf16", "engine_options": dict(INFERENCEX_GPTOSS_TRT)}
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


def weights(r: dict[str, str]) -> str:
    """The weight format row ``r`` ran: the one its checkpoint stores when ``model_path`` is a
    published pre-quantized checkpoint (``catalog.checkpoint_weights``: an engine loads a
    serialized checkpoint in its stored format; the rows' ``fp8`` on DeepSeek-R1/V3,
    MiniMax-M2.5 and Qwen3-235B-A22B-FP8, whose config.json has ``weight_block_size``
    [128, 128], and ``nvfp4`` on gpt-oss-120b, whose checkpoint is MXFP4, name the benchmark's
    precision class, not the stored format); else the row's ``gemm_quant_mode`` (a 16-bit
    checkpoint the engine quantizes online), ``bf16`` when empty."""
    return catalog.checkpoint_weights(r["model_path"]) or r["gemm_quant_mode"] or "bf16"


def _base(r: dict[str, str], conc: int) -> dict[str, Any]:
    return {
        "gpu": SYSTEMS[r["system"]],
        "engine": ENGINES[r["backend"]],
        "weights": weights(r),
        **client_lengths(r),
        "concurrency": conc,
        **client_requests(r, conc),
    }


def _disagg_kwargs(d: dict[str, str]) -> dict[str, Any]:
    """Worker pools of a row that names them. Neither batch size is passed as an engine cap:
    both are AIConfigurator's modelling inputs, not settings the run used. Its InferenceX
    adapter (``_worker``) sets the prefill batch to 1 ("defaults to 1 unless explicitly
    overridden") and the decode batch to concurrency / (decode workers x attention-DP ranks);
    the rows agree (config 303 keeps one deployment while its decode batch follows the
    concurrency: 4, 8, 16, 32, 64 at 36-576)."""
    p, q = parallelism(d, "prefill_"), parallelism(d, "decode_")
    return {
        "prefill_workers": _int(d["prefill_num_workers"]),
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": _int(d["decode_num_workers"]),
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _one_each(r: dict[str, str]) -> dict[str, Any]:
    """One prefill and one decode worker of the row's per-worker parallelism."""
    p, q = parallelism(r, "prefill_"), parallelism(r, "decode_")
    return {
        "prefill_workers": 1,
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": 1,
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _key(r: dict[str, str], conc: int) -> tuple[str, ...]:
    return (r["backend"], r["system"], r["isl"], r["osl"], str(conc))


RECIPES_FILE = "inferencex_disagg_recipes.csv"
"""The deployments InferenceX's configuration ran for DeepSeek-R1 FP8 disaggregated on H100/H200
(SOURCES.md there): one line per search-space entry of ``.github/configs/nvidia-master.yaml`` at
the commit in effect when the rows were measured, with the srt-slurm recipe it launches, its
speculative decoding (``none`` or ``mtp``), its worker counts, the entry's ``tp``/``ep`` labels
and attention-DP widths per stage, the decode engines' running cap per attention rank
(TensorRT-LLM ``max_batch_size``; SGLang ``max-running-requests`` / ``dp-size``, where the recipe
file was read) and the draft count of an MTP recipe (TensorRT-LLM ``_mtpN``; SGLang
``speculative-num-steps``, where read)."""
RECIPE = "recipe"
"""Class of a disaggregated row whose worker counts are empty but whose measurement date,
lengths and concurrency leave exactly one entry of the InferenceX configuration (plain, or MTP
with its draft count in the recipe's name): the deployment is that entry's."""

Recipes = list[dict[str, str]]


def load_recipes(path: Path) -> Recipes:
    with path.open() as f:
        return list(csv.DictReader(f))


def _candidates(r: dict[str, str], conc: int, recipes: Recipes) -> Recipes:
    """The configuration's entries at the row's engine, system, lengths and concurrency."""
    return [
        e
        for e in recipes
        if (e["backend"], e["system"], e["isl"], e["osl"], int(e["concurrency"]))
        == (r["backend"], r["system"], r["isl"], r["osl"], conc)
    ]


EXPORT_FIELDS = {
    "prefill_tp": ("prefill_tp_size", "prefill_tp"),
    "prefill_ep": ("prefill_moe_ep_size", "prefill_ep"),
    "decode_tp": ("decode_tp_size", "decode_tp"),
    "decode_ep": ("decode_moe_ep_size", "decode_ep"),
    "decode_attention_dp": ("decode_attention_dp_size", "decode_attention_dp"),
}
"""Parallelism fields of a disaggregated InferenceX export row, and the recipe column each would
state: field -> (export column, recipe column)."""
EXPORT_RELIABLE = ("prefill_tp", "prefill_ep")
"""The export fields that agree with the deployment on every row whose deployment is known
independently of them (:func:`export_field_agreement`, the ``twin`` rows, whose deployment is
the database row's): the export writes the entry's prefill ``tp`` and ``ep`` labels, and
copies them into the decode columns with attention DP 1. So a DEP decode (``dp-attn: true``) is
exported as attention DP 1, and H200 SGLang ``bs128-1p1d-dep`` (prefill ``ep: 1``, decode
``ep: 8``) as decode EP 1: only the prefill fields may filter the configuration's entries."""


def export_field_agreement(rows: list[ServingRow], recipes: Recipes) -> dict[str, tuple[int, int]]:
    """For each :data:`EXPORT_FIELDS` field: (rows that agree, rows compared), over the distinct
    export rows of class ``twin`` whose deployment (workers, decode attention DP, speculative
    decoding, from the database row that names them) matches exactly one configuration entry.
    Their deployment does not come from the export's parallelism fields, so agreement here is
    evidence about those fields, not a consequence of reading them."""
    out = dict.fromkeys(EXPORT_FIELDS, (0, 0))
    # Column-level repeats only: the twins are the same measurement as their database rows, so
    # ``distinct`` would fold them away.
    for row in distinct_columns(rows):
        r, kw = row.raw, row.kwargs
        if row.kind != TWIN or not r["silicon_data_source"].startswith(INFERENCEX_EXPORTS):
            continue
        hits = [
            e
            for e in _candidates(r, row.concurrency, recipes)
            if e["spec"] == kw.get("speculative", "none")
            and (int(e["prefill_workers"]), int(e["decode_workers"]))
            == (kw["prefill_workers"], kw["decode_workers"])
            and int(e["decode_attention_dp"]) == kw["decode_attention_dp"]
        ]
        if len(hits) != 1:
            continue
        for name, (col, ecol) in EXPORT_FIELDS.items():
            agree, n = out[name]
            out[name] = (agree + (_int(r[col]) == int(hits[0][ecol])), n + 1)
    return out


def _export_candidates(r: dict[str, str], conc: int, recipes: Recipes) -> Recipes:
    """:func:`_candidates` whose prefill ``tp``/``ep`` labels are the export row's
    (:data:`EXPORT_RELIABLE`): e.g. H200 SGLang 1k/1k at concurrency 512 exported with prefill
    EP 8 is ``bs256-1p6d-dep`` (or its MTP twin), never ``bs256-1p6d-tp`` (prefill ``ep: 1``)."""
    return [
        e
        for e in _candidates(r, conc, recipes)
        if all(_int(r[EXPORT_FIELDS[f][0]]) == int(e[EXPORT_FIELDS[f][1]]) for f in EXPORT_RELIABLE)
    ]


def _decode_cap(
    r: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes
) -> tuple[dict[str, Any], list[str]]:
    """What the recipe the run launched sets and the row does not carry, or carries wrong.

    - The decode engine's ``max_batch_size`` (per attention rank). A TensorRT-LLM decode worker
      admits at most that many requests per rank; the rest wait in its queue after their
      prefill, so the wait is part of TTFT. The rows do not carry it (``decode_batch_size`` is
      AIConfigurator's concurrency / workers): e.g. H100 ``ctx1_gen3_tep16_batch2`` runs
      concurrency 9 on 3 decode workers with ``max_batch_size: 2``.
    - The prefill worker's attention-DP width (``enable_attention_dp`` in the recipe). The
      rows of InferenceX's workflow run 288 (2026-02-14) carry the configuration's labels of
      that date, which InferenceX corrected to the recipe files on 2026-03-23 (#919, "Fix
      nvidia-master.yaml metadata to align with recipe files", f316a0ef6): e.g. config 303
      states a TP prefill for ``c4_ctx1_gen9_tep8_batch256``, whose prefill runs
      ``enable_attention_dp: true``; config 590 (run 333) is the same recipe, labelled DP 8.

    The entry must be non-speculative and state the row's worker counts and decode
    attention-DP width."""
    if r["backend"] != "trtllm" or not sa_bench(r):
        return {}, []
    hits = {
        e["recipe"]: e
        for e in _candidates(r, conc, recipes)
        if e["spec"] == "none"
        and e["decode_max_batch"]
        and (int(e["prefill_workers"]), int(e["decode_workers"]), int(e["decode_attention_dp"]))
        == (kw["prefill_workers"], kw["decode_workers"], kw["decode_attention_dp"])
    }
    if len(hits) != 1:
        return {}, []
    (hit,) = hits.values()
    out: dict[str, Any] = {"decode_batch": int(hit["decode_max_batch"])}
    notes = [f"decode max_batch_size {hit['decode_max_batch']} from {hit['recipe']}"]
    dp = int(hit["prefill_attention_dp"])
    if dp != kw["prefill_attention_dp"] and kw["prefill_tp"] % dp == 0:
        out["prefill_attention_dp"] = dp
        notes.append(
            f"prefill attention DP {dp} (recipe's enable_attention_dp), not the row's "
            f"{kw['prefill_attention_dp']} (InferenceX #919 relabelled it to the recipe)"
        )
    return out, notes


def _from_config(
    r: dict[str, str], conc: int, recipes: Recipes
) -> tuple[dict[str, Any], list[str], str]:
    """A row without worker counts read from the InferenceX configuration: (keyword arguments,
    assumptions, reason it stays not expressible).

    The candidates are the entries at the row's engine, system, lengths and concurrency whose
    prefill ``tp``/``ep`` labels are the export's (:data:`EXPORT_RELIABLE`). One candidate is the
    deployment, with its per-stage parallelism from the entry (the export's decode columns copy
    the prefill's, :data:`EXPORT_RELIABLE`). Where a plain and an MTP entry share the key nothing
    else in the row tells them apart: both are in one sweep of one commit (same ``measured=``
    stamp, one ``image`` per configuration key), and the export carries neither
    ``spec_method`` nor the workers; such rows stay not expressible."""
    if not r["silicon_data_source"].startswith(INFERENCEX_EXPORTS):
        return {}, [], ""
    cands = {e["recipe"]: e for e in _export_candidates(r, conc, recipes)}
    commits = ", ".join(
        sorted(
            {
                e["inferencex_commit"]
                for e in recipes
                if e["backend"] == r["backend"] and e["system"] == r["system"]
            }
        )
    )
    where = f"InferenceX nvidia-master.yaml at {commits or 'the run date'}"
    if not cands:
        return {}, [], f"no entry of {where} runs this concurrency at these lengths"
    names = ", ".join(sorted(n.rsplit("/", 1)[-1] for n in cands))
    if len(cands) > 1:
        specs = sorted({e["spec"] for e in cands.values()})
        why = (
            "a plain and an MTP recipe at one key: the export drops spec_method, and image, "
            "date and workflow are the same for both"
            if specs == ["mtp", "none"]
            else "the export drops the worker counts that would say which"
        )
        return (
            {},
            [],
            (
                f"{len(cands)} deployments of {where} run this concurrency with the row's "
                f"prefill TP/EP ({names}); {why}"
            ),
        )
    (e,) = cands.values()
    drafts = entry_draft_tokens(e)
    if e["spec"] == "mtp" and drafts is None:
        return (
            {},
            [],
            (
                f"speculative decoding (MTP): the only entry of {where} at this concurrency is "
                f"the MTP recipe {names}, whose draft count is not on file (recipe file not read)"
            ),
        )
    kw: dict[str, Any] = {
        "prefill_workers": int(e["prefill_workers"]),
        "prefill_tp": int(e["prefill_tp"]),
        "prefill_ep": int(e["prefill_ep"]),
        "prefill_attention_dp": int(e["prefill_attention_dp"]),
        "decode_workers": int(e["decode_workers"]),
        "decode_tp": int(e["decode_tp"]),
        "decode_ep": int(e["decode_ep"]),
        "decode_attention_dp": int(e["decode_attention_dp"]),
    }
    if e["decode_max_batch"]:
        kw["decode_batch"] = int(e["decode_max_batch"])
    if drafts is not None:
        kw.update(speculative="mtp", draft_tokens=drafts)
    what = f"MTP, {drafts} draft tokens" if drafts is not None else "non-speculative"
    note = (
        f"worker counts empty; the one entry of {where} at this concurrency, lengths and "
        f"prefill TP/EP is {e['recipe']} ({what}): its workers, per-stage parallelism and "
        "decode batch"
    )
    return kw, [note], ""


def recipe_draft_tokens(recipe: str) -> int | None:
    """Draft tokens of an srt-slurm TensorRT-LLM recipe, from its name's ``_mtpN`` (the recipes
    set ``speculative_config: num_nextn_predict_layers: N``; ``mtp0`` is the plain one), or
    None where the name does not say (the SGLang recipes)."""
    hit = re.search(r"_mtp(\d+)\.yaml$", recipe)
    return int(hit.group(1)) if hit and int(hit.group(1)) > 0 else None


def add_engine_options(kw: dict[str, Any], options: dict[str, Any]) -> None:
    """Add launch ``options`` to the engine options of reading ``kw`` (later ones win)."""
    kw["engine_options"] = {**(kw.get("engine_options") or {}), **options}


def disagg_recipe_entries(
    r: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes
) -> Recipes:
    """The recipes-table entries that run disaggregated row ``r`` as read (``kw``): its engine,
    system, lengths and concurrency (:func:`_candidates`), worker counts, per-stage TP and EP,
    decode attention-DP width and speculative decoding (``mtp`` when ``kw`` runs it)."""
    spec = "mtp" if kw.get("speculative") == "mtp" else "none"
    fields = (
        "prefill_workers", "prefill_tp", "prefill_ep", "decode_workers", "decode_tp",
        "decode_ep", "decode_attention_dp",
    )  # fmt: skip
    return [
        e
        for e in _candidates(r, conc, recipes)
        if e["spec"] == spec and all(k in kw and int(e[k]) == kw[k] for k in fields)
    ]


def stated_memory(
    raw: dict[str, str], kw: dict[str, Any], recipes: Recipes, fractions: Fractions
) -> tuple[dict[str, Any], str, str]:
    """The SGLang ``--mem-fraction-static`` record ``raw`` (read as ``kw``) launched with, as
    an engine option: (option, note, reason it is not known). Aggregated: the single-node
    script's, by GPU, precision, MTP, TP and day, unless the launch options already state it
    (:data:`INFERENCEX_LAUNCHES`). Disaggregated: the decode workers' (the KV pool the
    model sizes), from the srt-slurm recipe of the one recipes-table entry that runs the
    record's deployment (:func:`disagg_recipe_entries`), else the launch files in
    force on the day (MI355X MoRI-SGLang). The prefill workers' own stated value is not
    applied: one engine option serves both pools, and only the decode pool's KV cache enters
    the prediction. Nothing where no launch on file states it: SGLang's own rule then applies."""
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


def entry_draft_tokens(e: dict[str, str]) -> int | None:
    """Draft tokens of an MTP entry (``draft_tokens`` in the recipes table), None for a plain
    entry or an MTP one whose recipe file was not read. TensorRT-LLM: the name's ``_mtpN``
    (:func:`recipe_draft_tokens`). SGLang: the recipe's ``speculative-num-steps`` (EAGLE with
    ``speculative-eagle-topk: 1`` and ``speculative-num-draft-tokens`` = steps + 1: a chain of
    that many draft tokens, verified with the next token in one step)."""
    if e["spec"] != "mtp" or not e.get("draft_tokens"):
        return None
    return int(e["draft_tokens"])


def read_rows(
    raw: list[dict[str, str]],
    recipes: Recipes | None = None,
    sweeps: Sweeps | None = None,
    fractions: Fractions | None = None,
) -> list[ServingRow]:
    """Every raw row read as the deployment it ran, or marked not expressible; ``recipes``
    (:func:`load_recipes`) gives the decode engines' batch caps where a recipe states them,
    ``sweeps`` (``inferencex_sweeps``) the aggregated InferenceX runs that swept MTP entries,
    ``fractions`` (``inferencex_memory``) the ``--mem-fraction-static`` of InferenceX's SGLang
    launches (:func:`stated_memory`)."""
    table: Recipes = recipes or []
    named: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in raw:
        c = concurrency(r)
        if r["mode"] == "disagg" and _named(r) and c is not None:
            named[_key(r, c)].append(r)
    out = []
    for r in raw:
        stated = concurrency(r)
        conc = stated if stated is not None else decode_slots(r)
        notes: list[str] = []
        kind, reason = STATED, ""
        kw = _base(r, conc)
        guess: dict[str, Any] = {}
        if stated is None:
            kind, kw = NOT_EXPRESSIBLE, {}
            reason = (
                "not expressible: concurrency not stated (empty in the id and in "
                "silicon_data_source; the decode batch is AIConfigurator's modelling input)"
                + ("; " + AIC_DISAGG_SWEEP if r["mode"] == "disagg" else "")
            )
            guess = {**_base(r, conc), **_disagg_kwargs(r)}
        elif r["mode"] != "disagg":
            kw.update(parallelism(r), pp=_int(r["pp_size"]))
            kw.update(launch_options(r, kw))
            spec_kw, spec_note, spec_reason = (
                speculative_reading(r, measured_day(r), kw, sweeps or [])
                if r["silicon_data_source"].startswith(INFERENCEX_EXPORTS)
                else ({}, "", "")
            )
            if spec_reason:
                kind, kw, guess, reason = NOT_EXPRESSIBLE, {}, kw, spec_reason
            elif spec_kw:
                tokens = spec_kw.pop("max_num_batched_tokens")
                kw.update(spec_kw)
                opts = dict(kw.get("engine_options") or {})
                opts["max_num_batched_tokens"] = max(tokens, opts.get("max_num_batched_tokens", 0))
                kw["engine_options"] = opts
                notes.append(spec_note)
            elif client_cap_only(r):
                kind, kw, guess = NOT_EXPRESSIBLE, {}, kw
                reason = (
                    f"not expressible: concurrency {CLIENT_CAP} is the client's cap, not the "
                    "engine's load: InferenceX's gptoss_fp4_h100_docker.sh ran vllm "
                    "--max-num-seqs=$CONC (sweep 4-64) on 10 x $CONC prompts with the client at "
                    f"--max-concurrency {CLIENT_CAP} (d22bf9ca9 to 4e135fd3f); $CONC is not "
                    "recorded"
                )
        elif _named(r):
            kw.update(_disagg_kwargs(r))
            cap, why = _decode_cap(r, conc, kw, table)
            kw.update(cap)
            notes.extend(why)
        else:
            twins = [n for n in named[_key(r, conc)] if same_latencies(n, r)]
            if len(twins) == 1:
                kind = TWIN
                kw.update(_disagg_kwargs(twins[0]))
                notes.append(
                    f"worker counts empty; deployment from {twins[0]['id']}, the same "
                    "measurement (identical TTFT and TPOT) with its workers named"
                )
                cap, why = _decode_cap(r, conc, kw, table)
                kw.update(cap)
                notes.extend(why)
            else:
                found, why, refused = _from_config(r, conc, table)
                if found:
                    kind = RECIPE
                    kw.update(found)
                    notes.extend(why)
                else:
                    kind, kw = NOT_EXPRESSIBLE, {}
                    guess = {**_base(r, conc), **_one_each(r)}
                    reason = (
                        "not expressible: worker counts not stated (prefill/decode_num_workers "
                        "empty, no GPU total in the row; AIConfigurator's own replay refuses "
                        "such rows)" + (f"; {refused}" if refused else "")
                    )
        if r["mode"] == "disagg":
            for read in (kw, guess):
                if read:
                    read.update(disagg_kv_dtype(r))
        if kw and r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
            mem_kw, mem_note, mem_refused = stated_memory(r, kw, table, fractions or [])
            if mem_refused:
                kind, kw, guess, reason = NOT_EXPRESSIBLE, {}, kw, mem_refused
            elif mem_kw:
                add_engine_options(kw, mem_kw)
                notes.append(mem_note)
        if version_opts := engine_version_options(r):
            for read in (kw, guess):
                if read:
                    read["engine_options"] = {**(read.get("engine_options") or {}), **version_opts}
        out.append(
            ServingRow(
                id=r["id"],
                engine=r["backend"],
                mode=r["mode"],
                kind=kind,
                reason=reason,
                ttft_ms=float(r["silicon_ttft_ms"]),
                tpot_ms=float(r["silicon_tpot_ms"]),
                concurrency=conc,
                kwargs=kw,
                guess=guess,
                assumptions=tuple(notes),
                raw=r,
            )
        )
    return _as_originals(out)


COPY_KEY = ("backend", "backend_version", "model_path", "system", "mode", "isl", "osl")
"""Columns a rounded copy shares with its original, besides the client's concurrency."""


def _decimals(value: str) -> int:
    return len(value.partition(".")[2])


def _rounds_to(original: str, copy: str) -> bool:
    """Whether ``original``, written with more digits, rounds to ``copy``."""
    d = _decimals(copy)
    return _decimals(original) > d and f"{float(original):.{d}f}" == f"{float(copy):.{d}f}"


def rounded_copies(raw: list[dict[str, str]]) -> dict[int, int]:
    """Rows that repeat another row's measurement at fewer digits: index of the copy -> index
    of its original.

    AIConfigurator's ``kimi-k2.5-gap-analysis.csv`` and ``qwen3.5-397b-gap-analysis.csv`` rows
    repeat InferenceX's 2026-04-06 export (``silicon_data_source`` has neither its ``measured=``
    date nor its image) with TTFT and TPOT written to 0.01 ms: all 15 Kimi-K2.5 rows and 14 of the
    15 Qwen3.5 rows equal an export row of the same engine, version, model, GPU, lengths and
    concurrency rounded to two decimals, in both latencies at once (the 15th Qwen3.5 row's
    original records ``tp_size`` 64 for the same TP8 EP8 run; the parallelism columns are not
    compared). A copy is the same benchmark run: it is read as its original
    (:func:`_as_originals`) and counted once (:func:`distinct`). A row is a copy only when the
    rows with more digits that round to it all record one measurement (the exports repeat a run
    to the last digit, :data:`TWIN_RTOL`; the first of them is the original)."""
    index: dict[tuple[str | int | None, ...], list[int]] = defaultdict(list)
    for i, r in enumerate(raw):
        key: tuple[str | int | None, ...] = (*(r[k] for k in COPY_KEY), concurrency(r))
        index[key].append(i)
    out: dict[int, int] = {}
    for same in index.values():
        for i in same:
            c = raw[i]
            found = [
                j
                for j in same
                if j != i
                and _rounds_to(raw[j]["silicon_ttft_ms"], c["silicon_ttft_ms"])
                and _rounds_to(raw[j]["silicon_tpot_ms"], c["silicon_tpot_ms"])
            ]
            # Originals repeated to the last digit (the exports carry the same run twice, at
            # most a float's last bit apart) are one measurement: the first stands for it.
            if found and all(same_latencies(raw[j], raw[found[0]]) for j in found):
                out[i] = found[0]
    return out


def _as_originals(rows: list[ServingRow]) -> list[ServingRow]:
    """Rounded copies (:func:`rounded_copies`) read as the run their original records: the
    same deployment, client and launch (the copy's source says neither client nor date), so one
    measurement gets one prediction."""
    copies = rounded_copies([r.raw for r in rows])
    out = list(rows)
    for i, j in copies.items():
        o = rows[j]
        out[i] = replace(
            o,
            id=rows[i].id,
            ttft_ms=rows[i].ttft_ms,
            tpot_ms=rows[i].tpot_ms,
            raw=rows[i].raw,
            copy_of=o.id,
            assumptions=(
                *o.assumptions,
                f"the measurement of {o.id} written to fewer digits: read as that run",
            ),
        )
    return out


def load(path: Path) -> list[ServingRow]:
    recipes, sweeps = path.parent / RECIPES_FILE, path.parent / SWEEPS_FILE
    fractions = path.parent / MEM_FRACTIONS_FILE
    with path.open() as f:
        return read_rows(
            list(csv.DictReader(f)),
            load_recipes(recipes) if recipes.exists() else None,
            load_sweeps(sweeps) if sweeps.exists() else None,
            load_fractions(fractions) if fractions.exists() else None,
        )


PROVENANCE = ("id", "silicon_data_source")
"""The columns that say where a row was copied from, not what was measured."""


DB_DUMP_R1 = "dsr1_"
"""AIConfigurator's db-dump writes InferenceX's DeepSeek-R1 runs (ids ``dsr1_...``) as
``deepseek-ai/DeepSeek-V3`` (``INFERENCEX_SOURCES``): the model is R1."""


def served_model(row: ServingRow) -> str:
    """The model the row ran (the dump's DeepSeek-V3 label read as R1, :data:`DB_DUMP_R1`)."""
    if row.raw["silicon_data_source"].startswith(DB_DUMP) and row.id.startswith(DB_DUMP_R1):
        return "deepseek-ai/DeepSeek-R1"
    return row.raw["model_path"]


def deployment_key(row: ServingRow, drop: tuple[str, ...] = ()) -> str:
    """Everything a model is told about an expressible row (its ``gpuscale.api.infer`` keyword
    arguments but ``drop``, the engine version, system, formats and lengths), as one string."""
    r = row.raw
    told = {
        "model": served_model(row),
        "engine_version": r["backend_version"],
        "system": r["system"],
        "precision": (r["precision"], r["gemm_quant_mode"], r["moe_quant_mode"]),
        "mode": r["mode"],
        "lengths": (r["isl"], r["osl"]),
        "kwargs": {k: v for k, v in row.kwargs.items() if k not in drop},
    }
    return json.dumps(told, sort_keys=True, default=str)


def same_measurement(a: ServingRow, b: ServingRow) -> bool:
    """Two records of one deployment with the same TTFT and TPOT (:data:`TWIN_RTOL`; the
    rows' typed figures, as :func:`same_latencies` compares raw columns)."""
    return math.isclose(a.ttft_ms, b.ttft_ms, rel_tol=TWIN_RTOL) and math.isclose(
        a.tpot_ms, b.tpot_ms, rel_tol=TWIN_RTOL
    )


RECORD_RANK = {STATED: 0, TWIN: 1}
"""Of one run's records, the better attested deployment first: a row that names its workers,
then its export twin, then a reading of the configuration (any other class)."""


def record_preference(row: ServingRow) -> tuple[int, bool]:
    """Sort key of one run's records, best first: :data:`RECORD_RANK`, then the publication over
    AIConfigurator's db-dump copy of it (:data:`DB_DUMP`)."""
    return RECORD_RANK.get(row.kind, len(RECORD_RANK)), row.raw["silicon_data_source"].startswith(
        DB_DUMP
    )


def same_run(rows: Sequence[ServingRow]) -> list[list[ServingRow]]:
    """The expressible ``rows`` grouped by run: the records of one deployment
    (:func:`deployment_key`) with the same TTFT and TPOT (:func:`same_measurement`), each group
    best attested first (:func:`record_preference`; ties in the order of ``rows``), the groups in
    the order their first record appears. Rows that are not expressible have no known deployment
    and are left out. The one rule :func:`distinct` and ``serving_noise.runs`` count runs by."""
    found: dict[str, list[list[ServingRow]]] = defaultdict(list)
    for row in rows:
        if not row.expressible:
            continue
        here = found[deployment_key(row)]
        group = next((g for g in here if same_measurement(g[0], row)), None)
        if group is None:
            here.append([row])
        else:
            group.append(row)
    return [sorted(g, key=record_preference) for here in found.values() for g in here]


def distinct(rows: list[ServingRow]) -> list[ServingRow]:
    """``rows`` with each measurement once. Dropped: a row that agrees with a kept one on every
    column but its provenance (:data:`PROVENANCE`: the InferenceX exports of 2026-03-25 and
    2026-04-06 and AIConfigurator's db-dump repeat earlier runs to the last digit); a rounded
    copy (``ServingRow.copy_of``: two gap-analysis files repeat the 2026-04-06 export to
    0.01 ms); and an expressible row that records a run another row records better
    (:func:`same_run`: the same deployment and TTFT/TPOT although the columns are written
    differently: the db-dump labels R1 runs V3, the 2026-04-06 export writes ``tp_size`` as
    TP x EP, the last bit of a float differs). An error statistic that counted each copy would
    weigh those runs twice."""
    by_columns = distinct_columns(rows)
    dropped = {id(row) for group in same_run(by_columns) for row in group[1:]}
    return [row for row in by_columns if id(row) not in dropped]


def distinct_columns(rows: list[ServingRow]) -> list[ServingRow]:
    """``rows`` without the rows that repeat another in every column but their provenance, and
    without rounded copies of a kept row (the first two rules of :func:`distinct`). Of rows
    that repeat each other the best attested stands (:func:`record_preference`: the publication
    over the db-dump's copy), whatever their order in ``rows``; the order of ``rows`` is kept."""
    ids = {row.id for row in rows}
    best: dict[tuple[tuple[str, str], ...], tuple[tuple[int, bool], int]] = {}
    keys: list[tuple[tuple[str, str], ...] | None] = []
    for i, row in enumerate(rows):
        if row.copy_of in ids:
            keys.append(None)  # a rounded copy of a row that is counted (``rounded_copies``)
            continue
        key = tuple(sorted((k, v) for k, v in row.raw.items() if k not in PROVENANCE))
        keys.append(key)
        rank = (record_preference(row), i)
        if key not in best or rank < best[key]:
            best[key] = rank
    return [
        row
        for i, (row, key) in enumerate(zip(rows, keys, strict=True))
        if key and best[key][1] == i
    ]
