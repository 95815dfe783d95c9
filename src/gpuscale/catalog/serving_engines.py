"""Serving-engine profiles (scheduler defaults, host overheads) from ``serving_engines.yaml``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from gpuscale import shipped_yaml
from gpuscale.errors import InputError, unknown
from gpuscale.specs import Device

KvPolicy = Literal["reserve", "on_demand"]
DisaggKvTransfer = Literal["decode_pull", "prefill_push"]
PrefillPolicy = Literal["mixed", "prefill_first"]
MoeDpCommunication = Literal[
    "all_to_all", "gather_scatter", "gather_scatter_without_mnnvl", "all_to_all_with_ep"
]
MemoryFractionOf = Literal["free_after_load", "weights_kv_activations", "weights_and_kv"]
StaticMemoryRule = Literal["sglang-0.5"]

ENGINE_ALIASES = {
    "trtllm": "tensorrt-llm",
    "trt-llm": "tensorrt-llm",
    "tensorrt_llm": "tensorrt-llm",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SmallGpuDefaults:
    """Scheduler defaults the engine picks on GPUs below ``below_memory_gib`` of memory, or on
    GPUs whose id contains one of ``also_for`` (the engine checks the device at start-up)."""

    below_memory_gib: float
    also_for: tuple[str, ...] = ()
    max_num_batched_tokens: int
    max_num_seqs: int

    def applies(self, device: Device) -> bool:
        ident = f"{device.id} {device.name}".lower()
        return device.memory_gib < self.below_memory_gib or any(k in ident for k in self.also_for)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineProfile:
    name: str
    cost_profile: str
    """The kernel-efficiency profile (catalog/data/profiles) the engine's kernels follow."""
    vendors: tuple[str, ...]
    """The GPU vendors whose devices the engine runs on (``serving_engines.yaml``)."""
    max_num_batched_tokens: int
    """Token budget of one iteration (prefill chunks + decodes)."""
    max_num_seqs: int
    """Most requests running at once."""
    chunked_prefill: bool
    """Whether a prompt may be split over iterations to fill the token budget."""
    page_size: int
    """Tokens per KV-cache page (block)."""
    kv_policy: KvPolicy
    """``reserve``: a request reserves prompt + output pages on admission (never preempted);
    ``on_demand``: pages are taken as tokens are generated; preempt and recompute when full."""
    memory_fraction: float
    """The engine's memory fraction; for an engine with ``static_memory_rule`` it is only the
    value the engine falls back to when it cannot read the GPU's memory (SGLang 0.88)."""
    memory_fraction_of: MemoryFractionOf
    """What ``memory_fraction`` bounds. ``free_after_load``: the KV pool is that fraction of
    what is left after weights, activations and context (TensorRT-LLM
    ``free_gpu_memory_fraction``); ``weights_kv_activations``: weights + KV + the profiled
    activation peak fit in it (vLLM ``gpu_memory_utilization``); ``weights_and_kv``: weights +
    KV fit in it and the activations live in the rest (SGLang ``mem_fraction_static``, whose
    default reserves 1.5 MiB per chunked-prefill token for them outside the fraction)."""
    prefill_policy: PrefillPolicy
    """``mixed``: prompt chunks share iterations with the running decodes (vLLM, TRT-LLM
    in-flight batching); ``prefill_first``: waiting prompts run as prefill-only batches ahead of
    the decodes (SGLang without ``--enable-mixed-chunk``)."""
    kv_dtype_low_precision: str
    """KV-cache dtype of ``kv_dtype="auto"`` when the launch quantizes 16-bit weights to an
    FP8/FP4 format itself (``--weights`` other than the checkpoint's stored format): TensorRT-LLM
    serves a TensorRT Model Optimizer checkpoint, whose KV is FP8 by default; vLLM and SGLang
    quantize online and keep the model's 16-bit KV. A published checkpoint served as stored
    follows its own quantization config instead (:func:`kv_cache_dtype`)."""
    checkpoint_kv: bool = True
    """Whether ``auto`` takes the KV dtype the served checkpoint declares (TensorRT-LLM, vLLM,
    SGLang); False: the engine's own default whatever the checkpoint (ATOM: ``--kv_cache_dtype``
    default bf16, no read of ``kv_cache_quant_algo``; ``serving_engines.yaml``)."""
    kv_dtypes: tuple[str, ...]
    """The KV-cache storage dtypes the engine accepts (its ``auto`` and ``--kv-cache-dtype``
    values read as storage widths; ``serving_engines.yaml``)."""
    overlap_scheduler: bool
    """Host schedules iteration n+1 while the GPU runs n: new requests wait one more step."""
    prefill_worker_overlap: bool | None = None
    """The overlap scheduler on a disaggregated prefill (context) worker; None: as
    ``overlap_scheduler``."""
    prefill_worker_speculation: bool = True
    """Whether a speculative disaggregated deployment's prefill workers load and run the draft
    module over each prompt (TensorRT-LLM's context phase, tech blog 2; SGLang launched with the
    speculative flags on both stages); False where the launch gives them to the decode workers
    only (MoRI-SGLang, ``inferencex_mori_launch``): engine option ``prefill_speculative``."""
    disagg_kv_transfer: DisaggKvTransfer | None
    """When a disaggregated decode worker gets a prompt's KV: ``decode_pull``, the decode
    scheduler admits the request at an iteration start and starts the transfer then, checking
    it at each later iteration (TensorRT-LLM, vLLM); ``prefill_push``, the decode worker
    preallocated the slots when the request arrived and the prefill worker sends as soon as
    its forward ends, the decode polling for completion at each iteration (SGLang). Sources in
    ``serving_engines.yaml``. None: the engine's hand-off was not read, so it is served
    aggregated only (:attr:`disaggregated`)."""
    disagg_first_token_iterations: int | None
    """Decode iterations from the transfer found complete to the first token: 0 where the
    prefill's token is returned on admission (TensorRT-LLM, SGLang), 1 where the decode worker
    recomputes the last prompt token to sample it (vLLM); None with ``disagg_kv_transfer``."""
    disagg_prealloc_extra_up_to: int = 0
    """A ``prefill_push`` decode worker takes a request slot of its rank before the request's
    prefill (it pre-allocates the slot and the prompt's KV, and the prefill worker starts the
    request only then) and holds it to the decode's end, beside the running slot: each rank's
    request slots are the launch's whole running cap, undivided by the attention-DP ranks,
    three times that where the cap is at most this (SGLang: ``init_memory_pool`` sizes the pool
    by ``server_args.max_running_requests``, ``DecodeReqToTokenPool`` adds ``pre_alloc_size =
    2 x`` it where it is at most 32). Read by :meth:`arrival_slots`."""
    iteration_overhead_us: float
    per_sequence_overhead_us: float
    request_overhead_ms: float
    """Per request, outside the iterations: HTTP, tokenization, first-chunk streaming."""
    source: str
    small_gpu_defaults: SmallGpuDefaults | None = None
    """Smaller budget and running-request cap the engine defaults to on some GPUs."""
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    """Decode batch sizes with a captured CUDA graph that a decode-only iteration is padded up
    to (TensorRT-LLM ``cuda_graph_config`` with ``enable_padding: true``: the PyTorch executor
    adds dummy generation requests up to the smallest captured size at least the batch,
    ``_get_padded_batch`` / ``_round_up_batch_size``); the padded slots cost the GEMMs what
    real ones do, not attention (a dummy request holds one token). Empty: each batch runs at
    its own size (the engine's default, ``enable_padding`` False). The sizes the engine keeps
    are :meth:`decode_graph_sizes`."""
    prefill_cuda_graph: bool = True
    """Whether iterations that carry prompt tokens replay CUDA graphs (vLLM V1's piecewise
    graphs). False: they run eagerly, the host launching every kernel from Python, while only
    decode-only batches replay graphs (TensorRT-LLM PyTorch backend, SGLang before piecewise
    CUDA graphs became its default)."""
    eager_host_us_per_kernel: float = 0.0
    """Host time per kernel of the model's forward (``IterationModel.serial_kernels``) in an
    eager iteration; with ``prefill_cuda_graph`` False, a prompt-carrying iteration lasts at
    least this times the kernels of one forward."""
    adp_balance_timeout_iters: int = 0
    """TensorRT-LLM ``attention_dp_config`` with ``enable_balance``: with attention DP, new
    prompts wait until every attention-DP rank has one or this many iterations have passed
    (0 = off, the engine default)."""
    batch_wait_timeout_iters: int = 0
    """TensorRT-LLM ``batch_wait_timeout_iters``: without attention DP, new context requests are
    held while generation requests run, until this many iterations have passed or the
    scheduled tokens reach ``batch_wait_max_tokens_ratio`` of ``max_num_tokens``
    (``PyExecutor._waiting_requests``; 0 = off, the engine default)."""
    batch_wait_max_tokens_ratio: float = 0.0
    """TensorRT-LLM ``batch_wait_max_tokens_ratio`` (0 = off, the engine default)."""
    recv_interval: int = 1
    """SGLang ``--scheduler-recv-interval``: the scheduler polls for new requests only after
    this many decode (or speculative verify) batches since its last poll, and at once after a
    prefill batch (``SchedulerRecvSkipper``: weight 1 per decode/verify batch, 1000 per other
    batch, poll when the sum reaches the interval). 1 = every iteration, the engine default.
    Sources in ``serving_engines.yaml``; ``steady_state.recv_wait``."""
    swa_tokens_per_full_token: float | None = None
    """Sliding-window KV the pool holds per token it holds for the full-attention layers.
    None: sliding-window layers keep only their window per request (vLLM's hybrid KV cache
    manager, per-group block tables since v0.10). 1.0: one pool sizes every layer at full
    length and the window only masks attention (TensorRT-LLM's KVCacheManager when
    ``kv_cache_config.max_attention_window`` is unset). 0.8: SGLang's SWA pool, sized at
    ``swa_full_tokens_ratio`` of the full-attention pool (``set_num_token_hybrid``). Sources in
    ``serving_engines.yaml``."""
    flashinfer_fp8_gemm: bool = False
    """SGLang runs the dense block-FP8 linear layers (attention projections, shared experts,
    dense MLPs) with FlashInfer's TRT-LLM groupwise GEMM on Blackwell: ``--fp8-gemm-backend
    flashinfer_trtllm``, or from 0.5.8 on DeepGEMM turned off (``SGLANG_ENABLE_JIT_DEEPGEMM=
    false``: ``fp8_utils._dispatch_auto_backend`` then takes FlashInfer's on Blackwell), or up to
    0.5.9 ``SGLANG_ENABLE_FLASHINFER_GEMM``. Priced at that kernel's measured rate
    (``IterationModel.dense_linear_time``, profile constant
    ``flashinfer_trtllm_fp8_gemm_peak_share``). False: DeepGEMM, the GEMM curve's kernel class.
    A launch's setting (engine option ``flashinfer_fp8_gemm``)."""
    deepgemm_moe_worst_case: bool = False
    """vLLM 0.12's DeepGEMM MoE: block-FP8 experts on Hopper or B200/GB200 (compute capability
    9.0 or 10.0; MoE tensor parallelism below 8) computed at the worst-case contiguous layout,
    ``M x top-k + local experts x 127`` rows, at every batch size
    (``IterationModel.moe_worst_case_tail_rows``). A version's behaviour, set per row by
    ``serving_launches.engine_version_options``; False in the profile (later vLLM versions pick
    other MoE kernels, ``profiles/vllm.yaml``)."""
    moe_dp_communication: MoeDpCommunication = "all_to_all"
    """How the MoE layers move tokens between attention-DP ranks. ``all_to_all``: each token's
    top-k copies are dispatched to the experts' ranks and combined back (DeepEP, DeepSeek-V3
    arXiv:2412.19437 Sec. 3.4). ``gather_scatter``: every rank all-gathers the DP group's
    16-bit hidden states, runs its experts' share over them, and reduce-scatters the 16-bit
    output (vLLM 0.12's default ``allgather_reducescatter``; SGLang 0.5.8's DP attention without
DeepEP). ``gather_scatter_without_mnnvl``: gather and scatter
    unless the NVLink domain spans nodes (NVL72 racks), where the engine takes an all-to-all
    (TensorRT-LLM's CUTLASS MoE). ``all_to_all_with_ep``: the all-to-all where the experts are
    expert-parallel, gather and scatter where they are tensor-parallel over the DP group (ATOM's
    MoRI kernels only "when expert parallel is enabled"). Sources in ``serving_engines.yaml``;
    ``IterationModel.moe_all_to_all``."""
    decode_moe_dp_communication: MoeDpCommunication | None = None
    """The decode workers' own ``moe_dp_communication`` where a disaggregated launch sets it
    apart from the prefill workers' (SGLang ``--moe-a2a-backend deepep`` on the decode workers
    only, as InferenceX's GB200/GB300 FP4 recipes launch them; ``serving_engines.yaml``); None:
    the engine's."""
    prefill_dp_gather_all_reduce: bool = False
    """Under ``gather_scatter``, iterations that carry prompt tokens gather with an all-reduce
    of the DP group's summed rows and all-reduce the MoE output (SGLang's ``SUM_LEN`` padding
    mode for extend batches, about twice the bytes of the all-gather and reduce-scatter its
    decode batches run; ``IterationModel.moe_prefill_gather_all_reduce``). Sources in
    ``serving_engines.yaml``."""
    max_prefill_tokens: int | None = None
    """SGLang ``--max-prefill-tokens``: the new prompt tokens one prefill batch may start, a
    soft limit counted after the mixed decodes (``PrefillAdder.add_one_req`` refuses a request
    whose prompt reaches what is left of it unless the batch is empty, so a batch's first
    prompt always runs, up to the chunk budget: ``steady_state.prompts_under_prefill_limit``);
    None: no limit but the token budget (vLLM, TensorRT-LLM)."""
    prefill_max_num_batched_tokens: int | None = None
    """A disaggregated launch's prefill workers' own token budget, apart from the decode
    workers' (SGLang ``--chunked-prefill-size`` of the prefill workers: srt-slurm recipes state
    ``sglang_config.prefill`` and ``.decode`` flags apart), split over their attention-DP ranks
    as ``max_num_batched_tokens`` is; None: the engine's. ``planner.serving.deployment.
    prefill_worker_engine`` applies the ``prefill_*`` settings."""
    prefill_max_prefill_tokens: int | None = None
    """The prefill workers' own ``max_prefill_tokens`` (SGLang ``--max-prefill-tokens`` of the
    prefill workers); None: the engine's."""
    prefill_memory_fraction: float | None = None
    """The prefill workers' own stated memory fraction (SGLang ``--mem-fraction-static`` of the
    prefill workers), which replaces the engine's rule there as ``memory_fraction`` does
    everywhere; None: the engine's (a fraction stated for every worker, or its rule, which
    SGLang derives from the chunk: ``sglang_mem_fraction_static``)."""
    prefill_chunked_prefill: bool | None = None
    """False: the prefill workers run without chunked prefill (SGLang ``--chunked-prefill-size
    -1``: ``scheduler.py`` ``init_chunked_prefill`` turns a size <= 0 into None, and
    ``PrefillAdder`` then bounds a batch by ``--max-prefill-tokens`` alone, its first prompt
    whole; v0.5.9); None: the engine's."""

    attention_dp_split: bool = False
    """Whether the engine divides its token budget (``max_num_batched_tokens``, default or
    stated) and a stated running cap (``max_num_seqs`` with ``stated_running_cap``) by the
    attention-DP size, each DP rank's scheduler taking its share (SGLang 0.5.x: server_args.py
    ``_handle_data_parallelism`` ``chunked_prefill_size // dp_size``, tp_worker.py /
    model_runner.py ``max_running_requests // dp_size``; sources in ``serving_engines.yaml``).
    The profile's own values are the launch's, per engine; :meth:`per_attention_rank` gives a
    rank's. False: every rank runs with the values as given (vLLM, TensorRT-LLM)."""
    stated_running_cap: bool = False
    """Whether ``max_num_seqs`` is a launch's stated cap (engine option ``max_num_seqs``:
    SGLang ``--max-running-requests``, split over the DP ranks) rather than the engine's
    default (SGLang's per-rank request pool, each rank's own)."""

    max_tensor_parallel: int | None = None
    """Most GPUs one tensor-parallel group may span (an attention group: ``tp / attention_dp``
    in :class:`~gpuscale.costmodel.serving.iteration.Parallelism`'s terms); None: no cap
    (ATOM asserts ``1 <= tensor_parallel_size <= 8``; sources in ``serving_engines.yaml``)."""
    pipeline_parallel: bool = True
    """Whether the engine can split layers into pipeline stages (ATOM has no such flag)."""
    prefix_caching: bool = True
    """Whether the engine reuses the KV of a prompt prefix it already holds by default
    (TensorRT-LLM ``KvCacheConfig.enable_block_reuse``, vLLM ``enable_prefix_caching``, SGLang's
    radix cache: on; ATOM ``--enable_prefix_caching``: off; ``serving_engines.yaml``). Off, a
    client's shared prefixes are computed again in every prompt."""
    max_draft_tokens: int | None = None
    """Most speculative draft tokens per step the engine accepts (ATOM raises above 4;
    ``serving_engines.yaml``); None: no engine limit below the API's."""
    speculative_step_host_us: float = 0.0
    """Host time per speculative decode step the engine does not hide when its overlap
    scheduler is off (SGLang's EAGLE worker v1, which 0.5.x runs unless
    ``SGLANG_ENABLE_SPEC_V2`` is set: ``serving_engines.yaml``); 0: none beyond
    ``iteration_overhead_us``."""
    speculative_max_num_seqs: int | None = None
    """The running-request cap the engine sets for itself when speculative decoding is on and
    the launch states none (SGLang 0.5.x ``_handle_speculative_decoding``: EAGLE, which serves
    DeepSeek's MTP, resets an unset ``--max-running-requests`` to 48; ``serving_engines.yaml``);
    None: speculation leaves the cap alone. :meth:`for_speculation` applies it (to an
    aggregated engine; ``api.serving.infer`` gives it to disaggregated decode workers whose
    cap is not stated)."""
    whole_instance_splits: bool = False
    """Whether attention data parallelism and expert parallelism each span all of an instance's
    GPUs or none (ATOM: ``--enable-dp-attention`` makes every rank its own attention group,
    ``--enable-expert-parallel`` puts the experts over every rank; ``serving_engines.yaml``)."""
    single_node: bool = False
    """Whether one engine instance (its tensor- and data-parallel ranks) must fit in one node
    (ATOM: its data-parallel group meets on 127.0.0.1; sources in ``serving_engines.yaml``)."""

    static_memory_rule: StaticMemoryRule | None = None
    """``sglang-0.5``: the memory fraction follows the GPU's memory, TP, attention DP and
    speculative decoding as SGLang 0.5.x derives ``mem_fraction_static``
    (:func:`sglang_mem_fraction_static`); None: ``memory_fraction`` on every GPU. A launch that
    states the fraction (engine option ``memory_fraction``) drops the rule."""

    def layout_refusal(
        self, *, tp: int, pp: int, ep: int, attention_dp: int, gpus_per_node: int
    ) -> str | None:
        """Why the engine cannot run one instance over this layout (``tp`` GPUs per pipeline
        stage, ``attention_dp`` attention groups and ``ep``-way experts among them, on nodes of
        ``gpus_per_node``), or None when it can."""
        if pp > 1 and not self.pipeline_parallel:
            return f"engine {self.name} has no pipeline parallelism; accepted: --pp 1"
        if self.whole_instance_splits:
            for flag, value in (("--attention-dp", attention_dp), ("--ep", ep)):
                if value not in (1, tp):
                    return (
                        f"engine {self.name} splits attention and experts over all of an "
                        f"instance's GPUs or none, got {flag} {value} with --tp {tp}; "
                        f"accepted: {flag} 1 or {tp}"
                    )
        if self.single_node and tp * pp > gpus_per_node:
            return (
                f"engine {self.name} runs one instance within one node of {gpus_per_node} GPUs, "
                f"got --tp {tp}; accepted: --tp at most {gpus_per_node} (more GPUs as --replicas)"
            )
        cap = self.max_tensor_parallel
        if cap is not None and tp // attention_dp > cap:
            return (
                f"engine {self.name} runs at most {cap}-way tensor parallelism per attention "
                f"group, got {tp // attention_dp} (--tp {tp} / --attention-dp {attention_dp}); "
                f"accepted: --tp at most {cap} x --attention-dp"
            )
        return None

    @property
    def disaggregated(self) -> bool:
        """Whether the profile models the engine's disaggregated serving (its KV hand-off)."""
        return self.disagg_kv_transfer is not None

    def static_memory_fraction(
        self, device: Device, *, tp: int, pp: int, dp_attention: int, speculative: bool
    ) -> float:
        """The memory fraction the engine starts with on ``device`` for this parallel layout."""
        if self.static_memory_rule is None:
            return self.memory_fraction
        return sglang_mem_fraction_static(
            device.memory_bytes / 2**20,
            tp=tp,
            pp=pp,
            dp_attention=dp_attention,
            chunked_prefill_size=self.max_num_batched_tokens,
            speculative=speculative,
        )

    def arrival_slots(self, rank_cap: float, attention_dp: int) -> float:
        """Request slots one decode rank holds from a request's arrival to its decode's end
        (``disagg_closed_loop.simulate``'s ``arrival_slots``), for a rank of ``rank_cap``
        running requests among ``attention_dp`` attention-DP ranks: the undivided cap
        ``rank_cap x attention_dp``, three times it up to :attr:`disagg_prealloc_extra_up_to`,
        for a ``prefill_push`` hand-off; unbounded (``inf``) for an engine whose decode worker
        takes the request after its prefill. The whole cap is rebuilt from the rank's share:
        exact for a stated cap the DP width divides (a launch's 36 over 8 ranks reads as 32);
        an unstated one is the engine's default, which the decode KV bounds in the planner."""
        if self.disagg_kv_transfer != "prefill_push":
            return math.inf
        whole = rank_cap * attention_dp
        return 3.0 * whole if whole <= self.disagg_prealloc_extra_up_to else whole

    def decode_graph_sizes(self, tokens_per_request: int = 1) -> tuple[int, ...]:
        """The captured sizes decode batches are padded to: :attr:`cuda_graph_batch_sizes` up
        to the largest decode batch the engine can run, ``min(max_num_seqs,
        max_num_batched_tokens // tokens_per_request)`` (a speculative decode puts its draft
        tokens through the budget too), plus that bound where a listed size exceeds it
        (TensorRT-LLM ``_filter_cuda_graph_batch_sizes``: "padding to max_cuda_graph_bs is
        acceptable")."""
        top = min(self.max_num_seqs, self.max_num_batched_tokens // max(tokens_per_request, 1))
        kept = [s for s in self.cuda_graph_batch_sizes if s <= top]
        if any(s > top for s in self.cuda_graph_batch_sizes) and (not kept or kept[-1] != top):
            kept.append(top)
        return tuple(kept)

    def per_attention_rank(self, attention_dp: int) -> EngineProfile:
        """The scheduler settings one of ``attention_dp`` attention-DP ranks runs with: for an
        engine with ``attention_dp_split`` the token budget, and a stated running cap, floor-
        divided by ``attention_dp`` (SGLang: ``self.chunked_prefill_size //
        self.dp_size``, ``server_args.max_running_requests // dp_size``); the profile itself
        otherwise. The result no longer splits, so a second call divides nothing more."""
        if attention_dp <= 1 or not self.attention_dp_split:
            return self
        seqs = self.max_num_seqs
        if self.stated_running_cap:
            seqs = max(seqs // attention_dp, 1)
        return dataclasses.replace(
            self,
            max_num_batched_tokens=max(self.max_num_batched_tokens // attention_dp, 1),
            max_num_seqs=seqs,
            attention_dp_split=False,
        )

    def for_speculation(self) -> EngineProfile:
        """The profile as the engine configures itself for speculative decoding: its
        :attr:`speculative_max_num_seqs` where the launch stated no running cap, which the
        engine then treats as a stated one (SGLang writes it into ``max_running_requests``, so
        it is split over the attention-DP ranks as a stated value is); itself otherwise."""
        if self.speculative_max_num_seqs is None or self.stated_running_cap:
            return self
        return dataclasses.replace(
            self, max_num_seqs=self.speculative_max_num_seqs, stated_running_cap=True
        )

    def moe_gathers(self, ep: int) -> bool:
        """Whether the MoE layers of an instance with ``ep``-way experts gather and scatter the
        attention-DP group's hidden states rather than exchange top-k copies all-to-all
        (:attr:`moe_dp_communication`)."""
        if self.moe_dp_communication == "all_to_all_with_ep":
            return ep == 1
        return self.moe_dp_communication != "all_to_all"

    def for_device(self, device: Device) -> EngineProfile:
        """The profile as the engine configures itself on ``device`` (default flags); a device
        of a vendor the engine does not run on is refused."""
        if device.vendor not in self.vendors:
            raise InputError(
                f"engine {self.name} runs on {' and '.join(v.upper() for v in self.vendors)} "
                f"GPUs, not on {device.id} ({device.vendor.upper()}); accepted: "
                + ", ".join(n for n, e in engines().items() if device.vendor in e.vendors),
                field="engine",
            )
        if self.static_memory_rule is not None:
            # SGLang picks its chunked-prefill size by the GPU's memory
            # (_handle_gpu_memory_settings; see sglang_gpu_tier).
            chunk, _ = sglang_gpu_tier(device.memory_bytes / 2**20, tp=1)
            return dataclasses.replace(self, max_num_batched_tokens=chunk)
        small = self.small_gpu_defaults
        if small is None or not small.applies(device):
            return self
        return dataclasses.replace(
            self,
            max_num_batched_tokens=small.max_num_batched_tokens,
            max_num_seqs=small.max_num_seqs,
        )


def sglang_gpu_tier(gpu_mem_mib: float, *, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang 0.5.x defaults to on a GPU of
    ``gpu_mem_mib`` (nvidia-smi / rocminfo total memory, MiB) at tensor parallelism ``tp``:
    python/sglang/srt/server_args.py ``ServerArgs._handle_gpu_memory_settings``, identical in
    the 0.5.6.post2, 0.5.8.post1 and 0.5.9 wheels (NPU tiers left out)."""
    if gpu_mem_mib < 20 * 1024:  # T4, 4080
        return 2048, 8
    if gpu_mem_mib < 35 * 1024:  # A10, 4090, 5090
        return 2048, 24 if tp < 4 else 80
    if gpu_mem_mib < 60 * 1024:  # A100-40GB, L40
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_mib < 160 * 1024:  # H100, A100-80GB, H20, H200
        return 8192, 256 if tp < 4 else 512
    return 16384, 512  # B200, MI300X and larger


def sglang_mem_fraction_static(
    gpu_mem_mib: float,
    *,
    tp: int,
    pp: int = 1,
    dp_attention: int = 1,
    chunked_prefill_size: int,
    speculative: bool = False,
) -> float:
    """SGLang 0.5.x's default ``mem_fraction_static`` = (GPU memory - reserved) / GPU memory,
    the reservation (MiB) covering activations and CUDA-graph buffers outside weights + KV pool
    (server_args.py ``_handle_gpu_memory_settings``, 0.5.6.post2 / 0.5.8.post1 / 0.5.9 wheels):
    512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024;
    with DP attention + 3 x cuda_graph_max_bs x dp_size, and + 1.5 x cuda_graph_max_bs x dp_size
    when cuda_graph_max_bs > 300; at least 10 GiB on GPUs above 60 GiB; + 2 GiB for an EAGLE/MTP
    draft. Rounded to 3 decimals as the source does. Not modelled: the opt-in piecewise CUDA
    graphs' term, the STANDALONE draft's 6 GiB, the multimodal and ROCm aiter (x0.85 for
    contexts above 8k) adjustments made after it."""
    _, graph_bs = sglang_gpu_tier(gpu_mem_mib, tp=tp)
    reserved = 512.0 + max(chunked_prefill_size, 2048) * 1.5 + graph_bs * 2.0
    reserved += tp * pp / 8.0 * 1024.0
    if dp_attention > 1:
        reserved += graph_bs * dp_attention * 3.0
        if graph_bs > 300:
            reserved += graph_bs * dp_attention * 1.5
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10.0 * 1024.0)
    if speculative:
        reserved += 2.0 * 1024.0
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


@cache
def engines() -> dict[str, EngineProfile]:
    text = resources.files("gpuscale.catalog").joinpath("data/serving_engines.yaml").read_text()
    data = shipped_yaml.load(text)
    out = {}
    for k, v in data["engines"].items():
        fields = dict(v)
        small = fields.pop("small_gpu_defaults", None)
        if small is not None:
            small = SmallGpuDefaults(**{**small, "also_for": tuple(small.get("also_for", ()))})
        fields["kv_dtypes"] = tuple(fields["kv_dtypes"])
        fields["vendors"] = tuple(fields["vendors"])
        out[k] = EngineProfile(name=k, small_gpu_defaults=small, **fields)
    return out


def kv_cache_dtype(
    eng: EngineProfile, requested: str, *, checkpoint_kv: str | None, requantized: bool
) -> str:
    """The KV-cache dtype ``eng`` stores for ``requested`` (``--kv-dtype``), refused with the
    engine's accepted values when it cannot store it. ``auto``: the KV dtype the served
    checkpoint declares (``checkpoint_kv``: TensorRT-LLM ``validate_and_set_kv_cache_quant``
    "Using checkpoint KV quantization", SGLang ``configure_kv_cache_dtype``, vLLM PR #30785),
    else the model's 16-bit dtype; for weights the launch quantizes itself (``requantized``), or
    an engine that reads no checkpoint KV dtype (``checkpoint_kv`` False), the engine's
    ``kv_dtype_low_precision``."""
    if requested == "auto":
        if requantized or not eng.checkpoint_kv:
            return eng.kv_dtype_low_precision
        return checkpoint_kv or "bf16"
    if requested not in eng.kv_dtypes:
        raise InputError(
            f"--kv-dtype {requested}: {eng.name} does not store the KV cache in {requested}; "
            f"accepted: auto, {', '.join(eng.kv_dtypes)}",
            field="kv_dtype",
        )
    return requested


def engine(name: str) -> EngineProfile:
    key = ENGINE_ALIASES.get(name.lower(), name.lower())
    try:
        return engines()[key]
    except KeyError:
        err = unknown("engine", name, engines())
        raise InputError(str(err), field="engine") from None
