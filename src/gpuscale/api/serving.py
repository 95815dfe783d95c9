"""``gpuscale.api.infer`` under load: a continuously batching engine (TensorRT-LLM, vLLM,
SGLang, AMD's ATOM) serving a closed-loop or Poisson client, aggregated or disaggregated (ATOM
aggregated only)."""

from __future__ import annotations

import dataclasses
import itertools
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._booleans import is_bool
from gpuscale.api.speculative import speculation as speculation_of
from gpuscale.api.training import MAX_GPUS
from gpuscale.catalog.serving_engines import EngineProfile, kv_cache_dtype
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.catalog.serving_engines import engines as serving_engines
from gpuscale.costmodel.profile import Profile, load_profile_for
from gpuscale.costmodel.serving.formats import (
    FORMATS,
    WeightFormat,
    check_runs_on,
    sixteen_bit_on,
    weight_format,
)
from gpuscale.costmodel.serving.iteration import (
    DEEPGEMM_MOE_MAX_TP,
    Parallelism,
    deepgemm_moe_skipped,
)
from gpuscale.costmodel.serving.speculative import Speculation
from gpuscale.costmodel.serving.uncertainty import serving_band
from gpuscale.errors import InputError, is_whole, require
from gpuscale.planner.serving.cohort_sim import BENCHMARK_ROUNDS
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    Prediction,
    kv_pool,
    measured_requests,
    pools_placement,
    predict_aggregated,
    predict_disaggregated,
    prefill_worker_engine,
    prefill_worker_speculation,
)
from gpuscale.planner.serving.disagg_closed_loop import ROUTINGS
from gpuscale.planner.serving.placement import Group, Placement, place
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.planner.words import gpus as n_gpus
from gpuscale.specs import Cluster, ModelSpec
from gpuscale.specs.hardware import Device

SCHEMA_VERSION = 1

WEIGHT_FORMATS: tuple[str, ...] = ("auto", *FORMATS)
"""Every ``weights`` the serving model under load accepts (``--help`` lists these)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingResult:
    """One deployment's latency and throughput under load (``options[0]``)."""

    model: str
    gpu: str
    engine: str
    weights: str
    input_len: int
    output_len: int
    client: dict[str, Any]
    deployment: dict[str, Any]
    prediction: Prediction
    profile: str = ""
    """The cost profile the kernels were priced with: the engine's own, or the ``--profile``
    laid over it (an overlay such as another engine's profile changes the figures, and the
    result says so rather than carrying the engine's name alone)."""
    uncertainty: dict[str, Any] = field(default_factory=dict)
    """How far the model's figures fell from measured runs like this one
    (``costmodel.serving.uncertainty.ServingBand.as_dict``)."""

    def to_dict(self) -> dict[str, Any]:
        option = {**self.deployment, **self.prediction.row()}
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "gpu": self.gpu,
            "engine": self.engine,
            "profile": self.profile or self.engine,
            "weights": self.weights,
            "input": self.input_len,
            "output": self.output_len,
            "client": self.client,
            "options": [option],
            "verdict": _verdict(option),
            "uncertainty": self.uncertainty,
        }

    def figures(self) -> list[Any]:
        """Latency percentiles of the deployment: TTFT and TPOT, mean and p50/p90/p99."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        o = self.to_dict()["options"][0]
        stats = ("mean", "p50", "p90", "p99")
        fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT (ms)", "TPOT (ms)"))
        for col, metric in enumerate(("ttft_ms", "tpot_ms"), start=1):
            values = [o[metric] if s == "mean" else o.get(f"{metric}_{s}") for s in stats]
            fig.add_trace(go.Bar(x=list(stats), y=values, name=metric), row=1, col=col)
        fig.update_layout(
            title=f"{self.model} on {o['gpus']} x {self.gpu}, {self.engine}: "
            f"{o['output_tokens_per_s']:,.0f} output tokens/s",
            showlegend=False,
        )
        return [fig]


ENGINES: tuple[str, ...] = tuple(serving_engines())
"""The serving engines with a profile (``catalog/data/serving_engines.yaml``), in its order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOption:
    """One scheduler setting a launch may override: its type, accepted range and the engines
    that have it (one table for the API check and the CLI help)."""

    kind: type
    low: float = 0.0
    high: float = 0.0
    engines: tuple[str, ...] = ENGINES

    def accepted(self) -> str:
        if self.kind is bool:
            return "true or false"
        if self.kind is tuple:
            return (
                f"one or more ascending whole numbers in [{self.low:.0f}, {self.high:.0f}] "
                "(a list; on the command line joined by ':', e.g. 1:2:4:8)"
            )
        if self.kind is int:
            return f"a whole number in [{self.low:.0f}, {self.high:.0f}]"
        return f"a number in ({self.low:g}, {self.high:g}]"


CHUNKING = ("tensorrt-llm", "vllm", "sglang")
"""The engines with a chunked-prefill switch and an overlap-scheduler switch (ATOM has
neither: its scheduler takes prompts whole, its output is always deferred one iteration;
``serving_engines.yaml``)."""
TRT_ONLY = ("tensorrt-llm",)
SGLANG_ONLY = ("sglang",)
PREFILL_STAGE = ("sglang", "tensorrt-llm")
"""Engines whose disaggregated launches state the prefill workers' token budget and memory
fraction apart: SGLang's recipes (``sglang_config.prefill``) and TensorRT-LLM's (the context
servers' ``max_num_tokens`` and ``free_gpu_memory_fraction``, ``trtllm_config.prefill``)."""
VLLM_ONLY = ("vllm",)
MAX_SCHEDULER_SLOTS = 2**24
"""Upper bound on token budgets, running requests and held iterations: far above any engine's
setting (TensorRT-LLM's default max_batch_size is 2,048, max_num_tokens 8,192), low enough that
every value stays an exact float."""
MAX_NUM_REQUESTS = 1_000_000
"""Most requests in one benchmark run (the open-loop wait replays every arrival), stated or the
client's default (``deployment.measured_requests``); also the most in flight at once, which are
requests of that run (:func:`check_requests`)."""

MAX_REQUEST_RATE = 1e6
"""Most requests/s an open-loop client may send: 10^6 a second is beyond any deployment's
capacity by orders of magnitude (the most one benchmark run holds, :data:`MAX_NUM_REQUESTS`,
would arrive in a second), so a larger rate is a typo (1e300 was answered as saturated)."""

MAX_RUN_SECONDS = 1e9
"""Longest open-loop benchmark run, ``num_requests / request_rate`` seconds: 10^9 s (~32
years, the bound on a cluster-trace job) is far past any benchmark, and every figure is the idle
engine's long before it; at a subnormal rate (2e-313/s) the arrival times overflowed to inf and
the TTFT came out nan."""


def check_requests(value: int | None, name: str) -> None:
    """Refuse a count of requests (``num_requests``; in flight: ``concurrency``, a static
    ``batch``, a disaggregated pool's ``*_batch`` cap) outside 1 to :data:`MAX_NUM_REQUESTS`:
    the one rule of every serving question. Requests in flight are requests of one run, and 10^6
    is far above any engine's running cap (TensorRT-LLM max_batch_size 2,048; vLLM
    max_num_seqs 1,024), so a larger count is a typo: 10^9 in flight was priced as an 8-hour
    queue. ``None``: not given."""
    require(
        value is None or (is_whole(value) and 1 <= value <= MAX_NUM_REQUESTS),
        f"--{name.replace('_', '-')} must be 1 to {MAX_NUM_REQUESTS:,} requests (the most one "
        f"benchmark run holds), got {value!r}",
        field=name,
    )


