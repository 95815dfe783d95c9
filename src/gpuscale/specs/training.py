"""What is being run: sequence length, precision, optimizer and fine-tuning method (training), or
weight/KV dtypes and batch shape (inference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscale.errors import require

TrainPrecision = Literal["fp32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4")
LOW_PRECISIONS: tuple[str, ...] = ("fp8", "mxfp8", "nvfp4")

SAVED_INPUT_BYTES: dict[str, float] = {"fp8": 1.0, "mxfp8": 1.0 + 1.0 / 32, "nvfp4": 0.5 + 1.0 / 16}
"""Bytes per element of a tensor kept in a low-precision training format: FP8 one byte (its
per-tensor scale is one number); MXFP8 one byte plus an 8-bit E8M0 scale per 32 elements (OCP
Microscaling Formats v1.0, Sec. 5); NVFP4 four bits plus an FP8 E4M3 scale per 16 elements
(NVIDIA, "Pretraining LLMs with NVFP4", arXiv:2509.25149, Sec. 2)."""
"""Block- or tensor-scaled formats that speed up the linear layers only (Transformer Engine:
FP8 on Hopper/Ada; MXFP8 and NVFP4 with per-block scales on Blackwell)."""

Optimizer = Literal["adamw", "adafactor", "sgd-momentum", "adamw-8bit"]
OPTIMIZERS: tuple[str, ...] = ("adamw", "adafactor", "sgd-momentum", "adamw-8bit")

Finetune = Literal["full", "lora", "qlora"]
FINETUNES: tuple[str, ...] = ("full", "lora", "qlora")

LoraTarget = Literal["q", "k", "v", "o", "gate", "up", "down", "head"]
LORA_TARGETS: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down", "head")
"""Linear layers LoRA can adapt: attention q/k/v/output, MLP gate/up/down (``gate`` exists only
in gated MLPs; a plain MLP has ``up`` = fc1 and ``down`` = fc2) and the output ``head``."""
ALL_LINEAR: tuple[LoraTarget, ...] = ("q", "k", "v", "o", "gate", "up", "down")

Loss = Literal["standard", "chunked", "fused", "compiled", "te"]
LOSSES: tuple[str, ...] = ("standard", "chunked", "fused", "compiled", "te")

OFFLOADS: tuple[str, ...] = ("none", "optimizer", "params")
"""What lives in host memory: nothing, the optimizer state (``offload_optimizer``), or the
optimizer state and the parameters (``offload_params``)."""

SelectivePolicy = Literal["attention", "op", "layer"]
SELECTIVE_POLICIES: tuple[str, ...] = ("attention", "op", "layer")

RECOMPUTE_MODULES: tuple[str, ...] = (
    "core_attn",
    "mla_up_proj",
    "layernorm",
    "mlp",
    "moe",
    "moe_act",
)
"""Megatron-Core's selective recompute units (``TransformerConfig.recompute_modules``): the
attention core, MLA's up-projections and RoPE, the separate norms, the dense MLP, the whole MoE
layer, and the experts' activation function."""

DEFAULT_RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn",)
"""Megatron-Core's ``recompute_modules`` default (``TransformerConfig.__post_init__``): what
selective recompute meant before modules could be named."""

DEFAULT_RECOMPUTE_MODULES_FLAG = ",".join(DEFAULT_RECOMPUTE_MODULES)
"""The same as ``--recompute-modules`` spells it."""

Task = Literal["lm", "classify"]
TASKS: tuple[str, ...] = ("lm", "classify")

WeightDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
WEIGHT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
KvDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
KV_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8")


def _choice(value: object, choices: tuple[str, ...], flag: str) -> None:
    require(value in choices, f"{flag} must be one of {', '.join(choices)}, got '{value}'")


