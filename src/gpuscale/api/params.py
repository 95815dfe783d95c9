"""The keyword arguments of the API functions, each described once: its type, default,
accepted values and meaning (the vocabulary of a job: cluster, plan, training, serving,
measurements, a shared cluster over time).

The CLI builds its flags from these (``gpus_per_node`` is ``--gpus-per-node``; a flag that is on
by default is spelled ``--no-...``), a form on a web page can build its fields from them, and
``tests/unit/test_params.py`` checks every default against the signatures of the functions that
take the argument, and every command's flag defaults against the function it calls, so the flag,
the field and the keyword argument cannot drift apart. Where one function's default differs,
its command says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuscale import catalog
from gpuscale.api.training import DEFAULT_LORA_RANK
from gpuscale.cluster.choices import DEFAULT_MODEL, EVENTS, ORDERS, POLICIES, SYNTHETIC
from gpuscale.costmodel.profile import profile_names, training_profile_names
from gpuscale.measure.bench_setup import CPU_SIZES, GPU_SIZES
from gpuscale.planner.serving.disagg_closed_loop import ROUTINGS
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import (
    DEFAULT_RECOMPUTE_MODULES_FLAG,
    FINETUNES,
    KV_DTYPES,
    LORA_TARGETS,
    LOSSES,
    OFFLOADS,
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTE_MODULES,
    WEIGHT_DTYPES,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    """One keyword argument: ``type`` is int, float, str or bool; ``choices`` the accepted
    strings; ``low``/``high`` the accepted range of an integer (inclusive); ``file`` marks the
    path of a file to read."""

    help: str
    type: type = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    low: int | None = None
    high: int | None = None
    file: bool = False


_NICS = "one per GPU, rail-optimized, on RDMA fabrics; one per node on TCP Ethernet"


def _worker(stage: str, what: str) -> dict[str, Param]:
    """A disaggregated serving pool's arguments (``prefill_*``, ``decode_*``)."""
    return {
        f"{stage}_workers": Param(type=int, help=f"Disaggregated: {stage} workers."),
        f"{stage}_tp": Param(
            type=int, default=1, help=f"Tensor-parallel degree of a {stage} worker."
        ),
        f"{stage}_ep": Param(
            type=int, default=1, help=f"Expert-parallel degree of a {stage} worker."
        ),
        f"{stage}_attention_dp": Param(
            type=int, default=1, help=f"Attention data-parallel ranks of a {stage} worker."
        ),
        f"{stage}_batch": Param(
            type=int,
            help=f"Most {what} one attention rank of a {stage} worker batches (the worker "
            f"holds {'--' + stage + '-attention-dp'} times as many).",
        ),
    }