ENGINE_OPTIONS: dict[str, EngineOption] = {
    "max_num_batched_tokens": EngineOption(kind=int, low=1, high=MAX_SCHEDULER_SLOTS),
    "max_num_seqs": EngineOption(kind=int, low=1, high=MAX_SCHEDULER_SLOTS),
    "prefix_caching": EngineOption(kind=bool),
    "chunked_prefill": EngineOption(kind=bool, engines=CHUNKING),
    "memory_fraction": EngineOption(kind=float, low=0.0, high=1.0),
    "overlap_scheduler": EngineOption(kind=bool, engines=CHUNKING),
    "batch_wait_timeout_iters": EngineOption(
        kind=int, low=0, high=MAX_SCHEDULER_SLOTS, engines=TRT_ONLY
    ),
    "batch_wait_max_tokens_ratio": EngineOption(kind=float, low=0.0, high=1.0, engines=TRT_ONLY),
    "adp_balance_timeout_iters": EngineOption(
        kind=int, low=0, high=MAX_SCHEDULER_SLOTS, engines=TRT_ONLY
    ),
    "max_prefill_tokens": EngineOption(
        kind=int, low=1, high=MAX_SCHEDULER_SLOTS, engines=SGLANG_ONLY
    ),
    "mixed_chunk": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "recv_interval": EngineOption(kind=int, low=1, high=MAX_SCHEDULER_SLOTS, engines=SGLANG_ONLY),
    "deepgemm_moe_worst_case": EngineOption(kind=bool, engines=VLLM_ONLY),
    "flashinfer_fp8_gemm": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "moe_a2a_deepep": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "decode_moe_a2a_deepep": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "prefill_max_num_batched_tokens": EngineOption(
        kind=int, low=1, high=MAX_SCHEDULER_SLOTS, engines=PREFILL_STAGE
    ),
    "prefill_max_prefill_tokens": EngineOption(
        kind=int, low=1, high=MAX_SCHEDULER_SLOTS, engines=SGLANG_ONLY
    ),
    "prefill_memory_fraction": EngineOption(kind=float, low=0.0, high=1.0, engines=PREFILL_STAGE),
    "prefill_chunked_prefill": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "prefill_overlap_scheduler": EngineOption(kind=bool, engines=PREFILL_STAGE),
    "prefill_speculative": EngineOption(kind=bool, engines=SGLANG_ONLY),
    "cuda_graph_batch_sizes": EngineOption(
        kind=tuple, low=1, high=MAX_SCHEDULER_SLOTS, engines=TRT_ONLY
    ),
}
"""Scheduler settings of the engine profile a launch may override (``infer(engine_options=)``):
TensorRT-LLM ``max_num_tokens``/``max_batch_size``/``enable_chunked_prefill``/
``free_gpu_memory_fraction``/``disable_overlap_scheduler``/``batch_wait_*``/
``attention_dp_config.timeout_iters`` (with ``enable_balance``), vLLM
``--max-num-batched-tokens``/``--max-num-seqs``/``--gpu-memory-utilization``/
``--async-scheduling``, ``prefix_caching`` every engine's prefix reuse (TensorRT-LLM
``enable_block_reuse``, vLLM ``--enable-prefix-caching``, SGLang ``--disable-radix-cache`` off,
ATOM ``--enable_prefix_caching``), SGLang ``--chunked-prefill-size``/``--max-running-requests``/
``--mem-fraction-static``/``--max-prefill-tokens``/``--enable-mixed-chunk`` (``mixed_chunk``:
prompt chunks share iterations with the running decodes instead of running ahead of them)/
``--scheduler-recv-interval`` (``recv_interval``: decode batches between polls for new requests;
disaggregated, the decode workers', whose poll the prefill of a new request waits for).
The batch-wait and attention-DP balance settings exist only in TensorRT-LLM's PyTorch executor
(``PyExecutor``); ``max_prefill_tokens``, ``mixed_chunk`` and ``recv_interval`` only in SGLang;
``deepgemm_moe_worst_case`` (vLLM 0.12's DeepGEMM MoE computing its worst-case layout at every
batch size, ``EngineProfile.deepgemm_moe_worst_case``) only in vLLM; ``flashinfer_fp8_gemm``
(SGLang's dense block-FP8 linear layers on FlashInfer's TRT-LLM GEMM, ``--fp8-gemm-backend
flashinfer_trtllm`` or DeepGEMM turned off on Blackwell, ``EngineProfile.flashinfer_fp8_gemm``)
only in SGLang, with block-FP8 weights on a Blackwell GPU (:func:`_check_fp8_gemm`). ``moe_a2a_deepep`` is
SGLang's ``--moe-a2a-backend deepep`` on every worker (or ``mori``, AMD's kernels of the same
exchange): under attention DP the MoE layers dispatch
and combine each token's top-k copies all-to-all (DeepEP) instead of the default all-gather /
reduce-scatter of the DP group (``EngineProfile.moe_dp_communication``);
``decode_moe_a2a_deepep`` sets it on a disaggregated deployment's decode workers only
(``EngineProfile.decode_moe_dp_communication``). The other way round, ``prefill_*`` set a
disaggregated deployment's prefill workers only, as SGLang launches them apart (srt-slurm
recipes' ``sglang_config.prefill``): ``prefill_max_num_batched_tokens`` their
``--chunked-prefill-size``, ``prefill_max_prefill_tokens`` their ``--max-prefill-tokens``, ``prefill_memory_fraction``
their ``--mem-fraction-static``, ``prefill_chunked_prefill`` false their ``--chunked-prefill-size
-1`` (no chunking: each batch bounded by the prefill limit; ``deployment.prefill_worker_engine``),
``prefill_overlap_scheduler`` their overlap scheduler where it differs from the decode workers'
(an SGLang launch that gives only the decode workers EAGLE, which turns the overlap off there),
``prefill_speculative`` false a speculative deployment whose prefill workers run no draft module
(that launch: ``EngineProfile.prefill_worker_speculation``);
TensorRT-LLM's context servers state ``max_num_tokens`` (``prefill_max_num_batched_tokens``, per
attention rank) and ``free_gpu_memory_fraction`` (``prefill_memory_fraction``) apart from the
generation servers' too. Values are the launch's, per
engine: under attention DP SGLang gives each rank ``max_num_batched_tokens`` and
``max_num_seqs`` divided by the DP size (``EngineProfile.per_attention_rank``)."""

STAGE_OPTIONS: dict[str, tuple[str, str]] = {
    "decode_moe_a2a_deepep": ("decode", "moe_a2a_deepep"),
    "prefill_max_num_batched_tokens": ("prefill", "max_num_batched_tokens"),
    "prefill_max_prefill_tokens": ("prefill", "max_prefill_tokens"),
    "prefill_memory_fraction": ("prefill", "memory_fraction"),
    "prefill_chunked_prefill": ("prefill", "chunked_prefill"),
    "prefill_overlap_scheduler": ("prefill", "overlap_scheduler"),
    "prefill_speculative": ("prefill", "speculative"),
}
"""Engine options that set one pool of a disaggregated deployment -> (the pool, the option of
every worker): refused for aggregated serving (:func:`_check_stage_options`)."""