def _positive_int(value: object, flag: str) -> None:
    require(
        isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        f"{flag} must be a positive integer, got {value!r}",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Training:
    """The training job apart from its parallel plan."""

    seq_len: int = 4096
    """Tokens per sequence."""
    precision: TrainPrecision = "bf16"
    """Compute precision of the matmuls: ``fp8`` speeds up the linear layers only (attention and
    the rest stay in BF16, as in Transformer Engine recipes). Weights, gradients and activations
    are held in 16 bits unless this is ``fp32``."""
    flash_attention: bool = True
    """Fused attention that never materialises the ``s x s`` score matrix."""
    optimizer: Optimizer = "adamw"
    """``adamw``: two moments per parameter (Loshchilov & Hutter 2019); ``adafactor``: factored
    second moment, no first moment (Shazeer & Stern 2018); ``sgd-momentum``: one buffer;
    ``adamw-8bit``: both moments block-wise quantized to 8 bits (Dettmers et al. 2022)."""
    master_weights: bool = True
    """Keep an fp32 master copy of the trainable weights and hold optimizer states in fp32 under
    16-bit precision (mixed precision, Micikevicius et al. 2018). False = pure 16-bit training:
    weights, gradients and optimizer states all in the compute dtype (torchtune, LitGPT
    ``bf16-true``). Ignored for ``fp32``."""
    finetune: Finetune = "full"
    """``full``: every weight trains; ``lora``: frozen 16-bit base plus low-rank adapters (Hu et
    al. 2021); ``qlora``: frozen 4-bit NF4 base plus adapters (Dettmers et al. 2023)."""
    lora_rank: int = 16
    """Rank ``r`` of every adapter (``A: d_in x r``, ``B: r x d_out``)."""
    lora_targets: tuple[LoraTarget, ...] = ALL_LINEAR
    """Which linear layers carry adapters (see :data:`LORA_TARGETS`)."""
    lora_dropout: float = 0.0
    """Dropout probability on each adapter's input (PEFT ``lora_dropout``). Above zero every
    adapted linear keeps its own dropped-out copy of its input and a 1-byte mask for backward,
    instead of sharing the layer input."""
    double_quant: bool = True
    """QLoRA double quantization: the per-block fp32 absmax constants are themselves quantized
    to 8 bits (QLoRA Sec. 3: 0.5 -> 0.127 bits per parameter)."""
    paged_optimizer: bool = False
    """Optimizer states live in CUDA unified memory outside the PyTorch allocator
    (bitsandbytes paged optimizers) and are evicted to host under pressure: they do not have to
    fit on the device."""
    offload_optimizer: bool = False
    """ZeRO-Offload (Ren et al. 2021): optimizer states, master weights and gradients live in
    host memory and the optimizer step runs on the CPU."""
    offload_params: bool = False
    """Parameters live in host memory too (ZeRO-Infinity, FSDP ``CPUOffload(offload_params=True)``);
    the device holds only the units being computed. Implies ``offload_optimizer``."""
    optimizer_in_backward: bool = False
    """Apply the optimizer step per parameter as soon as its gradient is ready, so that no full
    set of gradients ever exists (torchtune ``optimizer_in_bwd``; LOMO, Lv et al. 2023)."""
    activation_offload: bool = False
    """Move saved activations to host memory after each layer's forward and bring them back for
    its backward (torchtune ``enable_activation_offloading``): the device keeps about two
    layers' worth in flight."""
    activation_offload_layers: int = 0
    """Offload the saved activations of this many layers of the stage to host memory, the first
    ones, and keep the others on the device (Megatron-Core ``--cpu-offloading-num-layers``,
    through Transformer Engine's ``cpu_offload``: layer ``i`` is copied out during the forward
    of later layers and back before its backward, so the saved activations peak at ``(layers -
    offloaded) x`` one layer's, ``OffloadSynchronizer._default_offload_sync_init``). 0: none."""
    ep_overlap: bool = False
    """Overlap the expert-parallel all-to-alls of one micro-batch with the computation of
    another (Megatron-Core ``--overlap-moe-expert-parallel-comm`` with
    ``--delay-wgrad-compute``: the combined 1F1B schedule runs one micro-batch's forward beside
    another's backward, layer by layer on a compute and a communication stream)."""
    loss: Loss = "standard"
    """How the cross-entropy holds the ``s x vocab`` logits. ``standard``: upcast to fp32 and kept
    as fp32 log-probabilities (PyTorch ``cross_entropy``, Megatron); ``chunked``: the 16-bit
    logits are kept whole and upcast one chunk at a time (torchtune ``CEWithChunkedOutputLoss``,
    LitGPT ``chunked_cross_entropy``); ``fused``: fused with the output projection, no logits
    are kept (Liger ``FusedLinearCrossEntropy``, Cut Cross-Entropy); ``compiled``: the
    cross-entropy under ``torch.compile`` (torchtitan 2025 ``build_cross_entropy_loss``), one
    fused kernel that keeps the 16-bit logits and writes their 16-bit gradient, no fp32 copy;
    ``te``: Transformer Engine's parallel cross-entropy (Megatron-Core
    ``--cross-entropy-loss-fusion --cross-entropy-fusion-impl te``, Megatron-Bridge's performance
    recipes): keeps the 16-bit logits and overwrites them with their gradient in backward
    (``transformer_engine/pytorch/triton/cross_entropy.py``), no fp32 copy and no transient."""
    dropout: bool = False
    """Hidden and attention dropout are active (Megatron GPT pretraining, BERT); each dropout
    keeps a 1-byte mask for backward. Current LLM fine-tuning recipes train without dropout."""
    task: Task = "lm"
    """``lm``: a vocabulary-wide loss at every position (causal or masked LM); ``classify``: one
    small label head per sequence (no ``s x vocab`` logits)."""
    # --- How the framework allocates (costmodel/memory.py, costmodel/activations.py) ---
    fused_elementwise: bool = True
    """Norms and the gated activation run as fused kernels (Megatron/TE, Liger,
    ``torch.compile``) that keep only their inputs. False = eager PyTorch modules (Hugging Face,
    torchtune and torchtitan without compile), which also keep the fp32 upcast of each RMSNorm
    input (and its normalized output when the norm trains) and the SiLU output."""
    selective_policy: SelectivePolicy = "attention"
    """What ``--recompute selective`` keeps. ``attention``: everything but the attention core
    (Korthikanti et al. 2022, Sec. 5; Megatron); ``op``: torchtitan per-op SAC, the layer input,
    every other matmul output and the attention outputs; ``layer``: torchtitan per-layer SAC,
    every ``selective_every``-th layer fully recomputed and the others not at all."""
    selective_every: int = 2
    """Period of per-layer SAC (torchtitan ``selective_ac_option = "2"``)."""
    low_precision_saved_inputs: bool = False
    """Under an fp8/mxfp8/nvfp4 recipe each linear layer keeps, for its weight gradient, the
    low-precision cast of its input rather than the 16-bit input (Transformer Engine
    ``module/linear.py``: ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``
    then ``saved_inputmat = inputmat``; the ``megatron`` profile's
    ``low_precision_saved_inputs``): :data:`SAVED_INPUT_BYTES` per element instead of 2."""
    grad_reduce_in_bf16: bool = False
    """The gradient buffer and its data-parallel reduction are bf16 instead of the framework's
    word (Megatron ``--grad-reduce-in-bf16``, Megatron-Core DDP ``grad_reduce_in_fp32=False``,
    which Megatron-Bridge's performance recipes set): 2 bytes per gradient, stored and sent."""
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    """What ``--recompute selective`` re-runs under the ``attention`` policy: Megatron-Core's
    ``--recompute-modules`` (:data:`RECOMPUTE_MODULES`; costmodel/activations.py
    ``module_savings`` says what each frees, costmodel/compute.py what each costs)."""
    reshard_after_forward: bool | None = None
    """FSDP/ZeRO-3 frees each unit's gathered weights after its forward. ``None`` = the
    framework default: on, and off under pipeline parallelism (torchtitan
    ``parallelize_llama``), where a stage's gathered weights then stay from forward to backward."""
    sp_saves_gathered_input: bool = False
    """Under tensor + sequence parallelism, each column-parallel linear keeps the all-gathered
    (full-sequence) input autograd saved (DTensor ``SequenceParallel`` -> ``ColwiseParallel``,
    torchtitan); Megatron keeps the sequence shard and gathers again in backward."""
    compile: bool = False
    """The model runs under ``torch.compile`` (TorchInductor): the memory-bound ops between two
    matmuls fuse into one generated kernel each, and float8 amax reductions fuse into the
    kernels that produce their tensors (costmodel/fusion.py). A stack whose kernels are already
    fused (Megatron/Transformer Engine) gains nothing from it."""
    fp8_all_gather: bool = False
    """FSDP gathers the linear weights in float8 (torchao ``enable_fsdp_float8_all_gather``):
    1 byte per gathered weight instead of 2."""
    foreach_optimizer: bool = True
    """The optimizer runs PyTorch's ``foreach`` (multi-tensor) implementation, the default on
    CUDA: its AdamW step allocates one intermediate tensor list as large as the states it
    updates (``_foreach_sqrt`` of the second moments; the torch.optim docs note foreach's
    higher peak memory). False for ``fused=True`` or a per-parameter loop."""
    separate_embedding_units: bool = False
    """FSDP wraps the embedding and the output layer as units of their own (torchtune
    ``custom_sharded_layers``, later torchtitan) and reshards them after use; by default they
    sit in the root unit, which FSDP never reshards after forward."""
    load_16bit_on_device: bool = False
    """Quantized (QLoRA) bases are built in 16 bits on the device and quantized there, so the
    whole 16-bit model is live once before training (LitGPT single-device ``bnb.nf4``: its
    peaks equal the 16-bit model size); otherwise weights stream in one tensor at a time."""
    fp8_weight_cache: bool = False
    """Under ``fp8`` precision, Transformer Engine casts each linear weight to FP8 (and its
    transpose, for the weight-gradient GEMM on Hopper) on a step's first micro-batch and keeps
    both for the rest (``is_first_microbatch``, as Megatron passes it): 2 more bytes per linear
    weight on the GPU, for non-ZeRO-3 plans."""
    cuda_graphs: bool = False
    """Layers are captured as CUDA graphs (Megatron ``--enable-cuda-graph``, TE
    ``make_graphed_callables``): a captured region's intermediates live in the graph's private
    memory pool, which stays reserved between replays, so the layer working set is held at the
    same time as the loss's instead of reusing its memory."""

    def __post_init__(self) -> None:
        _positive_int(self.seq_len, "--seq")
        _choice(self.precision, PRECISIONS, "--precision")
        _choice(self.optimizer, OPTIMIZERS, "--optimizer")
        _choice(self.finetune, FINETUNES, "--finetune")
        _choice(self.task, TASKS, "task")
        _choice(self.loss, LOSSES, "--loss")
        _choice(self.selective_policy, SELECTIVE_POLICIES, "--selective-policy")
        _positive_int(self.selective_every, "--selective-every")
        require(
            isinstance(self.recompute_modules, tuple)
            and len(set(self.recompute_modules)) == len(self.recompute_modules),
            "--recompute-modules must name each module once",
        )
        for module in self.recompute_modules:
            _choice(module, RECOMPUTE_MODULES, "--recompute-modules")
        require(
            not (self.grad_reduce_in_bf16 and self.precision == "fp32"),
            "--grad-reduce-in-bf16 needs 16-bit or lower --precision, got fp32 (its gradients "
            "are fp32); accepted: --precision bf16, fp16, fp8, mxfp8 or nvfp4 with it",
        )
        require(
            isinstance(self.activation_offload_layers, int)
            and not isinstance(self.activation_offload_layers, bool)
            and self.activation_offload_layers >= 0,
            "--activation-offload-layers must be a whole number of layers, 0 or more, got "
            f"{self.activation_offload_layers!r}",
        )
        require(
            isinstance(self.ep_overlap, bool),
            f"--ep-overlap is a switch (true or false), got {self.ep_overlap!r}",
        )
        require(
            not (self.ep_overlap and self.precision == "fp32"),
            "--ep-overlap runs on a 16-bit model (Megatron-Core: 'only supported with bf16 or "
            "fp16 model'), got --precision fp32; accepted: bf16, fp16, fp8, mxfp8 or nvfp4",
        )
        require(
            not (self.activation_offload and self.activation_offload_layers),
            "--activation-offload and --activation-offload-layers are alternatives (every "
            "layer's activations, or those of the first N layers); accepted: one of them",
        )
        _positive_int(self.lora_rank, "--lora-rank")
        require(
            isinstance(self.lora_dropout, (int, float)) and 0.0 <= self.lora_dropout < 1.0,
            f"--lora-dropout must be in [0, 1), got {self.lora_dropout!r}",
        )
        require(
            isinstance(self.lora_targets, tuple) and len(self.lora_targets) > 0,
            "--lora-targets needs at least one of " + ", ".join(LORA_TARGETS),
        )
        for target in self.lora_targets:
            _choice(target, LORA_TARGETS, "each --lora-targets entry")
        require(
            len(set(self.lora_targets)) == len(self.lora_targets),
            "--lora-targets lists a layer twice",
        )
        require(
            not (self.optimizer_in_backward and self.finetune != "full"),
            "--optimizer-in-backward applies to full fine-tuning only (adapters are tiny)",
        )
        require(
            not (self.paged_optimizer and (self.offload_optimizer or self.offload_params)),
            "--paged-optimizer and CPU offload are alternatives; choose one",
        )
        if self.offload_params:
            object.__setattr__(self, "offload_optimizer", True)

    @property
    def is_lora(self) -> bool:
        """Frozen base weights plus trainable adapters (LoRA or QLoRA)."""
        return self.finetune != "full"

    @property
    def selective_modules(self) -> frozenset[str]:
        """What ``--recompute selective`` re-runs by Megatron-Core module: the
        :attr:`recompute_modules` under the ``attention`` policy (torchtitan's ``op`` and
        ``layer`` policies name no modules)."""
        if self.selective_policy != "attention":
            return frozenset()
        return frozenset(self.recompute_modules)

    @property
    def linear_input_bytes(self) -> float:
        """Bytes per element of a linear layer's saved input (:attr:`low_precision_saved_inputs`)."""
        if self.low_precision_saved_inputs and self.precision in SAVED_INPUT_BYTES:
            return SAVED_INPUT_BYTES[self.precision]
        return float(self.activation_bytes)

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element: 4 in fp32 training, else 2 (fp8 recipes keep
        activations in BF16; Transformer Engine stores only its GEMM inputs in fp8)."""
        return 4 if self.precision == "fp32" else 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Inference:
    """A serving workload: how weights and the KV cache are stored and how much is in flight."""

    weight_dtype: WeightDtype = "bf16"
    """Storage of the linear layers' weights; embeddings and norms stay 16-bit (AWQ/GPTQ and
    FP8 serving recipes keep them unquantized)."""
    kv_dtype: KvDtype = "bf16"
    """Storage of the key/value cache."""
    batch: int = 1
    """Concurrent sequences."""
    context_len: int = 4096
    """Tokens per sequence held in the KV cache (prompt plus generated)."""
    max_batched_tokens: int = 8192
    """Tokens one forward pass processes at most during prefill (vLLM
    ``max_num_batched_tokens``; chunked prefill). Sets the activation working set."""

    def __post_init__(self) -> None:
        _choice(self.weight_dtype, WEIGHT_DTYPES, "--weights")
        _choice(self.kv_dtype, KV_DTYPES, "--kv-dtype")
        _positive_int(self.batch, "--batch")
        _positive_int(self.context_len, "--context")
        _positive_int(self.max_batched_tokens, "--max-batched-tokens")
