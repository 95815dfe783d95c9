"""Time of one iteration of a continuously batching engine on one attention rank.

An iteration runs the model once over a mixed batch: ``n_decode`` sequences that each add one
token (attending to their whole cached context) and ``prefill_tokens`` prompt tokens of chunked
prefills (attending causally to their prompt). Every kernel is a roofline (Williams et al.
2009); a dense GEMM's is :func:`gpuscale.costmodel.serving.gemm.serving_gemm_time` (with a
latency measured inside replayed CUDA graphs where the profile has one); decode attention reads
each sequence's KV cache once (Pope et al. 2022, arXiv:2211.05102, Sec. 3.1); prefill attention
is compute-bound flash attention over the causal pairs (Dao 2023, arXiv:2307.08691). The iteration time is what
Orca's iteration-level scheduling runs one step of (Yu et al., OSDI'22, Sec. 3).

Parallelism (one engine instance): ``tp`` GPUs per pipeline stage, of which attention runs
``tp / attention_dp``-way tensor parallel on ``attention_dp`` independent request groups
(DeepSeek-V3 serving, arXiv:2412.19437 Sec. 3.4; SGLang DP attention); MoE experts are sharded
``ep``-way with ``tp / ep``-way tensor parallelism inside each expert. All inputs are numpy
arrays of equal shape (vectorized over load points).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.flops import Gemm
from gpuscale.costmodel.params import mean_attention_params
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.serving.formats import WeightFormat, gemm_precision
from gpuscale.costmodel.serving.gemm import serving_gemm_time
from gpuscale.costmodel.serving.speculative import Speculation
from gpuscale.errors import InputError
from gpuscale.specs import Cluster, Device, ModelSpec

SIXTEEN_BIT = 2.0
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp32": 4.0}
GPU_TERMS = (
    "projections",
    "attention",
    "experts",
    "moe_other",
    "dense_mlp",
    "elementwise",
    "kernel_gaps",
    "communication",
    "head",
    "pipeline_hops",
)
"""The terms of :meth:`IterationModel.parts_s` whose pipelined sum is its ``gpu`` part (the
layer terms run once per stage, ``head`` and ``pipeline_hops`` once per forward)."""
MOE_ROUTED_COPY_PASSES = 4.0
"""Memory passes over the routed tokens' top-k copies of the hidden state a MoE layer makes
outside its grouped GEMMs. UNSOURCED (see :meth:`IterationModel.parts_s`'s ``moe_other``): by
the kernels one (vLLM/SGLang ``moe_sum``) or two (TensorRT-LLM CUTLASS ``expandInputRows``,
``finalizeMoeRouting``); kept at 4 until the routed gather and scatter are measured
(benchmarks/moe_prefill_audit.py reads this constant)."""


def crossing_hops(tp: int, pp: int, gpus_per_node: int) -> int:
    """Pipeline hops of one worker that cross a node boundary. Its stages of ``tp`` GPUs lie in
    order on its nodes (a worker no larger than a node inside one; a larger one over whole
    nodes, ``planner/serving/placement.py``), so stage ``i`` starts on node
    ``i * tp // gpus_per_node``."""
    if tp * pp <= gpus_per_node:
        return 0
    return sum(
        1 for i in range(pp - 1) if (i * tp) // gpus_per_node != (i + 1) * tp // gpus_per_node
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """How one engine instance splits the model over its ``tp * pp`` GPUs."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "attention_dp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:  # True was 1
                raise InputError(
                    f"--{name.replace('_', '-')} must be a whole number >= 1, got {value!r}",
                    field=name,
                )
        if self.tp % self.attention_dp:
            raise InputError(
                f"--attention-dp {self.attention_dp} must divide --tp {self.tp} (attention ranks "
                "split the tensor-parallel group)",
                field="attention_dp",
            )
        if self.tp % self.ep:
            raise InputError(
                f"--ep {self.ep} must divide --tp {self.tp} (experts are sharded over the "
                "tensor-parallel group, moe_tp = tp / ep)",
                field="ep",
            )

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def attention_tp(self) -> int:
        return self.tp // self.attention_dp

    @property
    def moe_tp(self) -> int:
        return self.tp // self.ep


DEEPGEMM_MOE_COMPUTE_CAPABILITIES = (9.0, 10.0)
"""GPUs vLLM 0.12's DeepGEMM runs on (``is_deep_gemm_supported``, utils/deep_gemm.py: Hopper,
B200/GB200; not B300/GB300 at 10.3)."""
DEEPGEMM_MOE_MAX_TP = 8
"""MoE tensor parallelism at which vLLM 0.12 turns DeepGEMM MoE off (``get_fp8_moe_backend``:
"DeepGEMM MoE is disabled by default when TP size is >= 8")."""


def deepgemm_moe_skipped(
    model: ModelSpec, fmt: WeightFormat, device: Device, pars: tuple[Parallelism, ...]
) -> str | None:
    """Why vLLM 0.12's DeepGEMM MoE, whose worst-case layout
    :meth:`IterationModel.moe_worst_case_tail_rows` prices, runs in none of the pools ``pars``
    (one engine, or a disaggregated deployment's prefill and decode workers); None where it runs
    in at least one: block-FP8 experts on a GPU of compute capability 9.0 or 10.0 below MoE TP 8
    (read in the vLLM 0.12.0 wheel, see there). The one rule of the serving model and of the
    engine option that turns the layout on (``deepgemm_moe_worst_case``)."""
    if not model.is_moe:
        return f"{model.name} has no experts"
    if fmt.name != "fp8_block":
        return f"its weights are {fmt.name}, not fp8_block"
    cc = device.compute_capability
    if cc not in DEEPGEMM_MOE_COMPUTE_CAPABILITIES:
        where = "no CUDA compute capability" if cc is None else f"compute capability {cc:.1f}"
        return f"{device.id} has {where}"
    if all(p.moe_tp >= DEEPGEMM_MOE_MAX_TP for p in pars):
        if len(pars) == 1:
            return f"its MoE TP (tp / ep) {pars[0].moe_tp} is {DEEPGEMM_MOE_MAX_TP} or more"
        tps = " and ".join(str(p.moe_tp) for p in pars)
        return f"every pool's MoE TP (tp / ep: {tps}) is {DEEPGEMM_MOE_MAX_TP} or more"
    return None


def kv_bytes_per_token(model: ModelSpec, par: Parallelism, kv_dtype: str) -> float:
    """KV-cache bytes one token of context holds on one GPU, over the full-attention layers of
    one pipeline stage. GQA keeps ``2 * kv_heads * head_dim`` values per layer, split over the
    attention TP ranks (a rank keeps at least one head); MLA keeps the compressed latent plus
    the rotary key, ``kv_lora_rank + qk_rope_head_dim``, replicated on every attention TP rank
    (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1.2, Table 1)."""
    layers = full_attention_layers(model) / par.pp
    if model.is_mla:
        per_layer = float(model.kv_lora_rank + model.qk_rope_head_dim)
    else:
        per_layer = 2.0 * max(model.num_kv_heads / par.attention_tp, 1.0) * model.head_dim
    return layers * per_layer * KV_BYTES[kv_dtype]


def full_attention_layers(model: ModelSpec) -> int:
    """Layers whose KV cache grows with the context (not sliding-window, not linear)."""
    return model.num_layers - model.sliding_window_layers - model.linear_attention_layers


def window_bytes_per_sequence(model: ModelSpec, par: Parallelism, kv_dtype: str) -> float:
    """KV bytes a sequence holds in its sliding-window layers once past the window."""
    if not model.sliding_window_layers:
        return 0.0
    per_layer = 2.0 * max(model.num_kv_heads / par.attention_tp, 1.0) * model.head_dim
    return (
        model.sliding_window_layers / par.pp * per_layer * model.sliding_window * KV_BYTES[kv_dtype]
    )


def weight_bytes_per_gpu(
    model: ModelSpec,
    par: Parallelism,
    fmt: WeightFormat,
    expert_dims: tuple[float, float] | None = None,
    expert_out_hidden: float | None = None,
) -> float:
    """Weights one GPU stores: linear layers in the serving format, embeddings and the head in
    16 bits (engines keep them unquantized), experts sharded ``ep``-way and ``moe_tp``-way.
    ``expert_dims``: (hidden, intermediate per ``moe_tp`` rank) of one expert as the engine
    allocates it (``IterationModel.moe_expert_dims``: vLLM's Marlin MXFP4 experts are created
    padded, ``Mxfp4MoEMethod.create_weights``, vllm v0.18.0 quantization/mxfp4.py); ``None``,
    the model's own. ``expert_out_hidden``: the down projection's output width as allocated
    (``IterationModel.moe_expert_out_hidden``); ``None``, the hidden width of ``expert_dims``."""
    w = fmt.weight_bytes
    # Token-mixer parameters averaged over the layers: MLA with its indexer, GQA with its output
    # gate, Gated DeltaNet layers of hybrids (costmodel/params.py).
    attn = mean_attention_params(model) / par.attention_tp * attention_weight_bytes(model, fmt) / w
    dense_f = model.dense_ffn_hidden_size or model.ffn_hidden_size
    mats = 3.0 if model.mlp == "gated" else 2.0
    # Shared experts and dense-layer MLPs in their stored format (in units of ``w``, as above).
    dense_scale = dense_mlp_weight_bytes(model, fmt) / w
    if model.is_moe:
        moe_layers = model.num_layers - model.dense_layers
        if expert_dims is None:
            expert_dims = (float(model.hidden_size), model.ffn_hidden_size / par.moe_tp)
        h_out = expert_dims[0] if expert_out_hidden is None else expert_out_hidden
        # The up (and gate) projections read the hidden width, the down projection writes it.
        per_expert = ((mats - 1.0) * expert_dims[0] + h_out) * expert_dims[1]
        experts = model.num_experts / par.ep * per_expert
        shared = model.shared_experts * mats * model.hidden_size * model.ffn_hidden_size
        shared /= par.attention_tp
        router = model.hidden_size * model.num_experts
        dense = model.dense_layers * mats * model.hidden_size * dense_f / par.tp
        mlp = dense * dense_scale + moe_layers * (experts + shared * dense_scale + router)
    else:
        mlp = model.num_layers * mats * model.hidden_size * model.ffn_hidden_size / par.tp
        mlp *= dense_scale
    layers = (model.num_layers * attn + mlp) * w / par.pp
    tables = (1 if model.tied_embeddings else 2) * model.vocab_size * model.hidden_size
    return layers + tables * SIXTEEN_BIT / par.attention_tp


def attention_weight_bytes(model: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes per attention-projection weight: the serving format's, or 16 bits where the
    published checkpoint quantizes only the experts (``ModelSpec.attention_weights_16bit``,
    gpt-oss ``modules_to_not_convert``) and the format would be narrower."""
    if model.attention_weights_16bit:
        return max(fmt.weight_bytes, SIXTEEN_BIT)
    return fmt.weight_bytes


def dense_mlp_weight_bytes(model: ModelSpec, fmt: WeightFormat) -> float:
    """Bytes per shared-expert or dense-layer MLP weight: the serving format's, or 16 bits where
    the checkpoint quantizes only the routed experts (``ModelSpec.dense_mlp_weights_16bit``,
    Kimi-K2.5 compressed-tensors ``ignore``) and the format would be narrower."""
    if model.dense_mlp_weights_16bit:
        return max(fmt.weight_bytes, SIXTEEN_BIT)
    return fmt.weight_bytes


def expected_max_normal(n: int) -> float:
    """Expected largest of ``n`` independent standard normal draws, by Blom's (1958) order-
    statistic approximation ``Phi^-1((n - 0.375) / (n + 0.25))``; 0 for one draw."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def expert_load(
    group_tokens: np.ndarray, num_experts: int, top_k: int, ep: int
) -> tuple[np.ndarray, np.ndarray]:
    """(experts touched, token-expert pairs) on the busiest of the ``ep`` expert-parallel ranks.

    Under uniform top-k routing (the router's balancing target, DeepSeek-V3 arXiv:2412.19437
    Sec. 2.1.2) an expert is hit by ``T`` tokens with probability ``p = 1 - (1 - k/E)^T``; a
    rank holding ``E/ep`` experts touches a binomial number of them and receives a binomial
    share ``1/ep`` of the ``T k`` pairs. The MoE layer ends when its slowest rank does (the
    combine all-to-all waits for every rank; the imbalance is why EPLB replicates hot experts,
    deepseek-ai/EPLB README), so each count is its expected maximum over the ranks: mean plus
    ``expected_max_normal(ep)`` standard deviations (normal approximation), capped at the
    rank's experts. With ``ep = 1`` both are the means."""
    t = np.asarray(group_tokens, dtype=float)
    here = num_experts / ep
    p = 1.0 - (1.0 - top_k / num_experts) ** t
    z = expected_max_normal(ep)
    touched = here * p + z * np.sqrt(here * p * (1.0 - p))
    touched = np.clip(touched, 1.0, here)
    share = 1.0 / ep
    pairs = t * top_k * share + z * np.sqrt(t * top_k * share * (1.0 - share))
    # Every touched expert holds at least one token.
    return touched, np.maximum(pairs, touched)


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationModel:
    """The per-iteration cost of one engine instance, ready to evaluate on arrays of loads."""

    model: ModelSpec
    cluster: Cluster
    par: Parallelism
    fmt: WeightFormat
    kv_dtype: str
    profile: Profile
    iteration_overhead_s: float
    """Engine CPU work per iteration not hidden behind the GPU (scheduling, sampling, launch)."""
    per_sequence_overhead_s: float
    """Engine CPU work per running sequence per iteration (input prep, detokenize, stream)."""
    decode_graph_sizes: tuple[float, ...] = ()
    """Captured CUDA-graph batch sizes a decode-only iteration is padded up to
    (``EngineProfile.cuda_graph_batch_sizes``, :meth:`padded_decodes`); empty: none."""
    eager_prefill_host_s_per_kernel: float = 0.0
    """Host seconds per kernel of one forward when an iteration carrying prompt tokens runs
    eagerly (no CUDA graph); 0 where such iterations replay graphs (``eager_prefill_floor_s``)."""
    moe_worst_case_align: float = 0.0
    """Rows per block of a grouped expert GEMM that computes its worst-case contiguous layout
    whatever the routing (vLLM 0.12's DeepGEMM MoE, :meth:`moe_worst_case_tail_rows`); 0 where
    the engine computes only the touched experts' rows."""
    moe_worst_case_chunk_tokens: float = math.inf
    """Tokens per chunk the engine runs that layout over, each chunk with its own tail (vLLM's
    ``FusedMoEModularKernel._chunk_info``: VLLM_FUSED_MOE_CHUNK_SIZE); inf: one chunk."""
    moe_gather_scatter: bool = False
    """The engine's MoE layers under attention DP all-gather the DP group's 16-bit hidden
    states and reduce-scatter the output (TensorRT-LLM's CUTLASS MoE, vLLM 0.12's default
    backend, SGLang 0.5.8 without DeepEP; ``EngineProfile.moe_dp_communication``); False: the
    all-to-all of top-k copies."""
    moe_all_to_all_on_mnnvl: bool = False
    """With ``moe_gather_scatter``: the engine takes the all-to-all instead where the NVLink
    domain spans nodes (TensorRT-LLM, :meth:`moe_all_to_all`)."""
    moe_prefill_gather_all_reduce: bool = False
    """With ``moe_gather_scatter``: an iteration that carries prompt tokens gathers the DP
    group's hidden states with an all-reduce of the summed buffer and all-reduces the MoE
    output before each rank copies its own rows back (SGLang's ``SUM_LEN`` padding mode,
    ``EngineProfile.prefill_dp_gather_all_reduce``); decode-only iterations keep the
    all-gather and reduce-scatter."""
    speculation: Speculation | None = None
    """Speculative decoding: each decoding request verifies ``draft_tokens + 1`` positions per
    iteration, and the draft module runs ``draft_tokens`` times (:meth:`draft_s`)."""
    draft_pass: bool = False
    """This model is one pass of the draft module (``model`` one block): it verifies nothing
    and drafts nothing itself; ``speculation`` only sets the positions per request it reads."""
    speculative_step_host_s: float = 0.0
    """Host seconds a speculative decode step spends outside the GPU's work when the engine's
    overlap scheduler is off (SGLang's EAGLE worker v1: ``EngineProfile.
    speculative_step_host_us``), added to every iteration that decodes; 0 where the engine
    overlaps it or runs no speculation."""
    dense_fp8_rate: float = math.inf
    """FLOP/s at most of the engine's kernel for the dense block-FP8 linear layers (attention
    projections, shared experts, dense MLPs): SGLang running FlashInfer's TRT-LLM groupwise
    GEMM on Blackwell (``EngineProfile.flashinfer_fp8_gemm``, :meth:`dense_linear_time`);
    inf where the engine's kernel is the GEMM curve's (DeepGEMM, cuBLASLt)."""

    @property
    def queries(self) -> float:
        """Positions each decoding request puts through the target per iteration."""
        return float(self.speculation.queries) if self.speculation is not None else 1.0

    @property
    def tokens_per_iteration(self) -> float:
        """Output tokens one iteration emits per decoding request (1 without speculation)."""
        if self.speculation is None or self.draft_pass:
            return 1.0
        return self.speculation.tokens_per_iteration

    def padded_decodes(self, n_decode: np.ndarray, prefill_tokens: np.ndarray) -> np.ndarray:
        """The requests a decode-only iteration's GEMMs run: the smallest captured graph size
        at least ``n_decode`` (:attr:`decode_graph_sizes`), ``n_decode`` itself above the
        largest, in an iteration with prompt tokens (those run eagerly, unpadded) or without
        padding."""
        n = np.asarray(n_decode, dtype=float)
        if not self.decode_graph_sizes:
            return n
        sizes = np.asarray(self.decode_graph_sizes)
        i = np.searchsorted(sizes, n - 1e-9)
        padded = np.where(i < sizes.size, sizes[np.minimum(i, sizes.size - 1)], n)
        decode_only = (np.asarray(prefill_tokens, dtype=float) == 0.0) & (n > 0.0)
        return np.where(decode_only, padded, n)

    def gemm_s(self, g: Gemm, precision: str, weight_bytes: float) -> np.ndarray:
        """Seconds of the dense GEMMs ``g`` on this device (:func:`serving_gemm_time`)."""
        return serving_gemm_time(g, precision, self.cluster.device, self.profile, weight_bytes)

    def time_s(
        self,
        n_decode: np.ndarray,
        decode_context: np.ndarray,
        prefill_tokens: np.ndarray,
        prefill_context: np.ndarray,
    ) -> np.ndarray:
        """Seconds of one iteration on one attention rank: ``n_decode`` decoding sequences of
        mean context ``decode_context`` and ``prefill_tokens`` prompt tokens whose queries
        attend to ``prefill_context`` keys on average (half the prompt for a causal prefill)."""
        parts = self.parts_s(n_decode, decode_context, prefill_tokens, prefill_context)
        return parts["total"]

    def parts_s(
        self,
        n_decode: np.ndarray,
        decode_context: np.ndarray,
        prefill_tokens: np.ndarray,
        prefill_context: np.ndarray,
    ) -> dict[str, np.ndarray]:
        """:meth:`time_s` term by term, in seconds of the whole forward (all layers, all
        stages): ``projections`` (token-mixer GEMMs), ``attention`` (attention kernels),
        ``experts`` (the two grouped expert GEMMs), ``moe_other`` (router, routing/permute glue,
        its memory passes, shared experts), ``dense_mlp`` (dense-layer or dense-model MLPs),
        ``elementwise``, ``kernel_gaps`` (per-kernel dispatch gaps), ``communication``,
        ``head``, ``pipeline_hops``; ``gpu`` is their pipelined sum, ``host_floor`` the eager
        launch floor where it binds (``total`` takes the larger of ``gpu`` and the floor per
        stage), ``draft`` the speculative module, ``overhead`` the engine's per-iteration and
        per-sequence host time, ``total`` what :meth:`time_s` returns."""
        m, par, dev = self.model, self.par, self.cluster.device
        n_d = np.asarray(n_decode, dtype=float)
        # A speculative verification puts each request's last token and its drafts through
        # every GEMM (tech blog 1, TensorRT-LLM: "m = 4 when using three MTP layers").
        q = self.queries
        # A padded CUDA graph runs its dummy requests through every GEMM, elementwise kernel,
        # collective and the head; attention reads only the real requests' caches.
        n_run = self.padded_decodes(n_d, prefill_tokens)
        tokens = n_run * q + np.asarray(prefill_tokens, dtype=float)
        tokens = np.maximum(tokens, 1e-9)
        prec = gemm_precision(self.fmt, dev)
        launch = self.profile.const("kernel_launch_us") * 1e-6
        wb = self.fmt.weight_bytes
        t_a = float(par.attention_tp)
        hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * self.profile.hbm_efficiency
        ones = np.ones_like(tokens)
        peak = dev.peak(prec) * 1e12
        curve = self.profile.gemm_curve(dev.id, dev.generation, prec)
        kernels = self.profile.graph_kernels_for(dev.id, dev.generation)
        # The mixed-input kernel's instruction rate caps the curve (it does not scale the
        # small-GEMM end, which latency and tile counts already limit).
        moe_ceiling = self.moe_math_rate() * max(curve.efficiency)

        def gemm(
            tok: np.ndarray,
            n: float,
            k: float,
            count: np.ndarray | float = 1.0,
            precision: str = prec,
            w_bytes: float = wb,
            grouped: bool = False,
            extra_rows: np.ndarray | float = 0.0,
            linear: bool = False,
        ) -> np.ndarray:
            c = np.asarray(count, dtype=float) * ones
            # The expert GEMMs stay grouped kernels when a rank holds one expert (EP = experts).
            if not grouped:
                g = Gemm("g", tok * ones, n * ones, k * ones, c)
                t = self.gemm_s(g, precision, w_bytes)
                if linear:
                    t = self.dense_linear_time(t, tok * c, n, k, precision)
                return t
            # A grouped GEMM over ``count`` experts is one kernel (CUTLASS grouped GEMM, the
            # fused-MoE Triton kernel, DeepGEMM): its efficiency follows the whole group's
            # FLOPs and it launches once; its traffic is every touched expert's weights. Its
            # math runs on each expert's rows padded to the kernel's tile (``moe_padded_rows``)
            # and, for weight-only experts on Hopper, at most the engine's mixed-input kernel's
            # share of the best 16-bit rate (``moe_weight_only_hopper_rate``).
            # ``extra_rows``: rows the kernel computes beyond the experts' own (a worst-case
            # layout's tail, ``moe_worst_case_tail_rows``), in the same launch.
            flops = 2.0 * (self.moe_padded_rows(tok) * c + extra_rows) * n * k
            math = flops / (peak * np.minimum(curve(flops), moe_ceiling))
            # The engine's grouped kernel, measured whole, bounds the useful FLOPs' rate
            # (``moe_grouped_rate``; infinite where its profile measured none).
            math = np.maximum(math, 2.0 * tok * c * n * k / self.moe_grouped_rate(tok))
            act = 2.0 * (tok * c + extra_rows) * (n + k)
            traffic = (act + c * n * k * wb) / hbm
            if kernels is not None:
                # One grouped kernel: the measured GEMM latency once. Its traffic stays at
                # ``hbm_efficiency``: torch's CUTLASS grouped GEMM streamed touched experts at
                # 0.56-0.71 of the H200's datasheet (data/validation/device/, 1-64 rows per
                # expert), but it is not the engines' kernel: at 0.60 the H200 DeepSeek-R1
                # records turn 6% too slow in TPOT (docs/benchmarks.md, "Kernels measured").
                return kernels.gemm_latency_us * 1e-6 + np.maximum(math, traffic)
            return np.maximum(np.maximum(math, traffic), launch)

        h = float(m.hidden_size)
        # Attention projections (Megatron column/row split over the attention TP ranks), at
        # 16 bits where the checkpoint leaves them unquantized (``attention_weight_bytes``).
        wa = attention_weight_bytes(m, self.fmt)
        pa = prec if wa == wb else dev.half_precision

        def projection(n: float, k: float) -> np.ndarray:
            # One token-mixer projection GEMM (MLA, GQA, Gated DeltaNet alike) in the format
            # its checkpoint stores it, as ``weight_bytes_per_gpu`` counts it.
            return gemm(tokens, n, k, 1.0, pa, wa, linear=True)

        if m.is_mla:
            qk = float(m.qk_nope_head_dim + m.qk_rope_head_dim)
            heads = m.num_heads / t_a
            proj = projection(float(m.kv_lora_rank + m.qk_rope_head_dim), h)
            if m.q_lora_rank:
                proj = proj + projection(float(m.q_lora_rank), h)
                proj = proj + projection(heads * qk, float(m.q_lora_rank))
            else:
                proj = proj + projection(heads * qk, h)
            # kv_b_proj: a block-FP8 linear layer only where the prompt's keys and values are
            # expanded (SGLang's ``forward_normal``); the absorbed decode and verification
            # multiply its BF16 halves ``w_kc`` / ``w_vc`` with torch.bmm instead (0.5.9
            # ``deepseek_weight_loader.py`` dequantizes them at load), so only the prompt rows
            # meet the engine's block-FP8 kernel.
            kv_b = heads * (m.qk_nope_head_dim + m.v_head_dim)
            t_kv_b = gemm(tokens, kv_b, float(m.kv_lora_rank), 1.0, pa, wa)
            prompt_rows = np.asarray(prefill_tokens, dtype=float) * ones
            proj = proj + self.dense_linear_time(
                t_kv_b, prompt_rows, kv_b, float(m.kv_lora_rank), pa
            )
            proj = proj + projection(h, heads * m.v_head_dim)
        else:
            kv_w = 2.0 * max(m.kv_width / t_a, m.head_dim)
            # An output gate doubles q_proj's width (transformers Qwen3_5MoeAttention).
            q_out = m.q_width * (2.0 if m.attention_output_gate else 1.0)
            proj = projection(q_out / t_a + kv_w, h)
            proj = proj + projection(h, m.q_width / t_a)
            if m.has_gated_deltanet:
                # Gated DeltaNet layers (transformers Qwen3_5MoeGatedDeltaNet): in_proj_qkv
                # (2 key + value), in_proj_z (value), in_proj_a/b (one per value head), out_proj.
                key = float(m.linear_num_key_heads * m.linear_key_head_dim)
                value = float(m.linear_num_value_heads * m.linear_value_head_dim)
                width_in = (2.0 * key + 2.0 * value + 2.0 * m.linear_num_value_heads) / t_a
                linear_proj = projection(width_in, h) + projection(h, value / t_a)
                share = m.linear_attention_layers / m.num_layers
                proj = (1.0 - share) * proj + share * linear_proj

        attn = self._attention_core(
            n_d, decode_context, prefill_tokens, prefill_context, hbm, queries=q
        )

        # MLP: dense layers TP-split; MoE layers route tokens * top-k over the EP group.
        mats_up = 2.0 if m.mlp == "gated" else 1.0
        dense_f = float(m.dense_ffn_hidden_size or m.ffn_hidden_size)
        # Shared experts and the leading dense layers in their stored format
        # (``dense_mlp_weight_bytes``).
        wd = dense_mlp_weight_bytes(m, self.fmt)
        pd = prec if wd == wb else dev.half_precision
        dense_mlp = gemm(tokens, mats_up * dense_f / par.tp, h, 1.0, pd, wd, linear=True) + gemm(
            tokens, h, dense_f / par.tp, 1.0, pd, wd, linear=True
        )
        if m.is_moe:
            group_tokens = tokens * par.attention_dp
            # Expert weights as the engine's kernel stores them (``moe_expert_dims``).
            he, f = self.moe_expert_dims()
            touched, pairs = expert_load(group_tokens, m.num_experts, m.experts_per_token, par.ep)
            per_expert = pairs / touched
            # vLLM 0.12's DeepGEMM MoE also computes its worst-case layout's tail blocks.
            tail = self.moe_worst_case_tail_rows(group_tokens, touched, per_expert)
            he_out = self.moe_expert_out_hidden()
            experts = gemm(
                per_expert, mats_up * f, he, touched, grouped=True, extra_rows=tail
            ) + gemm(per_expert, he_out, f, touched, grouped=True, extra_rows=tail)
            # Then silu-and-mul (reads 2f, writes f 16-bit values) and the per-token-group FP8
            # quantization (reads f of them, writes f bytes) run over the tail rows too.
            experts = experts + 9.0 * tail * f / hbm
            moe = gemm(tokens, float(m.num_experts), h)  # router
            # Routing and token shuffling around the expert GEMMs are kernels of their own; how
            # many the engine launches is counted in its profile (``moe_glue_kernels``), plus one
            # activation-quantization kernel before each grouped GEMM where the engine
            # quantizes W8A8 FP8 inputs outside the GEMM (``moe_activation_quant_kernels``).
            glue = self.moe_glue_kernels(prec)
            moe = moe + glue * launch
            # ``MOE_ROUTED_COPY_PASSES`` (four) passes over the routed tokens' top-k copies of the hidden state. Not derived
            # from the kernels: of the glue kernels only the top-k reduction (vLLM/SGLang
            # moe_sum) reads such a copy, and TensorRT-LLM's CUTLASS MoE moves two (its permuted
            # input, expandInputRows; the second GEMM's output read back in finalizeMoeRouting)
            # beside the GEMMs' own activation traffic. The light-load prefill slopes do not
            # support the smaller counts (benchmarks/moe_prefill_audit.py,
            # docs/investigations/serving-moe-prefill.md "MoE prefill, term by term"); kept
            # until the routed gather and scatter are measured.
            copies = group_tokens / par.attention_dp * m.experts_per_token * h * SIXTEEN_BIT
            moe = moe + MOE_ROUTED_COPY_PASSES * copies / hbm
            if m.shared_experts:
                sf = m.shared_experts * float(m.ffn_hidden_size) / t_a
                moe = moe + gemm(tokens, mats_up * sf, h, 1.0, pd, wd, linear=True)
                moe = moe + gemm(tokens, h, sf, 1.0, pd, wd, linear=True)
            moe_layers = m.num_layers - m.dense_layers
            experts_total = moe_layers * experts
            moe_other = moe_layers * moe
            dense_total = m.dense_layers * dense_mlp
        else:
            moe_layers = 0
            experts_total = np.zeros_like(tokens)
            moe_other = np.zeros_like(tokens)
            dense_total = m.num_layers * dense_mlp

        # Memory-bound elementwise kernels (norms, residuals, rotary, activation); inside a
        # replayed graph a measured device's cost their gap, bytes and a measured latency.
        elementwise_launch = launch if kernels is None else kernels.elementwise_latency_us * 1e-6
        ffn_width = (m.ffn_hidden_size * m.experts_per_token) / par.moe_tp if m.is_moe else dense_f
        elementwise = (
            2.0
            * tokens
            * (
                self.profile.const("elementwise_hidden_passes") * h / t_a
                + self.profile.const("elementwise_ffn_passes") * ffn_width / par.tp
            )
            / hbm
            + self.profile.const("elementwise_kernels_per_layer") * elementwise_launch
        )

        comm = self._communication(tokens, moe_layers, np.asarray(prefill_tokens, dtype=float))
        gaps = self.serial_kernels(prec) * self._gap_s() * ones
        layers = (
            m.num_layers * proj
            + m.num_layers * elementwise
            + attn
            + experts_total
            + moe_other
            + dense_total
            + gaps
        )
        per_stage = layers / par.pp + comm / par.pp

        # LM head on the sequences that emit a token this iteration (decodes; prefills whose
        # last chunk ends here are at most one per prompt and counted with the decodes).
        # Verification samples every verified position (k + 1 per request); a draft pass samples
        # one position per request (``shared_head(hidden_states[gather_ids])``, TensorRT-LLM
        # ``MTPEagleWorker.forward``).
        emit = np.maximum(n_run if self.draft_pass else n_run * q, 1.0)
        # The head stays in 16 bits in every serving format, as ``weight_bytes_per_gpu`` stores
        # it (gpt-oss quantization_config modules_to_not_convert lists lm_head; ModelOpt FP8/
        # NVFP4 checkpoints exclude it; vLLM's ParallelLMHead is unquantized for FP8).
        g_head = Gemm("head", emit * ones, m.vocab_size / t_a * ones, h * ones, ones)
        head = self.gemm_s(g_head, dev.half_precision, SIXTEEN_BIT)
        levels = LevelBandwidth.of(self.cluster, self.profile)
        # A stage hands its activations to the next over NVLink when both sit in one node,
        # else over the NIC: the worker's stages lie in order on its nodes
        # (``planner/serving/placement.py``), so ``crossing_hops`` of them cross a boundary.
        act = tokens * h * SIXTEEN_BIT
        far = crossing_hops(par.tp, par.pp, self.cluster.gpus_per_node)
        hop_far = collective_time_s("send_recv", act, 2, 1, levels)
        hop_near = collective_time_s("send_recv", act, 2, 2, levels)
        gpu_stage = per_stage
        floor_stage = np.zeros_like(per_stage)
        if self.eager_prefill_host_s_per_kernel > 0.0:
            # An eager forward cannot finish before its host has launched every kernel: the
            # launches run ahead of the GPU asynchronously (PyTorch's CUDA stream semantics), so
            # a prompt-carrying iteration lasts max(host launches, GPU work) per stage.
            eager = np.asarray(prefill_tokens, dtype=float) * ones > 0.0
            floor = self.eager_prefill_floor_s() / par.pp
            floor_stage = np.where(eager, floor, 0.0)
            per_stage = np.where(eager, np.maximum(per_stage, floor), per_stage)
        # Pipeline stages run one after another for one batch (no micro-batch overlap assumed).
        hops = far * hop_far + (par.pp - 1 - far) * hop_near
        total = per_stage * par.pp + hops + head
        running = n_d + np.minimum(np.asarray(prefill_tokens, dtype=float), 1.0)
        draft = self.draft_s(n_decode, decode_context, prefill_tokens, prefill_context)
        overhead = self.iteration_overhead_s + self.per_sequence_overhead_s * running
        if self.speculation is not None and not self.draft_pass:
            overhead = overhead + np.where(n_d > 0.0, self.speculative_step_host_s, 0.0)
        total = total + draft + overhead
        return {
            "projections": m.num_layers * proj * ones,
            "attention": attn * ones,
            "experts": experts_total * ones,
            "moe_other": moe_other * ones,
            "dense_mlp": dense_total * ones,
            "elementwise": m.num_layers * elementwise * ones,
            "kernel_gaps": gaps,
            "communication": comm * ones,
            "head": head * ones,
            "pipeline_hops": hops * ones,
            "gpu": gpu_stage * par.pp + hops + head,
            "host_floor": floor_stage * par.pp,
            "draft": draft * ones,
            "overhead": overhead * ones,
            "total": total,
        }

    def draft_model(self, queries: int) -> IterationModel:
        """One pass of the draft module as an iteration model: one transformer block of the
        main model's own kind (an MoE block for DeepSeek-V3, arXiv:2412.19437 Sec. 2.2: "a
        shared embedding layer, a shared output head, a Transformer block, and a projection
        matrix"), on the last pipeline stage, inside the target's forward (one CUDA graph for
        verification and drafting, TensorRT-LLM tech blog 2), so no per-iteration host
        overhead of its own. ``queries`` positions per decoding request."""
        m = self.model
        one = dataclasses.replace(
            m,
            num_layers=1,
            dense_layers=0,
            sliding_window_layers=0,
            attention_chunk_layers=0,
            linear_attention_layers=0,
        )
        spec = self.speculation
        return dataclasses.replace(
            self,
            model=one,
            par=dataclasses.replace(self.par, pp=1),
            iteration_overhead_s=0.0,
            per_sequence_overhead_s=0.0,
            speculative_step_host_s=0.0,
            eager_prefill_host_s_per_kernel=0.0,
            speculation=(
                dataclasses.replace(spec, draft_tokens=queries - 1)
                if spec is not None and queries > 1
                else None
            ),
            draft_pass=True,
        )

    def draft_s(
        self,
        n_decode: np.ndarray,
        decode_context: np.ndarray,
        prefill_tokens: np.ndarray,
        prefill_context: np.ndarray,
    ) -> np.ndarray:
        """Seconds the draft module adds to one iteration (0 without speculation).

        MTP Eagle (TensorRT-LLM's default for DeepSeek-V3/R1, tech blog 2): the first pass
        takes every prompt token prefilled in this iteration (the context phase runs the module
        over the prompt) and ``k + 1`` positions per decoding request (``accepted_tokens[
        num_contexts:, :].flatten()``, rows of ``num_nextn_predict_layers + 1``:
        ``MTPEagleWorker.prepare_drafter_inputs`` in ``tensorrt_llm/_torch/speculative/
        mtp.py``); each of the ``k - 1`` further passes takes one token per request. Each pass also runs the projection of the
        concatenated normalized hidden state and embedding (``2h -> h``) and the shared head
        (in the block's model). A module of ``draft_layers`` blocks runs them in sequence."""
        spec = self.speculation
        if spec is None or self.draft_pass:
            return np.zeros_like(np.asarray(n_decode, dtype=float))
        n_d = np.asarray(n_decode, dtype=float)
        p_tok = np.asarray(prefill_tokens, dtype=float)
        zeros = np.zeros_like(n_d + p_tok)
        first = self.draft_model(spec.queries)
        t = first.time_s(n_d, decode_context, prefill_tokens, prefill_context)
        t = t + first._draft_projection_s(n_d * spec.queries + p_tok)
        if spec.draft_tokens > 1:
            rest = self.draft_model(1)
            later = rest.time_s(n_d, decode_context, zeros, zeros)
            later = later + rest._draft_projection_s(n_d)
            t = t + (spec.draft_tokens - 1) * later
        return np.asarray(t * spec.draft_layers)

    def _draft_projection_s(self, tokens: np.ndarray) -> np.ndarray:
        """The MTP module's ``eh_proj`` (``[norm(h); norm(emb)]``, ``2h -> h``) on ``tokens``,
        TP-split over the attention ranks like the other projections."""
        dev = self.cluster.device
        h = float(self.model.hidden_size)
        t = np.maximum(np.asarray(tokens, dtype=float), 1e-9)
        ones = np.ones_like(t)
        g = Gemm("eh_proj", t, h / self.par.attention_tp * ones, 2.0 * h * ones, ones)
        wa = attention_weight_bytes(self.model, self.fmt)
        prec = gemm_precision(self.fmt, dev) if wa == self.fmt.weight_bytes else dev.half_precision
        return self.gemm_s(g, prec, wa)

    def eager_prefill_floor_s(self) -> float:
        """Host time to launch one eager forward through the decoder layers (all stages): the
        kernels of ``serial_kernels`` at the engine's host cost per kernel. Engines that run
        prompt-carrying batches without CUDA graphs are host-bound there on short prompts:
        SGLang measured an 82.6 ms forward for a 1-token prefill of DeepSeek-V3 eagerly against
        23.1 ms replaying a CUDA graph, and "prefill latency is similar when new_tokens < 100"
        (sgl-project/sglang PR #12160); TensorRT-LLM's docs call its context phase host-bound
        (docs/source/torch/features/torch_compile_and_piecewise_cuda_graph.md)."""
        prec = gemm_precision(self.fmt, self.cluster.device)
        return self.serial_kernels(prec) * self.eager_prefill_host_s_per_kernel

    def moe_math_rate(self) -> float:
        """Share of the GEMM curve's rate the expert GEMMs reach: the engine's weight-only MoE
        kernel on Hopper may not issue Hopper's wgmma (Marlin MoE runs Ampere's mma.sync,
        about two thirds of the H100 tensor-core peak; FlashAttention-3, arXiv:2407.08608,
        Sec. 2.2); 1 elsewhere and for natively computed formats."""
        dev = self.cluster.device
        # Weight-only: weights narrower than 16 bits computed at the 16-bit rate (the
        # ``*_wo`` formats and formats without a native rate on this GPU, ``is_weight_only``).
        sixteen_bit_math = gemm_precision(self.fmt, dev) == dev.half_precision
        if dev.generation == "hopper" and sixteen_bit_math and self.fmt.weight_bytes < SIXTEEN_BIT:
            return self.profile.const("moe_weight_only_hopper_rate")
        return 1.0

    def moe_grouped_rate(self, per_expert: np.ndarray) -> np.ndarray:
        """FLOP/s the engine's grouped expert-GEMM kernel sustains when each expert holds
        ``per_expert`` tokens on average: its measured curve (``Profile.moe_gemm``, a share of
        the 16-bit peak over the FLOPs of one expert's MLP in a layer, from kernel benchmarks of
        the whole fused-MoE op) times the peak, times ``moe_math_rate`` where the kernel issues
        Ampere's mma.sync (Marlin), times ``moe_fp8_over_bf16_rate`` where it runs W8A8 FP8.
        A grouped GEMM gathers each expert's rows, runs one expert's tile loop per block and
        writes per expert: its rate follows one expert's work, not the group's total FLOPs that
        ``gemm_curve`` is read at. A curve keyed by the experts' precision
        (``Profile.moe_gemm_precise``, e.g. DeepGEMM's FP8 grouped GEMM) is a share of that
        precision's peak and takes precedence. Infinite where the profile has no curve for
        this GPU."""
        x = np.asarray(per_expert, dtype=float)
        m, dev = self.model, self.cluster.device
        prec = gemm_precision(self.fmt, dev)
        mats_up = 2.0 if m.mlp == "gated" else 1.0
        he, f = self.moe_expert_dims()
        expert_flops = 2.0 * x * (mats_up * he + self.moe_expert_out_hidden()) * f
        # Keyed by the stored format, not the math precision: per-tensor FP8 runs another kernel
        # than block FP8 (DeepGEMM), though both compute in FP8.
        precise = self.profile.moe_gemm_precise(dev.id, dev.generation, self.fmt.name)
        if precise is not None and m.is_moe:
            # The engine's kernel measured in this precision: a share of its own peak.
            rate = precise(expert_flops) * dev.peak(prec) * 1e12 * self.moe_math_rate()
            return np.asarray(rate, dtype=float)
        curve = self.profile.moe_gemm_curve(dev.id, dev.generation)
        if curve is None or not m.is_moe:
            return np.full_like(x, np.inf)
        rate = curve(expert_flops) * dev.peak(dev.half_precision) * 1e12 * self.moe_math_rate()
        if prec == "fp8":
            rate = rate * self.profile.const("moe_fp8_over_bf16_rate")
        return np.asarray(rate, dtype=float)

    def moe_expert_dims(self) -> tuple[float, float]:
        """(hidden, intermediate per rank) of one expert as the engine's MoE kernel stores and
        computes it. vLLM's Marlin MXFP4 backend pads both to the kernel's alignment, hidden to
        256 and the intermediate size to 128 ("The moe marlin kernel requires that for each
        linear n % 256 == 0 and k % 128 == 0", ``Mxfp4MoEMethod.create_weights``, vllm
        v0.18.0 quantization/mxfp4.py), and the kernel computes the zero padding: gpt-oss-120b's
        2,880 becomes 3,072 and 2,944 (TP1) or 384 per rank (360 at TP8). Profile constants
        ``moe_marlin_mxfp4_hidden_align`` / ``..._intermediate_align`` (1 elsewhere); they
        apply where MXFP4 experts are computed weight-only (no FP4 tensor cores: Hopper)."""
        m, dev = self.model, self.cluster.device
        h = float(m.hidden_size)
        f = float(m.ffn_hidden_size) / self.par.moe_tp
        weight_only = gemm_precision(self.fmt, dev) == dev.half_precision
        if self.fmt.name == "mxfp4" and weight_only:
            ah = self.profile.const("moe_marlin_mxfp4_hidden_align")
            af = self.profile.const("moe_marlin_mxfp4_intermediate_align")
            h = float(np.ceil(h / ah) * ah)
            f = float(np.ceil(f / af) * af)
        return h, f

    def moe_expert_out_hidden(self) -> float:
        """Output width of one expert's down projection as the engine's MoE kernel stores and
        computes it (:meth:`moe_expert_dims` gives the up projections' input width). Where the
        kernel pads the hidden size once (vLLM's Marlin MXFP4: 256) both are the same; the
        TensorRT-LLM Triton MXFP4 method pads the down projection's N to its ``n_alignment``
        (256, twice ``k_alignment``: ``w2_weight_shape`` ends in ``get_padded_size(hidden_size,
        n_alignment)``, and ``matmul_ogs`` computes those columns before
        ``_maybe_remove_padding`` slices them off; tensorrt_llm/_torch/modules/fused_moe/
        fused_moe_triton.py): gpt-oss-120b's 2,880 is 3,072 there, 2,944 for the up GEMM's K.
        Profile constant ``moe_marlin_mxfp4_hidden_out_align`` (1 elsewhere), read where
        :meth:`moe_expert_dims` pads."""
        m, dev = self.model, self.cluster.device
        h = float(m.hidden_size)
        weight_only = gemm_precision(self.fmt, dev) == dev.half_precision
        if self.fmt.name == "mxfp4" and weight_only:
            a = self.profile.const("moe_marlin_mxfp4_hidden_out_align")
            h = float(np.ceil(h / a) * a)
        return h

    def moe_worst_case_tail_rows(
        self, group_tokens: np.ndarray, touched: np.ndarray, per_expert: np.ndarray
    ) -> np.ndarray:
        """Rows the grouped expert GEMMs compute beyond the touched experts' own (padded) rows
        when the engine lays the tokens out for the worst case (``moe_worst_case_align`` > 0).

        vLLM 0.12.0 (read in its wheel): block-FP8 experts take the DeepGEMM backend when the
        MoE tensor-parallel size is below 8 (``get_fp8_moe_backend``, quantization/fp8.py:
        VLLM_USE_DEEP_GEMM and VLLM_MOE_USE_DEEP_GEMM default 1, "DeepGEMM MoE is disabled by
        default when TP size is >= 8") on a GPU of compute capability exactly 9.0 or 10.0
        (``is_deep_gemm_supported``, utils/deep_gemm.py: Hopper, B200/GB200; not B300/GB300 at
        10.3), and ``fused_experts`` runs it for every batch size once E8M0 scales are used
        (``is_deep_gemm_e8m0_used()``, true on those GPUs by
        VLLM_USE_DEEP_GEMM_E8M0 default 1, short-circuits ``_valid_deep_gemm``'s M >= 128 and
        N > 512 checks; fused_moe/fused_moe.py). ``DeepGemmExperts.apply`` sizes both grouped
        GEMMs, the activation and the FP8 re-quantization at ``compute_aligned_M`` rows: with no
        per-expert counts on the host (``MoEPrepareAndFinalizeNoEP`` passes none) that is
        ``M x top-k + local_experts x (align - 1)`` rounded up to ``align`` (deep_gemm_utils.
        py), and ``deepgemm_moe_permute`` zero-fills the expert ids of the blocks past the real
        segments (``expert_ids_init = torch.zeros if maybe_has_empty_blocks``), so DeepGEMM's
        contiguous GEMM computes them as expert 0's rows (its scheduler skips a block only
        when ``grouped_layout`` is negative: ``is_computation_valid``, deep_gemm/include/
        deep_gemm/common/scheduler.cuh).
        ``align`` is DeepGEMM's ``get_mk_alignment_for_contiguous_layout()``, 128. The modular
        kernel runs M in chunks of ``moe_worst_case_chunk_tokens`` tokens (``_chunk_info``;
        ``DeepGemmExperts.supports_chunking()`` is True), each laid out on its own. The tail is
        that layout less the rows :meth:`moe_padded_rows` already counts."""
        a = self.moe_worst_case_align
        m, dev = self.model, self.cluster.device
        g = np.asarray(group_tokens, dtype=float)
        if a <= 0.0 or deepgemm_moe_skipped(m, self.fmt, dev, (self.par,)) is not None:
            return np.zeros_like(g)
        local = m.num_experts / self.par.ep

        def layout(tokens: np.ndarray) -> np.ndarray:
            return np.ceil((tokens * m.experts_per_token + local * (a - 1.0)) / a) * a

        rows = layout(g)
        chunk = self.moe_worst_case_chunk_tokens
        if math.isfinite(chunk):
            full = np.floor(g / chunk)
            rest = g - full * chunk
            rows = full * layout(np.full_like(g, chunk)) + np.where(rest > 0.0, layout(rest), 0.0)
        counted = self.moe_padded_rows(per_expert) * np.asarray(touched, dtype=float)
        return np.maximum(rows - counted, 0.0)

    def moe_padded_rows(self, per_expert: np.ndarray) -> np.ndarray:
        """Rows one expert's GEMM computes for ``per_expert`` tokens on average: its tokens
        padded up to a multiple of the tile's rows ``B`` (``moe_align_block_size`` pads each
        expert's segment so it divides the kernel's BLOCK_SIZE_M; vLLM fused_moe.py). The
        engines pick a small tile for a small load (vLLM ``get_default_config``: Marlin the
        least ``B`` in 8..64 with ``tokens / B < 0.9``, Triton 16 rows while M <= E), here
        powers of two from 16 up to the profile's ``moe_block_m``. A count
        spread over more than a tile leaves on average half a tile of padding (uniform
        residue), and every touched expert computes at least one tile: ``max(B, x + B / 2)``."""
        x = np.asarray(per_expert, dtype=float)
        b_max = self.profile.const("moe_block_m")
        b = 2.0 ** np.ceil(np.log2(np.maximum(x / 0.9, 16.0)))
        b = np.minimum(b, b_max)
        return np.maximum(b, x + b / 2.0)

    def _gap_s(self) -> float:
        return self.profile.const("graph_kernel_gap_us") * 1e-6

    def moe_glue_kernels(self, prec: str) -> float:
        """Kernels of one MoE layer besides the router and the two grouped GEMMs: the engine's
        routing/permute/activation/reduce chain, plus its activation-quantization kernels where
        the experts run W8A8 FP8 (``prec == "fp8"``)."""
        glue = self.profile.const("moe_glue_kernels")
        if prec == "fp8":
            glue += self.profile.const("moe_activation_quant_kernels")
        return glue

    def serial_kernels(self, prec: str) -> float:
        """Kernels of one forward pass through the decoder layers (all stages), each of which
        waits for the one before it. Under CUDA-graph replay every kernel still pays a dispatch
        gap and the launch-to-completion time of its own prologue and tail
        (``graph_kernel_gap_us``) before the next can start, on top of its roofline time."""
        m = self.model
        moe_kernels = 3.0 + self.moe_glue_kernels(prec)  # router + two grouped GEMMs + glue
        if m.shared_experts:
            moe_kernels += 2.0
        proj = (5.0 if m.q_lora_rank else 4.0) if m.is_mla else 2.0
        attention = 2.0  # cache write and the attention kernel (``_attention_core``)
        per_layer = proj + attention + self.profile.const("elementwise_kernels_per_layer")
        dense_layers = m.dense_layers if m.is_moe else m.num_layers
        moe_layers = m.num_layers - dense_layers
        return m.num_layers * per_layer + dense_layers * 2.0 + moe_layers * moe_kernels

    def _attention_core(
        self,
        n_d: np.ndarray,
        decode_context: np.ndarray,
        prefill_tokens: np.ndarray,
        prefill_context: np.ndarray,
        hbm: float,
        queries: float = 1.0,
    ) -> np.ndarray:
        m, par, dev = self.model, self.par, self.cluster.device
        heads = max(m.num_heads / par.attention_tp, 1.0)
        ctx = np.asarray(decode_context, dtype=float)
        full = full_attention_layers(m)
        window = float(m.sliding_window) if m.sliding_window_layers else 0.0
        kv_dtype_bytes = KV_BYTES[self.kv_dtype]
        if m.is_mla:
            # Absorbed MLA decode: each head scores the latent (kv_lora + rope) and mixes it back
            # (kv_lora) for every cached token (arXiv:2405.04434 App. C, weight absorption).
            per_ctx_flops = 2.0 * heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
            per_ctx_bytes = (m.kv_lora_rank + m.qk_rope_head_dim) * kv_dtype_bytes
            prefill_dim = float(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
        else:
            kv_heads = max(m.num_kv_heads / par.attention_tp, 1.0)
            per_ctx_flops = 4.0 * heads * m.head_dim
            per_ctx_bytes = 2.0 * kv_heads * m.head_dim * kv_dtype_bytes
            prefill_dim = 2.0 * m.head_dim
        # Decode kernels are bound by the KV read (FlashDecoding/FlashInfer split-KV kernels
        # run at HBM speed; Hong et al. 2024, arXiv:2311.01282) or by their math on long
        # contexts with many query heads per KV head (MLA: 128 heads share one latent).
        decode_rate = (
            dev.peak(dev.half_precision) * 1e12 * self.profile.attention(dev.id, dev.generation)
        )
        ctx_w = np.minimum(ctx, window) if window else ctx
        # A verification of ``queries`` positions per request reads the request's KV once and
        # scores it for each position (FlashMLA's generation kernel with seqlen_q = k + 1 on
        # Hopper, TensorRT-LLM tech blog 2 "Attention for MTP").
        per_ctx_flops = per_ctx_flops * queries
        decode = full * n_d * ctx * np.maximum(per_ctx_bytes / hbm, per_ctx_flops / decode_rate)
        decode = decode + m.sliding_window_layers * n_d * ctx_w * np.maximum(
            per_ctx_bytes / hbm, per_ctx_flops / decode_rate
        )
        p_tok = np.asarray(prefill_tokens, dtype=float)
        p_ctx = np.asarray(prefill_context, dtype=float)
        rate = (
            dev.peak(dev.half_precision)
            * 1e12
            * self.profile.attention_at(dev.id, dev.generation, np.maximum(p_ctx * 2.0, 1.0))
        )
        pairs_full = p_tok * p_ctx
        pairs_win = p_tok * (np.minimum(p_ctx, window) if window else p_ctx)
        prefill_flops = (
            2.0 * heads * prefill_dim * (full * pairs_full + m.sliding_window_layers * pairs_win)
        )
        prefill = prefill_flops / rate
        launch = self.profile.const("kernel_launch_us") * 1e-6
        attn_layers = full + m.sliding_window_layers
        # Linear-attention (Gated DeltaNet) layers: a fixed state per sequence, read and written
        # once per token (Yang et al. 2024, arXiv:2412.06464): heads x d_k x d_v fp32 values.
        linear = 0.0
        if m.linear_attention_layers:
            if m.has_gated_deltanet:
                # value heads x d_k x d_v per sequence (Qwen3.5: 64 x 128 x 128), TP-split.
                value_heads = max(m.linear_num_value_heads / par.attention_tp, 1.0)
                state = value_heads * m.linear_key_head_dim * m.linear_value_head_dim * 4.0
            else:
                state = heads * m.head_dim * m.head_dim * 4.0
            linear = m.linear_attention_layers * (
                2.0 * state * (n_d + np.minimum(p_tok, 1.0)) / hbm
            )
        return decode + prefill + linear + attn_layers * launch * 2

    def dense_linear_time(
        self, t: np.ndarray, rows: np.ndarray, n: float, k: float, precision: str
    ) -> np.ndarray:
        """``t`` (a dense linear layer's GEMM time, :meth:`gemm_s`) held to the engine's own
        block-FP8 kernel rate (``dense_fp8_rate``), for a layer stored in block FP8 and run in
        FP8. FlashInfer's TRT-LLM groupwise GEMM (``gemm_fp8_nt_groupwise(backend="trtllm")``,
        which SGLang 0.5.9's ``flashinfer_gemm_w8a8_block_fp8_linear_with_fallback`` calls)
        runs in a time linear in the rows from about 64 of them: on GB200, N = 24,576 and
        K = 7,168, 125 / 224 / 826 / 1,633 us at M = 128 / 256 / 1,024 / 2,048, where DeepGEMM
        takes 69 / 71 / 146 / 260 us (sgl-project/sglang PR #13528, kaixih, 2025-11-18;
        flashinfer-ai/flashinfer #2146: the block-FP8 GEMM slower than FP16 on B200 in most
        shapes). Below 64 rows it is faster than DeepGEMM (47 us at M <= 32), where the curve's
        memory-bound time already binds. SGLang sends K < 256 to Triton instead (the same
        function): left to the curve."""
        if not math.isfinite(self.dense_fp8_rate) or precision != "fp8" or k < 256:
            return t
        if self.fmt.name != "fp8_block":
            return t
        return np.maximum(t, 2.0 * rows * n * k / self.dense_fp8_rate)

    def moe_all_to_all(self) -> bool:
        """Whether the MoE layers under attention DP run an all-to-all of top-k copies: always
        unless the engine gathers and scatters (``moe_gather_scatter``); then only where the
        engine switches to an all-to-all on multi-node NVLink (``moe_all_to_all_on_mnnvl``)
        and the NVLink domain spans more than one 8-GPU node (GB200/GB300 NVL72): TensorRT-LLM's
        ``CutlassFusedMoE.select_alltoall_method_type`` returns ``NotEnabled`` unless
        ``MnnvlMemory.supports_mnnvl()`` (fabric memory handles of a multi-node NVLink rack)."""
        if not self.moe_gather_scatter:
            return True
        return self.moe_all_to_all_on_mnnvl and self.cluster.device.nvlink_domain_gpus > 8

    def _communication(
        self, tokens: np.ndarray, moe_layers: int, prefill_tokens: np.ndarray | float = 0.0
    ) -> np.ndarray:
        """Per-iteration collectives summed over all layers (before dividing by stages);
        ``prefill_tokens`` tells which iterations carry prompts
        (``moe_prefill_gather_all_reduce``)."""
        m, par, c = self.model, self.par, self.cluster
        levels = LevelBandwidth.of(c, self.profile)
        per_node = min(par.tp, c.gpus_per_node)
        h = float(m.hidden_size)
        out = np.zeros_like(tokens)
        t_a = par.attention_tp
        if t_a > 1:
            # Two all-reduces per layer after the row-parallel projections (Megatron-LM,
            # arXiv:1909.08053 Sec. 3); with attention DP the MoE layers reduce over EP instead.
            ar = collective_time_s(
                "all_reduce", tokens * h * SIXTEEN_BIT, t_a, min(t_a, per_node), levels
            )
            dense_ar = m.num_layers - moe_layers if par.attention_dp > 1 else m.num_layers
            out = out + (m.num_layers + dense_ar) * ar
        if moe_layers and par.attention_dp > 1 and not self.moe_all_to_all():
            # All-gather of every attention-DP rank's 16-bit hidden states before the experts,
            # reduce-scatter of the 16-bit output after, over the DP group (TensorRT-LLM's
            # CUTLASS MoE without multi-node NVLink: ``fused_moe_cutlass.py`` forward_chunk /
            # reducescatter_or_allreduce at 000a01de; vLLM 0.12's default
            # ``allgather_reducescatter``: ``AgRsAll2AllManager.dispatch`` all_gatherv and
            # ``combine`` reduce_scatterv over the DP group; SGLang 0.5.8 DP attention with
            # ``moe_a2a_backend`` none in a CUDA-graph batch: ``_dp_gather_via_all_gather`` and
            # ``dp_reduce_scatter_tensor``, padded to the fullest rank). Sized by the whole group's buffer
            # (nccl-tests convention); a DP group's ranks sit ``attention_tp`` GPUs apart.
            r = par.attention_dp
            near = min(r, max(c.gpus_per_node // t_a, 1))
            buffer = tokens * r * h * SIXTEEN_BIT
            gather = collective_time_s("all_gather", buffer, r, near, levels)
            scatter = collective_time_s("reduce_scatter", buffer, r, near, levels)
            padded = gather + scatter
            if t_a > 1:
                # The experts are split over the attention-TP ranks too: their partial outputs
                # are all-reduced there after the scatter (vLLM ``FusedMoE.forward_impl``,
                # ``maybe_all_reduce_tensor_model_parallel``).
                padded = padded + ar
            if self.moe_prefill_gather_all_reduce:
                # SGLang's extend batches: every rank writes its rows into a zeroed buffer of
                # the group's summed tokens and all-reduces it over the TP group, and the MoE
                # all-reduces its output there before each rank copies its rows back
                # (dp_attention.py get_dp_padding_mode SUM_LEN, _dp_gather_via_all_reduce;
                # DeepseekV2MoE.forward_normal tensor_model_parallel_all_reduce; 0.5.3-0.5.10).
                summed = 2.0 * collective_time_s("all_reduce", buffer, par.tp, per_node, levels)
                if t_a > 1:
                    # The attention-TP ranks write their partial sums into that buffer
                    # (communicator.py dp_gather_partial): the MoE layers' attention all-reduce
                    # counted above is inside the gather.
                    summed = summed - ar
                padded = np.where(np.asarray(prefill_tokens) > 0.0, summed, padded)
            out = out + moe_layers * padded
        elif moe_layers and par.attention_dp > 1:
            # Expert parallelism with DP attention: dispatch in FP8 and combine in BF16 all-to-all
            # of each token's top-k copies (DeepEP, DeepSeek-V3 arXiv:2412.19437 Sec. 3.4).
            bytes_out = tokens * m.experts_per_token * h
            a2a = collective_time_s(
                "all_to_all", bytes_out * (1.0 + SIXTEEN_BIT), par.tp, per_node, levels
            )
            out = out + moe_layers * a2a
        elif moe_layers and par.attention_dp == 1 and t_a == 1 and par.tp > 1:
            ar = collective_time_s("all_reduce", tokens * h * SIXTEEN_BIT, par.tp, per_node, levels)
            out = out + moe_layers * ar
        return out