def _check_stage_options(options: Mapping[str, Any], disagg: bool) -> None:
    """Refuse, in one line, the options of :data:`STAGE_OPTIONS` without a disaggregated
    deployment (an aggregated engine has no prefill or decode workers to set apart), and
    ``prefill_chunked_prefill`` false beside ``prefill_max_num_batched_tokens`` (SGLang's one
    flag: ``--chunked-prefill-size -1`` turns chunking off, a size turns it on)."""
    given = [name for name in STAGE_OPTIONS if name in options]
    if not disagg and given:
        pools = sorted({STAGE_OPTIONS[n][0] for n in given})
        # Every worker's own option where one exists (prefill_speculative has none).
        instead = ", ".join(
            STAGE_OPTIONS[n][1] for n in given if STAGE_OPTIONS[n][1] in ENGINE_OPTIONS
        )
        raise InputError(
            f"engine option{'s' if len(given) > 1 else ''} {', '.join(given)} "
            f"set{'' if len(given) > 1 else 's'} the "
            f"{' and '.join(pools)} workers of disaggregated serving; give --prefill-workers "
            f"and --decode-workers" + (f", or use {instead}" if instead else ", or leave it out"),
            field="engine_options",
        )
    require(
        options.get("prefill_chunked_prefill", True)
        or "prefill_max_num_batched_tokens" not in options,
        "engine options prefill_chunked_prefill false and prefill_max_num_batched_tokens "
        "contradict each other (SGLang --chunked-prefill-size -1 turns the prefill workers' "
        "chunking off); give one",
        field="engine_options",
    )


def _check_fp8_gemm(eng: EngineProfile, fmt: WeightFormat, device: Device) -> None:
    """Refuse FlashInfer's block-FP8 GEMM (engine option ``flashinfer_fp8_gemm``) where SGLang
    would not run it: it is a Blackwell kernel (``is_blackwell_supported`` in SGLang's
    ``fp8_utils``) for block-FP8 linear layers, so on another GPU or format the option would
    change nothing and say so by silence."""
    if not eng.flashinfer_fp8_gemm:
        return
    require(
        device.generation == "blackwell" and fmt.name == "fp8_block",
        "engine option flashinfer_fp8_gemm prices FlashInfer's block-FP8 GEMM, which SGLang "
        f"runs on Blackwell GPUs for fp8_block weights; got {device.id} ({device.generation}) "
        f"with {fmt.name} weights",
        field="engine_options",
    )


def _speculative_running_cap(
    eng: EngineProfile, attention_dp: int, *, aggregated: bool
) -> tuple[int, str] | None:
    """The running cap a speculative launch that states none gets from the engine itself, per
    attention-DP rank, and its note; None where the engine sets none or the launch stated one
    (:meth:`EngineProfile.for_speculation`). SGLang divides its 48 over the DP ranks and
    asserts the share is positive (``tp_worker.py`` "max_running_request is zero"): a launch
    that would leave a rank none does not start, and is refused."""
    capped = eng.for_speculation()
    if capped is eng:
        return None
    cap = capped.max_num_seqs
    where, flag = (
        ("engine", "engine option max_num_seqs=N")
        if aggregated
        else ("decode worker", "--decode-batch N (the launch's --max-running-requests // DP)")
    )
    require(
        cap // attention_dp >= 1,
        f"speculative decoding without a stated running cap: {eng.name}'s own {cap} split over "
        f"{attention_dp} attention-DP ranks leaves 0 per rank, and it refuses to start; "
        f"state the launch's cap: {flag}",
        field="engine_options",
    )
    share = cap // attention_dp
    split = (
        f" ({share} per attention rank, {share * attention_dp} in all)" if attention_dp > 1 else ""
    )
    return share, (
        f"running requests capped at {cap} per {where}{split}: {eng.name}'s own cap when "
        f"speculative decoding runs without a stated one; {flag} states the launch's own"
    )


def _engine_options(options: Mapping[str, Any], engine: str) -> dict[str, Any]:
    """``options`` checked against :data:`ENGINE_OPTIONS` (names, engine, types, ranges)."""
    accepted = ", ".join(ENGINE_OPTIONS)
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name not in ENGINE_OPTIONS:
            raise InputError(
                f"engine option {name!r} unknown; accepted: {accepted}", field="engine_options"
            )
        opt = ENGINE_OPTIONS[name]
        require(
            engine in opt.engines,
            f"engine option {name} is a {' / '.join(opt.engines)} setting, not {engine}'s",
            field="engine_options",
        )
        if opt.kind is bool:
            ok = is_bool(value)
        elif opt.kind is tuple:
            # One size alone (the command line's ``=8``) or a sequence of them, NumPy's too.
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = (value,)
            sizes = list(value) if isinstance(value, (list, tuple, np.ndarray)) else []
            ok = bool(sizes) and all(
                isinstance(s, numbers.Integral)
                and not isinstance(s, (bool, np.bool_))
                and opt.low <= int(s) <= opt.high
                for s in sizes
            )
            ok = ok and all(int(a) < int(b) for a, b in itertools.pairwise(sizes))
            if ok:
                value = tuple(int(s) for s in sizes)
        elif opt.kind is int:
            ok = (
                isinstance(value, int) or (isinstance(value, float) and value.is_integer())
            ) and not isinstance(value, bool)
            ok = ok and opt.low <= value <= opt.high
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and opt.low < value <= opt.high
        require(ok, f"engine option {name} must be {opt.accepted()}", field="engine_options")
        out[name] = opt.kind(value)
    # SGLang --moe-a2a-backend deepep: DeepEP's dispatch/combine all-to-all (server_args.py
    # moe_a2a_backend; the default "none" gathers and scatters, serving_engines.yaml).
    if out.pop("moe_a2a_deepep", False):
        out["moe_dp_communication"] = "all_to_all"
    if "decode_moe_a2a_deepep" in out:
        deepep = out.pop("decode_moe_a2a_deepep")
        out["decode_moe_dp_communication"] = "all_to_all" if deepep else "gather_scatter"
    if "mixed_chunk" in out:
        # SGLang --enable-mixed-chunk: the scheduler mixes the running decodes into each
        # prefill batch (ScheduleBatch.mix_with_running) instead of pausing them.
        out["prefill_policy"] = "mixed" if out.pop("mixed_chunk") else "prefill_first"
    if "prefill_overlap_scheduler" in out:
        out["prefill_worker_overlap"] = out.pop("prefill_overlap_scheduler")
    if "prefill_speculative" in out:
        out["prefill_worker_speculation"] = out.pop("prefill_speculative")
    if "max_num_seqs" in out:
        # A stated running cap (SGLang --max-running-requests), which SGLang splits over the
        # attention-DP ranks where its default is each rank's own (per_attention_rank).
        out["stated_running_cap"] = True
    if "memory_fraction" in out:
        # A stated fraction (SGLang --mem-fraction-static) replaces the engine's own rule.
        out["static_memory_rule"] = None
    return out


def _verdict(o: dict[str, Any]) -> str:
    if not o["fits"]:
        return (
            f"does not fit: {o['mode']} on {n_gpus(o['gpus'])} leaves no room for one request's KV "
            "cache after the weights; add GPUs (--tp/--ep), quantize (--weights) or shorten requests"
        )
    state = "saturated (queueing)" if o["saturated"] else "below saturation"
    nodes = o.get("nodes", 1)
    where = f" ({nodes} nodes of {o['gpus_per_node']})" if nodes > 1 else ""
    return (
        f"{o['mode']} on {n_gpus(o['gpus'])}{where}: TTFT {o['ttft_ms']:.0f} ms mean "
        f"(p99 {o['ttft_ms_p99']:.0f}), TPOT {o['tpot_ms']:.1f} ms, "
        f"{o['output_tokens_per_s']:,.0f} output tok/s ({o['output_tokens_per_s_per_gpu']:,.0f}"
        f"/GPU), {state}, KV cache {o['kv_cache_occupancy']:.0%} full"
    )