PARAMS: dict[str, Param] = {
    # the cluster
    "gpu": Param(help="Catalog GPU id (gpuscale catalog gpus)."),
    "gpus": Param(type=int, help="GPUs in the job [default: tp*pp*dp*cp]."),
    "gpus_per_node": Param(
        type=int,
        help="GPUs in one NVLink/PCIe node [default: the GPU's NVLink domain, 8; 72 on "
        "GB200/GB300 NVL72; 4 on H200 NVL].",
    ),
    "inter": Param(
        default=catalog.DEFAULT_INTER, help="Fabric between nodes (gpuscale catalog links)."
    ),
    "nics_per_node": Param(type=int, help=f"Network ports per node [default: {_NICS}]."),
    "slowest_gpu": Param(
        help="Mixed cluster: the slowest card in the job, which sets the pace of every step."
    ),
    # the parallel plan
    "tp": Param(type=int, default=1, help="Tensor-parallel degree."),
    "pp": Param(type=int, default=1, help="Pipeline stages."),
    "dp": Param(type=int, help="Data-parallel degree [default: gpus/(tp*pp*cp)]."),
    "cp": Param(type=int, default=1, help="Context-parallel degree."),
    "vp": Param(type=int, default=1, help="Virtual stages per GPU (interleaving)."),
    "ep": Param(type=int, default=1, help="Expert-parallel degree (MoE)."),
    "etp": Param(
        type=int,
        help="Expert tensor-parallel degree: ways each expert is split; below --tp the experts "
        "fold over the tensor-parallel ranks (MoE; Megatron --expert-tensor-parallel-size) "
        "[default: --tp].",
    ),
    "first_stage_layers": Param(
        type=int,
        default=0,
        low=0,
        help="Layers on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers; "
        "0: even or automatic split).",
    ),
    "last_stage_layers": Param(
        type=int,
        default=0,
        low=0,
        help="Layers on the last pipeline rank (--decoder-last-pipeline-num-layers).",
    ),
    "embedding_as_layer": Param(
        type=bool,
        default=False,
        help="Count the embedding as a layer of the first stage "
        "(--account-for-embedding-in-pipeline-split).",
    ),
    "loss_as_layer": Param(
        type=bool,
        default=False,
        help="Count the output layer and loss as a layer of the last stage "
        "(--account-for-loss-in-pipeline-split).",
    ),
    # the job
    "mbs": Param(type=int, default=1, help="Micro-batch, sequences."),
    "gbs": Param(
        type=int, help="Global batch, sequences [default: the model size's recipe batch; printed]."
    ),
    "seq": Param(type=int, default=4096, help="Sequence length."),
    "recompute": Param(default="none", choices=RECOMPUTE_CHOICES, help="Activation recomputation."),
    "recompute_modules": Param(
        default=DEFAULT_RECOMPUTE_MODULES_FLAG,
        help="With --recompute selective: a comma list of "
        f"{', '.join(RECOMPUTE_MODULES)} (Megatron-Core --recompute-modules), or none.",
    ),
    "zero": Param(
        type=int,
        default=0,
        low=0,
        high=3,
        help="ZeRO stage over the data-parallel group (3 = FSDP).",
    ),
    "precision": Param(
        default="bf16", choices=PRECISIONS, help="Matmul precision (fp8: linear layers only)."
    ),
    "finetune": Param(
        default="full",
        choices=FINETUNES,
        help="Train every weight, or adapters on a frozen 16-bit (lora) or 4-bit (qlora) base.",
    ),
    # None unless given: the rank belongs to an adapter fine-tune, so a default must not make a
    # full fine-tune look like LoRA (a rank without finetune lora/qlora is refused)
    "lora_rank": Param(
        type=int, help=f"Adapter rank of --finetune lora/qlora [default: {DEFAULT_LORA_RANK}]."
    ),
    "offload_optimizer": Param(
        type=bool, default=False, help="ZeRO-Offload: optimizer step on the CPU."
    ),
    "sequence_parallel": Param(type=bool, default=True, help="TP all-reduces instead of RS/AG."),
    "flash_attention": Param(
        type=bool, default=True, help="Unfused attention (s x s scores in HBM)."
    ),
    "compile": Param(
        type=bool,
        default=False,
        help="torch.compile: Inductor fuses the memory-bound ops between matmuls (and float8 "
        "amax reductions).",
    ),
    "storage_gbps": Param(
        type=float,
        default=0.0,
        help="Dataset read bandwidth per node, GB/s (0: data local and prefetched).",
    ),
    "checkpoint_every": Param(type=int, default=0, help="Checkpoint every N steps (0: never)."),
    "checkpoint_gbps": Param(
        type=float, default=10.0, help="Aggregate checkpoint write bandwidth, GB/s."
    ),
    # what training holds in memory besides the plan (fit)
    "grad_accum": Param(type=int, default=1, help="Micro-batches per optimizer step."),
    "pure_bf16": Param(
        type=bool,
        default=False,
        help="No fp32 master weights: weights, grads and optimizer states in 16 bits.",
    ),
    "optimizer": Param(
        default="adamw", choices=OPTIMIZERS, help="Optimizer (its states per weight)."
    ),
    "lora_targets": Param(
        default="all",
        help=f"Comma list of {', '.join(LORA_TARGETS)}, or 'all' (linear layers): where the "
        "adapters go.",
    ),
    "double_quant": Param(type=bool, default=True, help="fp32 quantization constants."),
    "paged_optimizer": Param(
        type=bool, default=False, help="bitsandbytes paged optimizer (states may spill to host)."
    ),
    "offload": Param(
        default="none",
        choices=OFFLOADS,
        help="CPU offload of optimizer states (ZeRO-Offload) or also parameters.",
    ),
    "optimizer_in_backward": Param(
        type=bool,
        default=False,
        help="Step each parameter during backward; no full gradient buffer.",
    ),
    "activation_offload": Param(type=bool, default=False, help="Offload saved activations."),
    "activation_offload_layers": Param(
        type=int,
        default=0,
        help="Offload the saved activations of the first N layers to host memory and keep the "
        "rest (Megatron --cpu-offloading-num-layers, Transformer Engine's CPU offload); needs "
        "--pp 1 and no recompute.",
    ),
    "ep_overlap": Param(
        type=bool,
        default=False,
        help="Overlap the expert-parallel all-to-alls of one micro-batch with another's "
        "compute (Megatron --overlap-moe-expert-parallel-comm --delay-wgrad-compute); needs "
        "--ep 2 or more, --vp with --pp, no full recompute.",
    ),
    "loss": Param(
        default="standard",
        choices=LOSSES,
        help="Cross-entropy: fp32 logits (standard), 16-bit logits upcast per chunk (chunked: "
        "torchtune, LitGPT), fused with the head (fused: Liger), one compiled kernel (compiled: "
        "torchtitan), or Transformer Engine's kernel with the gradient written over the 16-bit "
        "logits (te: Megatron --cross-entropy-fusion-impl te).",
    ),
    "dropout": Param(type=bool, default=False, help="Dropout active (1-byte masks)."),
    "grad_reduce_in_bf16": Param(
        type=bool,
        default=False,
        help="Gradient buffer and data-parallel reduction in bf16 (Megatron "
        "--grad-reduce-in-bf16) instead of the framework's word.",
    ),
    # what serving holds in memory (fit --mode infer)
    "context": Param(type=int, help="Tokens per sequence in the KV cache (default: as --seq)."),
    "weights": Param(default="bf16", choices=WEIGHT_DTYPES, help="Weight storage."),
    "kv_dtype": Param(default="bf16", choices=KV_DTYPES, help="KV-cache storage."),
    # training to completion (plan, scale)
    "tokens": Param(help="Tokens to train, e.g. 15T [default: 20 per parameter, Chinchilla]."),
    "price": Param(type=float, help="USD per GPU-hour; without it cost is in GPU-hours."),
    # the software stack
    "framework": Param(
        default="generic",
        help=f"Training-stack profile: {', '.join(training_profile_names())}.",
    ),
    "profile": Param(
        file=True,
        help="Calibration profile YAML (from gpuscale calibrate) laid over the --framework "
        "profile: its keys win, the rest comes from the framework.",
    ),
    # serving under load (infer)
    "batch": Param(type=int, default=1, help="Concurrent sequences."),
    "concurrency": Param(type=int, help="Closed loop: requests kept in flight."),
    "request_rate": Param(type=float, help="Open loop: Poisson arrivals, requests/s."),
    "num_requests": Param(
        type=int,
        help="Requests the benchmark measures after its warm-up (closed loop: the first C are a "
        "burst on a drained engine). Default: 20 x concurrency for a closed loop with fixed "
        "lengths (AIConfigurator's aiperf command), else 1000.",
    ),
    "prefix_hit": Param(
        type=float, default=0.0, help="Share of each prompt served from the prefix cache."
    ),
    "input_cv": Param(
        type=float,
        default=0.0,
        help="Spread of prompt lengths (lognormal coefficient of variation; 0 = fixed).",
    ),
    "output_cv": Param(
        type=float,
        default=0.0,
        help="Spread of output lengths (lognormal coefficient of variation; 0 = fixed).",
    ),
    "attention_dp": Param(
        type=int, default=1, help="Attention data-parallel ranks inside --tp (MoE)."
    ),
    "replicas": Param(type=int, default=1, help="Engine instances behind a load balancer."),
    **_worker("prefill", "prompts"),
    **_worker("decode", "requests"),
    "decode_routing": Param(
        choices=ROUTINGS,
        default="least-loaded",
        help="Disaggregated: how the router picks a decode worker: one with a free slot, "
        "in turn (Dynamo's default frontend), or at random (several frontends).",
    ),
    # a shared cluster over time (cluster_simulate, cluster_trace, cluster_adapt)
    "seed": Param(type=int, default=0, help="Seed of the random draws (same seed, same answer)."),
    "policy": Param(
        default="all",
        choices=(*POLICIES, "all"),
        help="Placement policy; all runs each on the same trace.",
    ),
    "order": Param(default="fifo", choices=ORDERS, help="Queue order."),
    "default_model": Param(
        default=DEFAULT_MODEL, help="Catalog model for trace rows that name none."
    ),
    "node_mtbf_h": Param(type=float, help="Mean hours between failures of one node."),
    "repair_h": Param(type=float, default=4.0, help="Hours to repair a failed node."),
    "checkpoint_min": Param(
        type=float, default=60.0, help="Minutes between checkpoints (work lost on a failure)."
    ),
    "max_restarts": Param(type=int, default=10, help="Restarts before a failing job is given up."),
    "adaptive": Param(
        type=bool,
        default=False,
        help="Jobs re-plan when a degradation hits their link (paying a restart each way).",
    ),
    "synthetic": Param(
        default="philly", choices=SYNTHETIC, help="Published cluster the synthetic trace mimics."
    ),
    "jobs": Param(type=int, help="Jobs in the trace."),
    "load_gpus": Param(
        type=float,
        help="Scale arrivals to this many busy GPUs on average (Philly itself: ~374).",
    ),
    "event": Param(choices=EVENTS, help="What happens to the job."),
    "factor": Param(type=float, default=0.25, help="Bandwidth left on the link (inter/intra)."),
    "at_h": Param(type=float, default=1.0, help="Hours into the run."),
    "horizon_h": Param(type=float, default=24.0, help="Hours the comparison covers."),
    "restart_s": Param(type=float, default=300.0, help="Relaunch time (plus checkpoint read)."),
    # DDP communication hooks (advise_comm)
    "topk_ratio": Param(type=float, default=0.01, help="Fraction of gradient entries top-k sends."),
    "qsgd_levels": Param(type=int, default=127, help="QSGD quantization levels."),
    "qsgd_chunk": Param(type=int, default=512, help="QSGD chunk size (entries sharing one norm)."),
    # a fitted profile (calibrate, import_nccl_tests)
    "name": Param(default="measured", help="Name of the profile."),
    "base": Param(
        default="generic",
        help=f"Profile the measurement overrides ({', '.join(profile_names())} or a YAML path).",
    ),
    # the SLO search over deployments (serving_search.search)
    "slo_ttft_ms": Param(type=float, help="Search: TTFT target (p99)."),
    "slo_tpot_ms": Param(type=float, help="Search: TPOT target (p99)."),
    # one measured training run (calibrate_run)
    "measured_tokens_per_s": Param(
        type=float, help="Measured throughput of the whole job, all GPUs together, tokens/s."
    ),
    "measured_step_s": Param(
        type=float,
        help="Measured seconds per optimizer step (instead of --measured-tokens-per-s).",
    ),
    "measured_memory_gib": Param(
        type=float,
        help="Measured peak memory the busiest GPU held, GiB, as estimate's memory_per_gpu_gib "
        "counts it (nvidia-smi; allocator reserve plus CUDA context): fits the allocator reserve.",
    ),
    # the benchmarks (bench_collectives, bench_matmul, and calibrate, which runs them)
    "nproc": Param(
        type=int,
        help="Ranks to start here [default: every GPU, or 2 on CPU]. Ignored under torchrun.",
    ),
    "sizes": Param(
        help="Collective sizes: MIN:MAX bytes (K/M/G suffixes) or a comma list [default: "
        f"{GPU_SIZES} on GPUs, {CPU_SIZES} on CPU]."
    ),
    "iters": Param(type=int, default=20, help="Timed iterations per size."),
    "warmup": Param(type=int, default=5, help="Untimed iterations per size."),
    "backend": Param(
        default="auto", choices=("auto", "gloo", "nccl"), help="auto: nccl on GPUs, else gloo."
    ),
    "group_by_node": Param(
        type=bool,
        default=False,
        help="Measure inside each node (intra) and across nodes (inter) separately.",
    ),
    "ranks_per_node": Param(
        type=int,
        help="Treat every K consecutive ranks as one node (try --group-by-node on one host).",
    ),
    "timeout": Param(
        type=float,
        default=120.0,
        help="Seconds a rank may wait on a collective; the run stops after this long without progress.",
    ),
    "shapes": Param(
        help="GEMM shapes: comma list of N (square) or MxNxK [default: a sweep for the device]."
    ),
}