def check_prompt_budget(
    eng: EngineProfile,
    input_len: int,
    *,
    caller: Literal["infer", "search"] = "infer",
    stage: str = "",
) -> None:
    """Refuse a prompt an engine without chunked prefill cannot schedule: it runs a whole
    prompt in one iteration, so TensorRT-LLM refuses a launch whose max_num_tokens is below
    the longest prompt it must admit, and ATOM's scheduler never takes a prompt above its
    budget (``Scheduler.schedule`` stops before it, every iteration); SGLang, which starts a
    batch's first prompt whole under ``--max-prefill-tokens``, is not refused. ``caller``: ``infer``
    takes engine options, the search does not; the remedy names what the caller can do.
    ``stage``: ``"prefill_"`` for a disaggregated deployment, whose prefill workers alone run
    prompts (``eng`` is then their engine, ``prefill_worker_engine``; the decode workers take
    the prompt's KV cache, not its tokens), and whose options carry that prefix."""
    # The prefill workers' own options exist for the engines whose launches state them apart.
    stage = stage if eng.name in PREFILL_STAGE else ""
    who = "prefill workers' " if stage else ""
    if caller == "infer":
        # The prefill workers' own switch where the engine has one, else the engine's (it
        # reaches the prefill workers too: TensorRT-LLM's enable_chunked_prefill).
        chunking = f"{stage}chunked_prefill"
        if eng.name not in ENGINE_OPTIONS[chunking].engines:
            chunking = "chunked_prefill"
        can_chunk = eng.name in CHUNKING and eng.name in ENGINE_OPTIONS[chunking].engines
        remedy = f"raise it (--engine-options {stage}max_num_batched_tokens=N)" + (
            f" or turn chunking on ({chunking}=true)" if can_chunk else ""
        )
    else:
        chunking = ", ".join(n for n, e in serving_engines().items() if e.chunked_prefill)
        remedy = (
            f"search an engine that chunks prompts ({chunking}), or price a launch with a "
            "larger budget under load (infer --engine-options max_num_batched_tokens=N)"
        )
    # SGLang with chunking off has no chunk: a batch's first prompt starts whole whatever its
    # --max-prefill-tokens (steady_state.prefill_batch_prompts), so nothing to refuse.
    whole_first = eng.max_prefill_tokens is not None
    require(
        eng.chunked_prefill or whole_first or eng.max_num_batched_tokens >= input_len,
        f"{eng.name}'s {who}max_num_batched_tokens {eng.max_num_batched_tokens} is below the "
        f"{input_len}-token prompt and chunked_prefill is off: {remedy}",
        field="engine_options" if caller == "infer" else "input_len",
    )


def check_decoder(spec: ModelSpec) -> None:
    """Refuse an encoder (BERT): it generates no tokens, so there is no TTFT, TPOT or goodput
    to price. The load model and the search share this rule (the search ranked deployments of
    bert-large by output tokens/s); the static table refuses in its cost model's words."""
    require(spec.causal, f"{spec.name} is an encoder; serving applies to decoders", field="model")


def check_lengths(spec: ModelSpec, input_len: int, output_len: int) -> None:
    """Refuse requests the model cannot hold: each length >= 1, together at most its maximum
    context (an engine refuses a longer request: vLLM/SGLang ``max_model_len``, TensorRT-LLM
    ``max_seq_len``). One rule for the load model, its sweep, the search and the static table."""
    for name, value in (("input_len", input_len), ("output_len", output_len)):
        require(
            is_whole(value) and value >= 1,
            f"--{name.split('_')[0]} must be a whole number of tokens >= 1, got {value!r}",
            field=name,
        )
    if not spec.causal:
        return  # an encoder serves no requests: refused by check_decoder, or the static table
    require(
        input_len + output_len <= spec.max_seq_len,
        f"--input {input_len} + --output {output_len} = {input_len + output_len:,} tokens exceed "
        f"{spec.name}'s maximum context of {spec.max_seq_len:,}; an engine refuses such a "
        f"request; accepted: at most {spec.max_seq_len:,} together",
        field="input_len",
    )


def served_format(
    model: str | ModelSpec,
    weights: str,
    spec: ModelSpec | None = None,
    device: Device | None = None,
) -> WeightFormat:
    """The weight format to serve ``model`` in: ``weights`` by name, or for ``"auto"`` the
    format its published checkpoint stores when ``model`` names a catalogued pre-quantized one
    (``catalog.served_weights``: ``deepseek-ai/DeepSeek-R1`` -> fp8_block), else bf16. ``spec``
    is ``model`` already read (a config.json path is then not read again). A config.json whose
    ``quantization_config`` is a scheme not read here is refused under ``"auto"``. ``device``:
    the GPU it is served on, which may lack bf16 (``formats.sixteen_bit_on``: ``auto`` serves
    the bf16 checkpoint as fp16 there, a stated bf16 is refused)."""
    fmt = _named_format(model, weights, spec)
    if device is None:
        return fmt
    return weight_format(
        sixteen_bit_on(fmt.name, device, stated=weights != "auto", flag="--weights")
    )


def _named_format(model: str | ModelSpec, weights: str, spec: ModelSpec | None) -> WeightFormat:
    if weights != "auto":
        return weight_format(weights)
    read = model if isinstance(model, ModelSpec) else spec
    if read is not None and read.unread_quantization:
        raise InputError(
            f"--weights auto: the quantization_config of {read.name} "
            f"{read.unread_quantization}, a scheme gpuscale does not read; accepted: "
            f"--weights {', '.join(FORMATS)}",
            field="weights",
        )
    return _stored_format(model, spec)


def _stored_format(model: str | ModelSpec, spec: ModelSpec | None = None) -> WeightFormat:
    """The format the checkpoint stores as far as it is read (bf16 for a scheme not read)."""
    if isinstance(model, str):
        return weight_format(catalog.served_weights(model, spec))
    return weight_format(model.stored_weights or "bf16")


def served_kv_dtype(
    model: str | ModelSpec,
    weights: str,
    fmt: WeightFormat,
    eng: EngineProfile,
    kv_dtype: str,
    spec: ModelSpec | None = None,
    device: Device | None = None,
) -> str:
    """The KV-cache dtype ``eng`` stores for ``--kv-dtype`` ``kv_dtype`` serving ``model`` in
    ``fmt`` (``weights`` as given): ``auto`` follows the checkpoint's declared KV quantization
    when the published checkpoint is served as stored, the engine's own rule when the launch
    quantizes the weights (``catalog.serving_engines.kv_cache_dtype``, one vocabulary per
    engine in ``serving_engines.yaml``). ``spec``: ``model`` already read (a config.json path is
    not read again). ``device``: the GPU, which may lack bf16 (``formats.sixteen_bit_on``: the
    16-bit cache of ``auto`` is fp16 there, a stated bf16 is refused)."""
    stored = _stored_format(model, spec)
    as_stored = weights == "auto" or fmt.name == stored.name
    if isinstance(model, ModelSpec):
        declared = model.stored_kv_cache or None
    else:
        declared = catalog.served_kv_cache(model, spec)
    out = kv_cache_dtype(
        eng,
        kv_dtype,
        checkpoint_kv=declared if as_stored else None,
        requantized=not as_stored and fmt.weight_bytes < 2.0,
    )
    if device is None:
        return out
    return sixteen_bit_on(out, device, stated=kv_dtype != "auto", flag="--kv-dtype")


@checks_arguments
def infer(
    model: str | ModelSpec,
    *,
    gpu: str,
    engine: str = "vllm",
    weights: str = "auto",
    kv_dtype: str = "auto",
    input_len: int = 1024,
    output_len: int = 1024,
    concurrency: int | None = None,
    request_rate: float | None = None,
    num_requests: int | None = None,
    prefix_hit: float = 0.0,
    input_cv: float = 0.0,
    output_cv: float = 0.0,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    attention_dp: int = 1,
    replicas: int = 1,
    prefill_workers: int | None = None,
    prefill_tp: int = 1,
    prefill_ep: int = 1,
    prefill_attention_dp: int = 1,
    prefill_batch: int | None = None,
    decode_workers: int | None = None,
    decode_tp: int = 1,
    decode_ep: int = 1,
    decode_attention_dp: int = 1,
    decode_batch: int | None = None,
    decode_routing: str = "least-loaded",
    gpus_per_node: int | None = None,
    inter: str = catalog.DEFAULT_INTER,
    profile: str | None = None,
    adp_balance_timeout_iters: int = 0,
    engine_options: Mapping[str, Any] | None = None,
    speculative: str = "none",
    draft_tokens: int | None = None,
    acceptance: float | None = None,
) -> ServingResult:
    """Predict TTFT, TPOT, end-to-end latency and throughput of ``model`` served by ``engine``.

    ``tp`` counts all GPUs of one pipeline stage; ``attention_dp`` of them run attention on
    separate request groups, ``ep`` shards the experts. Give ``prefill_workers`` and
    ``decode_workers`` for disaggregated serving. Closed loop with ``concurrency`` (the means
    of a benchmark of ``num_requests`` measured requests that starts with a burst of
    ``concurrency`` on a drained engine, as aiperf runs it after its warm-up; with random
    lengths, ``input_cv``/``output_cv`` > 0, the staggered steady state with the first
    ``concurrency`` requests arriving as one burst); open loop (Poisson) with ``request_rate``
    requests/s. ``num_requests`` unstated: 20 x ``concurrency`` for a closed loop with fixed
    lengths (AIConfigurator's aiperf command), else 1000 (``deployment.measured_requests``).
    ``decode_routing`` (disaggregated): how the router picks a decode worker for a request:
    one with a free slot (``least-loaded``), each in turn (``round-robin``, Dynamo's frontend
    default), or at random (``random``: several frontends behind a load balancer); a blind
    router makes a request wait on a busy worker while another has a free slot.
    ``adp_balance_timeout_iters`` > 0 turns on TensorRT-LLM's attention-DP context balancing
    (``attention_dp_config: {enable_balance: true, timeout_iters: N}``). ``engine_options``
    overrides the engine's scheduler defaults as a launch sets them (:data:`ENGINE_OPTIONS`).
    ``speculative="mtp"`` with ``draft_tokens`` K runs speculative decoding with the model's
    multi-token-prediction module (on the decode workers of a disaggregated deployment; the
    prefill workers run the module over the prompt); ``acceptance`` overrides the published
    per-token acceptance (:func:`gpuscale.api.speculative.speculation`)."""
    spec = model if isinstance(model, ModelSpec) else catalog.model(model)
    check_decoder(spec)
    check_lengths(spec, input_len, output_len)
    spec_dec = speculation_of(spec, speculative, draft_tokens, acceptance)
    require(
        (concurrency is None) != (request_rate is None),
        "give exactly one of --concurrency (closed loop) or --request-rate (open loop)",
        field="concurrency",
    )
    check_requests(concurrency, "concurrency")
    if request_rate is not None:
        require(
            0 < request_rate <= MAX_REQUEST_RATE,
            f"--request-rate must be a number of requests/s > 0 and at most "
            f"{MAX_REQUEST_RATE:,.0f}, got {request_rate}",
            field="request_rate",
        )
    check_requests(num_requests, "num_requests")
    require(0.0 <= prefix_hit < 1.0, "--prefix-hit must be in [0, 1)", field="prefix_hit")
    require(
        is_whole(replicas) and replicas >= 1,
        f"--replicas must be a whole number >= 1, got {replicas!r}",
        field="replicas",
    )
    # The engine's scheduler defaults depend on the GPU it starts on (vLLM: smaller
    # budget and running cap below 70 GiB and on A100; serving_engines.yaml).
    eng = engine_profile(engine).for_device(catalog.gpu(gpu))
    require(  # the bound of the engine option of the same name (10^30 was taken)
        is_whole(adp_balance_timeout_iters)
        and 0 <= adp_balance_timeout_iters <= MAX_SCHEDULER_SLOTS,
        f"--adp-balance-timeout-iters must be a whole number 0 to {MAX_SCHEDULER_SLOTS}, got "
        f"{adp_balance_timeout_iters!r}",
        field="adp_balance_timeout_iters",
    )
    if adp_balance_timeout_iters:
        eng = dataclasses.replace(eng, adp_balance_timeout_iters=adp_balance_timeout_iters)
    stated = "memory_fraction" in (engine_options or {})
    if engine_options:
        eng = dataclasses.replace(eng, **_engine_options(engine_options, eng.name))
        eng = _vllm_token_budget(eng, engine_options, gpu)
    # SGLang caps the running requests of a speculative launch that states no cap. Applied to
    # one aggregated engine, whose cap is engine option max_num_seqs; a disaggregated
    # deployment states each pool's own (--prefill-batch / --decode-batch).
    disagg = prefill_workers is not None or decode_workers is not None
    spec_note = ""
    spec_cap: tuple[int, str] | None = None
    if spec_dec is not None and not disagg:
        spec_cap = _speculative_running_cap(eng, attention_dp, aggregated=True)
    if spec_cap:
        eng, spec_note = eng.for_speculation(), spec_cap[1]
    if disagg:
        check_prompt_budget(prefill_worker_engine(eng), input_len, stage="prefill_")
    else:
        check_prompt_budget(eng, input_len)
    if eng.max_draft_tokens is not None and spec_dec is not None:
        require(
            spec_dec.draft_tokens <= eng.max_draft_tokens,
            f"--draft-tokens {spec_dec.draft_tokens}: engine {eng.name} takes at most "
            f"{eng.max_draft_tokens} speculative tokens; accepted: --draft-tokens 1 to "
            f"{eng.max_draft_tokens}",
            field="draft_tokens",
        )
    fmt = served_format(model, weights, spec, catalog.gpu(gpu))
    check_runs_on(fmt, catalog.gpu(gpu))
    _check_fp8_gemm(eng, fmt, catalog.gpu(gpu))
    kv_dtype = served_kv_dtype(model, weights, fmt, eng, kv_dtype, spec, catalog.gpu(gpu))
    prof = _profile(eng.cost_profile, profile)
    for name, cv in (("input_cv", input_cv), ("output_cv", output_cv)):
        require(
            0.0 <= cv <= 10.0,
            f"--{name.replace('_', '-')} must be in [0, 10], got {cv!r}",
            field=name,
        )
    work = Workload(
        input_len=float(input_len),
        output_len=float(output_len),
        # An engine without prefix caching computes the shared prefix again in every prompt.
        prefix_hit=prefix_hit if eng.prefix_caching else 0.0,
        input_cv=input_cv,
        output_cv=output_cv,
    )
    # A run of N requests never has more than N in flight, whatever the client's concurrency
    # (vllm bench / sa-bench send min(C, N) at once); priced so and said in a note.
    in_flight = concurrency
    if concurrency is not None and num_requests is not None and num_requests < concurrency:
        in_flight = num_requests
    client = Client(concurrency=in_flight, request_rate=request_rate, num_requests=num_requests)
    measured = measured_requests(work, client)
    # The default of a fixed-length closed loop, 20 x concurrency, is a run too: past 10^6
    # requests (concurrency > 50,000) it is refused as a stated one is, not followed request by
    # request (the disaggregated closed loop took 87 s and 5.6 GB at concurrency 10^6).
    if measured > MAX_NUM_REQUESTS:  # only the closed loop's default: a stated count is checked
        raise InputError(
            f"--concurrency {concurrency}: a closed-loop run of fixed lengths measures "
            f"{BENCHMARK_ROUNDS} x {concurrency:,} = {measured:,} requests unless --num-requests "
            f"says otherwise, more than {MAX_NUM_REQUESTS:,} (the most one benchmark run holds); "
            f"accepted: --num-requests up to {MAX_NUM_REQUESTS:,}, or --concurrency up to "
            f"{MAX_NUM_REQUESTS // BENCHMARK_ROUNDS:,}",
            field="concurrency",
        )
    if request_rate is not None:
        # The open-loop wait replays the whole run (``steady_state.finite_run_wait``).
        run_s = measured / request_rate
        require(
            run_s <= MAX_RUN_SECONDS,
            f"--request-rate {request_rate:g}: {measured:,} requests would arrive over "
            f"{run_s:.3g} s, more than 10^9 s (~32 years); accepted: at least "
            f"{measured / MAX_RUN_SECONDS:g} requests/s for --num-requests {measured}",
            field="request_rate",
        )
    _check_stage_options(engine_options or {}, disagg)
    require(
        "prefill_speculative" not in (engine_options or {}) or spec_dec is not None,
        "engine option prefill_speculative sets whether the prefill workers run the draft "
        "module of speculative decoding, which this deployment does not run; give "
        "--speculative, or leave it out",
        field="engine_options",
    )
    _check_deepep(
        spec, engine_options or {},
        {"prefill": prefill_attention_dp, "decode": decode_attention_dp} if disagg
        else {"engine": attention_dp},
    )  # fmt: skip
    # One deployment at a time: the other one's layout would be ignored without a word.
    if disagg:
        given: dict[str, int | None] = {
            "tp": tp,
            "pp": pp,
            "ep": ep,
            "attention_dp": attention_dp,
            "replicas": replicas,
        }
        stray, words = "aggregated", "--prefill-* and --decode-* set the pools"
    else:
        given = {
            f"{stage}_{what}": value
            for stage, values in (
                ("prefill", (prefill_tp, prefill_ep, prefill_attention_dp, prefill_batch)),
                ("decode", (decode_tp, decode_ep, decode_attention_dp, decode_batch)),
            )
            for what, value in zip(("tp", "ep", "attention_dp", "batch"), values, strict=True)
        }
        stray, words = "disaggregated", "give --prefill-workers and --decode-workers too"
    for name, setting in given.items():
        require(
            setting is None if name.endswith("batch") else setting == 1,
            f"--{name.replace('_', '-')} {setting} applies only to {stray} serving; {words}",
            field=name,
        )
    require(
        disagg or decode_routing == "least-loaded",
        f"--decode-routing {decode_routing} applies only to disaggregated serving; give "
        "--prefill-workers and --decode-workers too",
        field="decode_routing",
    )
    if disagg:
        require(
            eng.disaggregated,
            f"engine {eng.name} is modelled aggregated only (its disaggregated KV hand-off was "
            f"not read); accepted for disaggregated serving: "
            f"{', '.join(n for n, e in serving_engines().items() if e.disaggregated)}",
            field="engine",
        )
        require(
            prefill_workers is not None and decode_workers is not None,
            "disaggregated serving needs both --prefill-workers and --decode-workers",
            field="prefill_workers",
        )
        assert prefill_workers is not None and decode_workers is not None  # for mypy
        for name, workers in (
            ("prefill_workers", prefill_workers),
            ("decode_workers", decode_workers),
        ):
            require(
                is_whole(workers) and workers >= 1,
                f"--{name.replace('_', '-')} must be a whole number >= 1, got {workers!r}",
                field=name,
            )
        for name, cap in (("prefill_batch", prefill_batch), ("decode_batch", decode_batch)):
            check_requests(cap, name)
        if spec_dec is not None and decode_batch is None:
            # The decode workers run the draft; with no stated cap SGLang sets its own.
            spec_cap = _speculative_running_cap(eng, decode_attention_dp, aggregated=False)
        if spec_cap:
            decode_batch, spec_note = spec_cap
        p_pool = Pool(
            max_batch=prefill_batch,
            workers=prefill_workers,
            par=_par(spec, prefill_tp, 1, prefill_ep, prefill_attention_dp, "prefill_"),
        )
        require(
            decode_routing in ROUTINGS,
            f"--decode-routing {decode_routing!r}: accepted {', '.join(ROUTINGS)}",
            field="decode_routing",
        )
        d_pool = Pool(
            max_batch=decode_batch,
            routing=decode_routing,
            workers=decode_workers,
            par=_par(spec, decode_tp, 1, decode_ep, decode_attention_dp, "decode_"),
        )
        _check_deepgemm(spec, eng, fmt, catalog.gpu(gpu), (p_pool.par, d_pool.par))
        per_node = catalog.node_size(catalog.gpu(gpu), gpus_per_node)
        _check_layout(eng, p_pool.par, per_node, "prefill_")
        _check_layout(eng, d_pool.par, per_node, "decode_")
        _deployment_size(p_pool.gpus + d_pool.gpus, "prefill_workers")
        placed = pools_placement(p_pool, d_pool, per_node)
        cluster = deployment_cluster(gpu, placed, gpus_per_node, inter)
        for stage, pool, need in (
            ("prefill workers", p_pool, input_len),
            ("decode workers", d_pool, input_len + output_len),
        ):
            # The prefill workers with their own chunk and limit (prefill_worker_engine).
            prefill = pool is p_pool
            pool_eng = prefill_worker_engine(eng) if prefill else eng
            own = prefill and eng.prefill_memory_fraction is not None
            drafts = prefill_worker_speculation(eng, spec_dec) if prefill else spec_dec
            _check_memory_fraction(
                spec, cluster, pool.par, fmt, kv_dtype, prof, pool_eng, work, drafts, need,
                stage, stated or own, "prefill_memory_fraction" if own else "memory_fraction",
            )  # fmt: skip
        pred = predict_disaggregated(
            spec, cluster, p_pool, d_pool, fmt, kv_dtype, prof, eng, work, client, spec_dec
        )
        deployment: dict[str, Any] = {
            "prefill_workers": prefill_workers,
            "prefill_tp": prefill_tp,
            "prefill_ep": prefill_ep,
            "prefill_attention_dp": prefill_attention_dp,
            "decode_workers": decode_workers,
            "decode_tp": decode_tp,
            "decode_ep": decode_ep,
            "decode_attention_dp": decode_attention_dp,
            "prefill_batch": prefill_batch,
            "decode_batch": decode_batch,
            "decode_routing": decode_routing,
            **_nodes(placed),
            "prefill_nodes": placed.nodes_of("prefill"),
            "decode_nodes": placed.nodes_of("decode"),
            "kv_transfer_within_node_share": placed.same_node_share("prefill", "decode"),
        }
    else:
        par = _par(spec, tp, pp, ep, attention_dp, "")
        _check_deepgemm(spec, eng, fmt, catalog.gpu(gpu), (par,))
        per_node = catalog.node_size(catalog.gpu(gpu), gpus_per_node)
        _check_layout(eng, par, per_node, "")
        _deployment_size(par.gpus * replicas, "replicas")
        group = Group(pool="replica", workers=replicas, tp=par.tp, pp=par.pp, field="tp")
        placed = place([group], per_node)
        cluster = deployment_cluster(gpu, placed, gpus_per_node, inter)
        _check_memory_fraction(
            spec, cluster, par, fmt, kv_dtype, prof, eng, work, spec_dec,
            input_len + output_len, "engine", stated,
        )  # fmt: skip
        pred = predict_aggregated(
            spec, cluster, par, replicas, fmt, kv_dtype, prof, eng, work, client, spec_dec
        )
        deployment = {
            "tp": tp,
            "pp": pp,
            "ep": ep,
            "attention_dp": attention_dp,
            "replicas": replicas,
            **_nodes(placed),
        }
    if spec_dec is not None:
        deployment.update(spec_dec.row())
        pred.notes.append(
            f"speculative decoding ({spec_dec.method}, {spec_dec.draft_tokens} draft tokens): "
            f"per-token acceptance {spec_dec.acceptance:.3f} ({spec_dec.source}), "
            f"{spec_dec.tokens_per_iteration:.2f} tokens per decode iteration"
        )
    if spec_note:
        pred.notes.append(spec_note)
    if spec.attention_chunks_unpriced(input_len + output_len):
        pred.notes.append(
            f"{spec.name}'s chunked attention ({spec.attention_chunk_layers} of "
            f"{spec.num_layers} layers attend within {spec.attention_chunk_size:,}-token chunks) "
            f"is priced as full attention: beyond one chunk ({input_len + output_len:,} tokens "
            "here) their attention time and KV cache are upper bounds"
        )
    if prefix_hit and not eng.prefix_caching:
        why = (
            "by default; engine option prefix_caching=true turns it on"
            if (engine_options or {}).get("prefix_caching") is None
            else "(engine option prefix_caching=false)"
        )
        pred.notes.append(
            f"--prefix-hit {prefix_hit:g} not applied: engine {eng.name} computes every prompt "
            f"in full, without prefix caching {why}"
        )
    if in_flight != concurrency:
        pred.notes.append(
            f"--num-requests {num_requests} is below --concurrency {concurrency}: at most "
            f"{in_flight} requests are ever in flight, priced at concurrency {in_flight}"
        )
    if weights == "auto":
        # Say what "auto" chose, so a 16-bit answer for a quantized repository is never silent.
        stored = _named_format(model, weights, spec).name
        if stored != fmt.name:  # the bf16 checkpoint on a GPU without bf16 (sixteen_bit_on)
            pred.notes.append(
                f"weights {fmt.name} (--weights auto): the checkpoint's {stored} served as "
                f"{fmt.name}, as the engines load it on {catalog.gpu(gpu).id}, which has no "
                f"{stored}"
            )
        elif fmt.name != "bf16":
            pred.notes.append(
                f"weights {fmt.name}: the format the checkpoint stores (--weights auto)"
            )
        else:
            pred.notes.append(
                "weights bf16 (--weights auto): no pre-quantized checkpoint format known for this "
                "model; give --weights to serve another format"
            )
    return ServingResult(
        model=spec.name,
        gpu=catalog.gpu(gpu).id,  # the catalog's id, whatever case it was typed in
        engine=eng.name,
        weights=fmt.name,
        input_len=input_len,
        output_len=output_len,
        client={
            "concurrency": concurrency,
            "request_rate": request_rate,
            "num_requests": measured,
        },
        deployment=deployment,
        prediction=pred,
        profile=prof.name,
        # A deployment that does not fit has no measured runs like it: no band (its figures are
        # not shown either, report.serving.print_serving).
        uncertainty=serving_band(
            engine=eng.name,
            mode=pred.mode,
            generation=cluster.device.generation,
            model=spec.name,
            speculative=spec_dec is not None,
            open_loop=request_rate is not None,
        ).as_dict()
        if pred.fits
        else {},
    )


def _check_deepep(spec: ModelSpec, options: Mapping[str, Any], dp: Mapping[str, int]) -> None:
    """Refuse a DeepEP option (``moe_a2a_deepep``, ``decode_moe_a2a_deepep``) the prediction
    would ignore: it sets how the MoE layers exchange tokens under attention DP
    (``EngineProfile.moe_dp_communication``, priced by ``IterationModel._communication`` only
    for MoE layers with ``attention_dp`` > 1), so on a dense model, or on pools that run no
    attention DP, it would give the default's figures under the option's name. ``dp``: the
    attention DP of each pool (``engine``; or ``prefill`` and ``decode``)."""
    for name, pools in (("moe_a2a_deepep", tuple(dp)), ("decode_moe_a2a_deepep", ("decode",))):
        if not options.get(name):
            continue
        require(
            spec.is_moe,
            f"engine option {name} sets the MoE layers' all-to-all; {spec.name} has no "
            "experts: leave it out",
            field="engine_options",
        )
        flags = " or ".join(
            "--attention-dp" if pool == "engine" else f"--{pool}-attention-dp" for pool in pools
        )
        require(
            any(dp.get(pool, 1) > 1 for pool in pools),
            f"engine option {name} sets the MoE all-to-all under attention DP, which this "
            f"deployment does not run; give {flags} > 1, or leave it out",
            field="engine_options",
        )


def _check_deepgemm(
    spec: ModelSpec,
    eng: EngineProfile,
    fmt: WeightFormat,
    device: Device,
    pars: tuple[Parallelism, ...],
) -> None:
    """Refuse engine option ``deepgemm_moe_worst_case`` where vLLM 0.12's DeepGEMM MoE would
    run in no pool of the deployment (``iteration.deepgemm_moe_skipped``, the rule the serving
    model prices it by): on a dense model, other weights, another GPU or MoE TP 8 and more it
    would give the default's figures under the option's name."""
    if not eng.deepgemm_moe_worst_case:
        return
    why = deepgemm_moe_skipped(spec, fmt, device, pars)
    require(
        why is None,
        "engine option deepgemm_moe_worst_case prices vLLM 0.12's DeepGEMM MoE, which runs "
        "block-FP8 experts (fp8_block weights) on GPUs of compute capability 9.0 or 10.0 below "
        f"MoE TP {DEEPGEMM_MOE_MAX_TP}; {why}: leave it out",
        field="engine_options",
    )


def _vllm_token_budget(eng: EngineProfile, options: Mapping[str, Any], gpu: str) -> EngineProfile:
    """A vLLM launch's running cap against its token budget per iteration, as vLLM settles
    them at start-up: a cap left to its default is lowered to a stated budget below it
    (``EngineArgs._set_default_args``: ``max_num_seqs = min(default, max_num_batched_tokens)``),
    and a stated cap above the budget is refused, as ``SchedulerConfig`` refuses it
    ("max_num_batched_tokens (...) must be greater than or equal to max_num_seqs (...)",
    vllm/config/scheduler.py ``_verify_args``), since every running request needs a token of
    each iteration. The budget may be the engine's default for the GPU
    (``serving_engines.yaml``)."""
    if eng.name != "vllm" or eng.max_num_batched_tokens >= eng.max_num_seqs:
        return eng
    if "max_num_seqs" not in options:
        return dataclasses.replace(eng, max_num_seqs=eng.max_num_batched_tokens)
    given = (
        "" if "max_num_batched_tokens" in options else f" (vLLM's default on {catalog.gpu(gpu).id})"
    )
    raise InputError(
        f"max_num_batched_tokens {eng.max_num_batched_tokens}{given} is below max_num_seqs "
        f"{eng.max_num_seqs}; vLLM refuses to start "
        "(max_num_batched_tokens must be >= max_num_seqs: each running request takes a token "
        "of every iteration); accepted: max_num_batched_tokens >= max_num_seqs",
        field="engine_options",
    )


def _check_memory_fraction(
    spec: ModelSpec,
    cluster: Cluster,
    par: Parallelism,
    fmt: WeightFormat,
    kv_dtype: str,
    prof: Profile,
    eng: EngineProfile,
    work: Workload,
    spec_dec: Speculation | None,
    need: int,
    stage: str,
    stated: bool,
    option: str = "memory_fraction",
) -> None:
    """Refuse a launch whose memory fraction leaves a worker less KV cache than one request of
    the run needs (``need`` tokens: the prompt on a prefill worker, prompt and output
    elsewhere) where a larger fraction would make room: the fraction SGLang derives itself
    (``EngineProfile.static_memory_rule``, its ``mem_fraction_static`` rule) or one the launch
    states (engine option ``memory_fraction``, ``stated``). The engines stop at start-up rather
    than serve such a run: SGLang with "Not enough memory. Please try to increase
    --mem-fraction-static" (``model_runner.py``), vLLM when the KV cache holds less than one
    sequence ("... larger than the maximum number of tokens that can be stored in KV cache ...
    try increasing `gpu_memory_utilization`", ``v1/core/kv_cache_utils.py``); and a SGLang pool
    shorter than a request rejects its prompt or cuts its output (scheduler.py:
    ``max_new_tokens = min(max_new_tokens, max_req_len - len(input) - 1)``). Showing it as a
    saturated engine would be an answer no engine gives. Deployments no fraction would fit are
    left to the prediction, which says so as every engine's ("weights leave no room for one
    request's KV cache")."""
    if eng.static_memory_rule is None and not stated:
        return
    kv, _, _ = kv_pool(spec, cluster, par, fmt, kv_dtype, prof, eng, work, spec_dec)
    if kv >= need:
        return
    whole = dataclasses.replace(eng, memory_fraction=1.0, static_memory_rule=None)
    if kv_pool(spec, cluster, par, fmt, kv_dtype, prof, whole, work, spec_dec)[0] < need:
        return
    room = (
        f"leaves the {stage} room for {max(kv, 0.0):,.0f} KV tokens per rank, less than one "
        f"{need:,}-token request"
    )
    if stated:
        raise InputError(
            f"engine option {option}={eng.memory_fraction:g} {room}; a larger fraction "
            f"makes room: --engine-options {option}=F (0 < F <= 1)",
            field="engine_options",
        )
    frac = eng.static_memory_fraction(
        cluster.device, tp=par.tp, pp=par.pp, dp_attention=par.attention_dp,
        speculative=spec_dec is not None,
    )  # fmt: skip
    mtp = ", MTP" if spec_dec is not None else ""
    # The prefill workers' own fraction where the engine's launches state one apart.
    prefill_own = stage == "prefill workers" and eng.name in PREFILL_STAGE
    remedy = "prefill_memory_fraction" if prefill_own else "memory_fraction"
    who = {"sglang-0.5": "SGLang"}.get(eng.static_memory_rule or "", eng.name)
    # SGLang's rule subtracts a reserve that grows with the chunk: a large one takes it below 0.
    below = ", below 0: its reserve for the token budget exceeds the GPU" if frac <= 0 else ""
    raise InputError(
        f"{who}'s default mem_fraction_static ({frac:.3f} on {cluster.device.name} at TP "
        f"{par.tp}, attention DP {par.attention_dp}{mtp}{below}) {room}; "
        f"state the launch's fraction: --engine-options {remedy}=F (0 < F <= 1)",
        field="engine_options",
    )


def deployment_cluster(
    gpu: str, placed: Placement, gpus_per_node: int | None, inter: str
) -> Cluster:
    """The nodes that hold a deployment's workers (``planner.serving.placement.place``: a worker
    no larger than a node inside one, small workers sharing nodes, a larger one over whole
    nodes), whole once it spans several. The prediction reads the node size and links, not the
    count: its GPUs are its workers' (``placed.gpus``), and every per-GPU figure divides by
    those; the rest of a last node stays free for other work."""
    per_node = placed.gpus_per_node
    gpus = placed.gpus if placed.nodes <= 1 else placed.nodes * per_node
    return catalog.cluster(gpu, gpus, gpus_per_node=gpus_per_node, inter=inter)


def _nodes(placed: Placement) -> dict[str, int]:
    """The ``--json`` fields of a deployment's placement: nodes that hold its workers, GPUs to
    a node (the GPUs used are the option's ``gpus``; per-GPU figures divide by them)."""
    return {"nodes": placed.nodes, "gpus_per_node": placed.gpus_per_node}


def _deployment_size(gpus: int, field: str) -> None:
    require(
        gpus <= MAX_GPUS,
        f"the deployment needs {gpus:,} GPUs, more than {MAX_GPUS:,} (2^20, above the largest "
        "clusters built); accepted: fewer workers, replicas or a smaller --tp",
        field=field,
    )


@cache
def _profile(name: str, overlay: str | None) -> Profile:
    # Profiles are immutable; parsing the YAML costs more than a whole prediction.
    return load_profile_for(name, overlay)


def _check_layout(eng: EngineProfile, par: Parallelism, per_node: int, prefix: str) -> None:
    """Refuse, in one line, a layout the engine cannot run (``EngineProfile.layout_refusal``)."""
    why = eng.layout_refusal(
        tp=par.tp, pp=par.pp, ep=par.ep, attention_dp=par.attention_dp, gpus_per_node=per_node
    )
    require(
        why is None, str(why).replace("--", f"--{prefix.replace('_', '-')}"), field=f"{prefix}tp"
    )


def _par(spec: ModelSpec, tp: int, pp: int, ep: int, attention_dp: int, prefix: str) -> Parallelism:
    try:
        par = Parallelism(tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)
    except InputError as exc:
        raise InputError(
            str(exc).replace("--", f"--{prefix.replace('_', '-')}"), field=f"{prefix}{exc.field}"
        ) from None
    dash = prefix.replace("_", "-")
    require(
        ep == 1 or spec.is_moe,
        f"--{dash}ep {ep}: {spec.name} has no experts (dense model); accepted: 1",
        field=f"{prefix}ep",
    )
    require(
        ep <= spec.num_experts,
        f"--{dash}ep {ep} exceeds {spec.name}'s {spec.num_experts} experts (every expert-parallel "
        f"rank holds at least one); accepted: 1 to {spec.num_experts}",
        field=f"{prefix}ep",
    )
    # Attention DP feeds the MoE layers' all-to-all (DeepEP); the iteration model has no
    # exchange between attention groups and a dense MLP, so a dense model cannot express it.
    require(
        attention_dp == 1 or spec.is_moe,
        f"--{dash}attention-dp {attention_dp}: attention data parallelism applies to MoE models; "
        f"{spec.name} is dense; accepted: 1",
        field=f"{prefix}attention_dp",
    )
    require(
        spec.num_heads % par.attention_tp == 0,
        f"--{prefix.replace('_', '-')}tp {tp}: attention TP {par.attention_tp} does not divide "
        f"the model's {spec.num_heads} attention heads; accepted: divisors of {spec.num_heads} "
        "(times --attention-dp)",
        field=f"{prefix}tp",
    )
    require(
        pp <= spec.num_layers,
        f"--pp {pp} exceeds the model's {spec.num_layers} layers",
        field="pp",
    )
    return par
