"""Megatron-LM: the ``pretrain_gpt.py`` argument list of a plan, as a ``torchrun`` launch script.

Flag names follow Megatron-LM's ``megatron/training/arguments.py`` (core_r0.12+); the model
block mirrors what ``TransformerConfig`` is built from, so megatron-core can check it.
"""

from __future__ import annotations

import shlex

from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob
from gpuscale.specs import ModelSpec, Plan, PlanBatch
from gpuscale.specs.training import DEFAULT_RECOMPUTE_MODULES


def _pipeline_split(job: TrainingJob) -> list[str]:
    """How Megatron-LM splits the layers over the pipeline ranks: even when ``pp * vp`` divides
    them; else the first and last ranks take fewer, as the cost model priced it
    (:func:`gpuscale.costmodel.pipeline.stage_layers`). Megatron-Core says so with embedding/loss
    counted as layers (``--account-for-embedding/loss-in-pipeline-split``, what Megatron-Bridge's
    Llama 3.1 405B recipe uses) or explicit ``--decoder-first/last-pipeline-num-layers``, which
    under interleaving must be multiples of vp (``TransformerConfig.__post_init__``)."""
    plan, layers = job.plan, job.model.num_layers
    if plan.pp == 1:
        return []
    chunks = plan.pp * plan.vp
    embedding, loss = plan.embedding_in_split, plan.loss_in_split
    explicit = plan.first_stage_layers > 0 or plan.last_stage_layers > 0
    if not (explicit or embedding or loss) and layers % chunks:
        # The automatic split takes the deficit off the last rank, then the first: the same
        # layers as counting the loss (and the embedding) as one layer each.
        embedding, loss = (
            (layers + 2) % chunks == 0,
            (layers + 1) % chunks == 0 or (layers + 2) % chunks == 0,
        )
        if not (embedding or loss):
            require(
                plan.vp == 1,
                f"Megatron-LM interleaves uneven stages only when --pp x --vp = {chunks} divides "
                f"the {layers} layers plus the embedding and loss; accepted: --vp 1, or a --vp "
                "that does",
                field="vp",
            )
            explicit = True
    args: list[str] = []
    if embedding:
        args.append("--account-for-embedding-in-pipeline-split")
    if loss:
        args.append("--account-for-loss-in-pipeline-split")
    if explicit:
        split = stage_layers(job.model, PlanBatch.from_plans([plan]))
        args += ["--decoder-first-pipeline-num-layers", str(int(split.first[0]))]
        args += ["--decoder-last-pipeline-num-layers", str(int(split.last[0]))]
    if plan.vp > 1:
        if args:  # uneven stages: interleaving is given per rank, not as layers per stage
            args += ["--num-virtual-stages-per-pipeline-rank", str(plan.vp)]
        else:
            args += ["--num-layers-per-virtual-pipeline-stage", str(layers // chunks)]
    return args


def _dense_ffn(model: ModelSpec) -> int:
    """``--ffn-hidden-size``: the dense MLP's width (an MoE model without dense layers uses it
    for its experts)."""
    if model.is_moe and model.dense_layers:
        return model.dense_ffn_hidden_size or model.ffn_hidden_size
    return model.ffn_hidden_size


def _moe_layout(model: ModelSpec) -> list[str]:
    """Megatron-LM's words for an MoE model's dense layers and shared experts (arguments.py):
    ``--moe-ffn-hidden-size`` one expert's width beside ``--ffn-hidden-size`` the dense MLP's,
    ``--moe-layer-freq`` the pattern of MoE (1) and dense (0) layers as a list expression
    (``moe_freq_type``: "[0]*3+[1]*58" for DeepSeek-V3, "[0,1]*24" for Llama 4 Maverick), and
    ``--moe-shared-expert-intermediate-size`` the shared experts' width together."""
    args: list[str] = []
    if model.dense_layers:
        args += ["--moe-ffn-hidden-size", str(model.ffn_hidden_size)]
        step = model.moe_layer_step
        if step > 1:
            period = ",".join(["0"] * (step - 1) + ["1"])
            pattern = f"[{period}]*{model.num_layers // step}"
        else:
            pattern = f"[0]*{model.dense_layers}+[1]*{model.num_layers - model.dense_layers}"
        args += ["--moe-layer-freq", pattern]
    if model.shared_experts:
        shared = model.shared_experts * model.ffn_hidden_size
        args += ["--moe-shared-expert-intermediate-size", str(shared)]
        if model.shared_expert_gate:
            args.append("--moe-shared-expert-gate")
    return args


def _check_expressible(model: ModelSpec, plan: Plan, seq_len: int) -> None:
    """Refuse, in one line, an architecture Megatron-LM's ``pretrain_gpt.py`` would build as a
    different model from its flags: writing it anyway would train something else."""
    name = model.name
    require(
        model.causal,
        f"'{name}' is an encoder (bidirectional attention); Megatron-LM's pretrain_gpt.py trains "
        "decoders, and this export does not write pretrain_bert.py; accepted: a decoder model",
        field="from",
    )
    require(
        model.position != "alibi",
        f"'{name}' uses ALiBi position biases, which Megatron-LM does not implement "
        "(--position-embedding-type takes learned_absolute, rope, yarn, mrope, relative, none)",
        field="from",
    )
    require(
        not model.parallel_block,
        f"'{name}' runs attention and the MLP in parallel on one normed input (GPT-J, GPT-NeoX); "
        "Megatron-Core's transformer layer runs them one after the other",
        field="from",
    )
    if model.linear_attention_layers:
        full = model.num_layers - model.linear_attention_layers
        require(
            plan.cp == 1
            and model.linear_num_key_heads % plan.tp == 0
            and model.linear_num_value_heads % plan.tp == 0,
            f"megatron-core builds Gated DeltaNet layers without context parallelism and with "
            f"--tp dividing their {model.linear_num_key_heads} key and "
            f"{model.linear_num_value_heads} value heads (TransformerConfig, 0.16); got --tp "
            f"{plan.tp} --cp {plan.cp}",
            field="tp" if plan.cp == 1 else "cp",
        )
        require(
            model.has_gated_deltanet and _every_nth(model.num_layers, full) > 0,
            f"'{name}' has {model.linear_attention_layers} linear-attention layers of "
            f"{model.num_layers}; this export writes Gated DeltaNet hybrids with a full-attention "
            "layer every n-th one (--linear-attention-freq n)",
            field="from",
        )
    require(
        model.router_topk_normalized
        or model.router_score == "softmax"
        or model.experts_per_token == 1,
        f"'{name}' keeps its sigmoid router's top-k weights unnormalized; Megatron-Core "
        "renormalizes a sigmoid router's top-k",
        field="from",
    )
    require(
        not model.router_scales_input or model.experts_per_token == 1,
        f"'{name}' scales its experts' inputs by the router's weights, which Megatron-Core "
        "does for top-1 routers only (--moe-apply-probs-on-input)",
        field="from",
    )
    require(
        model.qk_norm != "rmsnorm_full",
        f"'{name}' normalizes its queries and keys over all heads together; Megatron-LM's "
        "--qk-layernorm normalizes each head (Megatron-Bridge's MiniMax-M2 bridge builds a layer "
        "spec of its own for it)",
        field="from",
    )
    require(
        not (model.is_moe and model.linear_bias and plan.etp > 1),
        f"megatron-core builds '{name}''s expert biases only without expert tensor parallelism "
        "(TransformerConfig: 'Bias in Moe is only supported when ETP==1'); plan it with --etp 1",
        field="etp",
    )
    if model.attention_chunk_layers:
        require(
            seq_len <= model.attention_chunk_size,
            f"'{name}' attends within {model.attention_chunk_size}-token chunks on "
            f"{model.attention_chunk_layers} layers, which Megatron-LM cannot express; at "
            f"--seq {seq_len} they differ from full attention; accepted: --seq up to "
            f"{model.attention_chunk_size}",
            field="seq",
        )
        require(
            model.qk_norm != "l2",
            f"'{name}' L2-normalizes queries and keys on its RoPE layers only; Megatron-LM's "
            "--qk-l2-norm applies to every layer",
            field="from",
        )
    if model.sliding_window_layers:
        require(
            # Alternate layers from the first: Megatron-Core windows layer n (1-based) when
            # n % 2 != 0 (utils.is_layer_window_attention), ceil(L / 2) of them.
            model.sliding_window_layers in (model.num_layers, (model.num_layers + 1) // 2),
            f"'{name}' has a sliding window on {model.sliding_window_layers} of "
            f"{model.num_layers} layers; this export places windows on every layer or on "
            "alternate layers (--window-attn-skip-freq 2)",
            field="from",
        )
    nope = model.num_layers - model.attention_chunk_layers if model.attention_chunk_layers else 0
    require(
        nope == 0 or _every_nth(model.num_layers, nope) > 0,
        f"'{name}' has {nope} NoPE layers of {model.num_layers}; this export places them every "
        "n-th layer (--no-rope-freq n), which needs n to divide the layers",
        field="from",
    )
    if model.rotary_dim and model.rotary_dim < model.head_dim:
        require(
            int(model.head_dim * float(_rotary_percent(model))) == model.rotary_dim,
            f"'{name}' has a rotary embedding on {model.rotary_dim} of {model.head_dim} "
            "channels, which Megatron-LM's --rotary-percent (int(head_dim x percent)) cannot "
            "state exactly",
            field="from",
        )


def _every_nth(num_layers: int, special: int) -> int:
    """``n`` for ``special`` layers placed every ``n``-th of ``num_layers`` (Megatron-LM's
    integer layer patterns: --no-rope-freq, --linear-attention-freq); 0 where they are not."""
    if special <= 0 or num_layers % special:
        return 0
    return num_layers // special


def _rotary_percent(model: ModelSpec) -> str:
    """``--rotary-percent``: the shortest decimal that reads back as the rotary share."""
    return repr(model.rotary_dim / model.head_dim)


def _attention(model: ModelSpec, plan: Plan) -> list[str]:
    """The attention block in Megatron-LM's words (arguments.py; TransformerConfig and
    MLATransformerConfig field names with dashes): multi-head latent attention with its latent
    norms (Megatron-Bridge DeepSeekV3Bridge sets ``qk_layernorm`` beside
    ``multi_latent_attention``), DeepSeek sparse attention's indexer, GQA, a sliding window
    (Megatron-Bridge GPTOSSBridge: ``window_size (sliding_window - 1, 0)``, full attention every
    2nd layer), learned sinks, QK norms, NoPE layers and a partial rotary embedding."""
    args: list[str] = []
    if model.is_mla:
        args.append("--multi-latent-attention")
        if model.q_lora_rank:
            args += ["--q-lora-rank", str(model.q_lora_rank)]
        args += [
            "--kv-lora-rank", str(model.kv_lora_rank),
            "--qk-head-dim", str(model.qk_nope_head_dim),
            "--qk-pos-emb-head-dim", str(model.qk_rope_head_dim),
            "--v-head-dim", str(model.v_head_dim),
            "--qk-layernorm",
        ]  # fmt: skip
        if model.sparse_attention_topk:
            # Megatron-Bridge's GLM-5 bridge: the indexer trains through its own loss (its
            # inputs are detached: without it the top-k stays random), DSAttention takes no
            # fused RoPE (megatron-core's assertion; arguments.py fuses it by default under
            # rope) and gathers its context-parallel keys whole.
            args += [
                "--experimental-attention-variant", "dsa",
                "--dsa-indexer-n-heads", str(model.indexer_heads),
                "--dsa-indexer-head-dim", str(model.indexer_head_dim),
                "--dsa-indexer-topk", str(model.sparse_attention_topk),
                "--dsa-indexer-loss-coeff", "0.001",
                "--dsa-indexer-use-sparse-loss",
                "--no-rope-fusion",
            ]  # fmt: skip
            if plan.cp > 1:
                args += ["--cp-comm-type", "allgather"]
        return args
    if model.head_dim != model.hidden_size // model.num_heads:
        args += ["--kv-channels", str(model.head_dim)]
    if model.num_kv_heads != model.num_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.num_kv_heads)]
    if model.linear_attention_layers:
        # Gated DeltaNet layers with a full-attention layer every n-th one (Megatron-Bridge's
        # Qwen3.5 bridge; megatron-core get_linear_attention_pattern: int n -> [1]*(n-1)+[0]).
        every = _every_nth(model.num_layers, model.num_layers - model.linear_attention_layers)
        args += [
            "--experimental-attention-variant", "gated_delta_net",
            "--linear-attention-freq", str(every),
            "--linear-conv-kernel-dim", str(model.linear_conv_kernel),
            "--linear-key-head-dim", str(model.linear_key_head_dim),
            "--linear-value-head-dim", str(model.linear_value_head_dim),
            "--linear-num-key-heads", str(model.linear_num_key_heads),
            "--linear-num-value-heads", str(model.linear_num_value_heads),
        ]  # fmt: skip
    if model.attention_output_gate:
        args.append("--attention-output-gate")
    if model.sliding_window_layers:
        args += ["--window-size", f"{model.sliding_window - 1},0"]
        if model.sliding_window_layers < model.num_layers:
            args += ["--window-attn-skip-freq", "2"]
    if model.attention_sinks:
        # gpt-oss (Megatron-Bridge GPTOSSBridge): learnable softmax offsets, and its SwiGLU:
        # quick-GELU gate, (up + 1), clamped at 7.
        args += ["--softmax-type", "learnable"]
    if model.qk_norm == "rmsnorm":
        args.append("--qk-layernorm")
    elif model.qk_norm == "l2":
        args.append("--qk-l2-norm")
    if model.attention_chunk_layers and model.attention_chunk_layers < model.num_layers:
        # Llama 4: the layers outside the chunked ones are global NoPE layers (no_rope_layers),
        # every n-th one.
        step = _every_nth(model.num_layers, model.num_layers - model.attention_chunk_layers)
        args += ["--no-rope-freq", str(step)]
    if model.rotary_dim and model.rotary_dim < model.head_dim:
        args += ["--rotary-percent", _rotary_percent(model)]
    return args


def _router(model: ModelSpec) -> list[str]:
    """The router (TransformerConfig ``moe_router_*``): sigmoid scores with an expert bias and
    group-limited routing for DeepSeek-V3 (Megatron-Bridge DeepSeekV3Bridge; ``n_group`` ->
    ``moe_router_num_groups``, ``topk_group`` -> ``moe_router_group_topk``,
    ``routed_scaling_factor`` -> ``moe_router_topk_scaling_factor``)."""
    args = [
        "--num-experts",
        str(model.num_experts),
        "--moe-router-topk",
        str(model.experts_per_token),
    ]
    if model.router_score == "sigmoid":
        args += ["--moe-router-score-function", "sigmoid"]
    elif model.experts_per_token == 1 or not model.router_topk_normalized:
        # A softmax over all experts, top-k kept as is (DeepSeek-V2, Qwen2-MoE; Megatron-Bridge
        # sets moe_router_pre_softmax = not norm_topk_prob). megatron-core also needs it for a
        # top-1 softmax router ("Please use --moe-router-pre-softmax when topk is 1").
        args.append("--moe-router-pre-softmax")
    if model.router_scales_input:
        # Llama4TextMoe multiplies the expert's input by the router's weight (Megatron-LM's
        # Llama-4-Maverick modelopt example passes --export-moe-apply-probs-on-input).
        args.append("--moe-apply-probs-on-input")
    if model.router_expert_bias:
        args.append("--moe-router-enable-expert-bias")
    if model.router_groups > 1:
        args += ["--moe-router-num-groups", str(model.router_groups)]
        args += ["--moe-router-group-topk", str(model.router_group_topk)]
    if model.router_scaling_factor != 1.0:
        args += ["--moe-router-topk-scaling-factor", f"{model.router_scaling_factor:g}"]
    return args


def megatron_args(job: TrainingJob) -> list[str]:
    """The arguments, in Megatron-LM's spelling, that reproduce ``job``'s model and plan."""
    model, plan, training = job.model, job.plan, job.training
    require(
        plan.zero <= 1,
        f"Megatron-LM's distributed optimizer is ZeRO-1; a ZeRO-{plan.zero} plan exports to "
        "--to deepspeed, accelerate or torchtitan",
        field="zero",
    )
    _check_expressible(model, plan, training.seq_len)
    args = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--num-attention-heads", str(model.num_heads),
        "--ffn-hidden-size", str(_dense_ffn(model)),
        "--seq-length", str(training.seq_len),
        "--max-position-embeddings", str(max(model.max_seq_len, training.seq_len)),
    ]  # fmt: skip
    args += _attention(model, plan)
    if model.attention_sinks:
        args += ["--quick-geglu", "--glu-linear-offset", "1.0"]
        args += ["--activation-func-clamp-value", "7.0"]
    elif model.mlp == "gated":
        args.append("--swiglu")
    args += ["--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"]
    if model.norm_offset_one:
        args.append("--apply-layernorm-1p")
    position = {"rope": "rope", "learned": "learned_absolute", "alibi": "none"}[model.position]
    args += ["--position-embedding-type", position]
    if model.position == "rope" and model.rope_theta:
        # arguments.py reads --rotary-base as an int; every recorded base is a whole number.
        args += ["--rotary-base", str(round(model.rope_theta))]
    if model.rope_scaling == "llama3":
        # Megatron-LM's Llama 3.x scaling fixes the low/high frequency factors (1, 4) and the
        # 8,192 original tokens the reader requires; only the factor is a flag.
        args += ["--use-rope-scaling", "--rope-scaling-factor", f"{model.rope_scaling_factor:g}"]
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if not model.linear_bias:
        args.append("--disable-bias-linear")
        if model.qkv_bias:
            args.append("--add-qkv-bias")
    if model.num_experts > 1:
        args += _router(model)
        args += _moe_layout(model)
    args += [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--context-parallel-size", str(plan.cp),
        "--micro-batch-size", str(plan.micro_batch),
        "--global-batch-size", str(plan.global_batch),
    ]  # fmt: skip
    args += _pipeline_split(job)
    if plan.ep > 1:
        args += ["--expert-model-parallel-size", str(plan.ep)]
    if plan.etp != plan.tp:
        # Parallel folding: each expert split etp ways, not tp (Megatron-Core
        # ModelParallelConfig.expert_tensor_parallel_size; unset it follows tp).
        args += ["--expert-tensor-parallel-size", str(plan.etp)]
    if plan.tp > 1 and plan.sequence_parallel:
        args.append("--sequence-parallel")
    if plan.zero == 1:
        args += ["--use-distributed-optimizer", "--overlap-param-gather"]
    if plan.dp * plan.cp > 1:
        args.append("--overlap-grad-reduce")
    if plan.recompute == "selective" and training.recompute_modules:
        # (selective with no module recomputes nothing: no flag says it better)
        args += ["--recompute-granularity", "selective"]
        if training.recompute_modules != DEFAULT_RECOMPUTE_MODULES:
            args += ["--recompute-modules", *training.recompute_modules]
    elif plan.recompute == "full":
        # One layer per checkpoint: what gpuscale prices as full recompute (Korthikanti et al.).
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform"]
        args += ["--recompute-num-layers", "1"]
    if training.precision == "fp16":
        args.append("--fp16")
    elif training.precision in ("bf16", "fp8"):
        args.append("--bf16")
    if training.precision == "fp8":
        args += ["--fp8-format", "hybrid"]
    if training.loss == "te":
        args += ["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"]
    if training.grad_reduce_in_bf16:
        args.append("--grad-reduce-in-bf16")
    if training.activation_offload_layers:
        # Megatron-LM turns --cpu-offloading on for a positive layer count (arguments.py).
        args += ["--cpu-offloading-num-layers", str(training.activation_offload_layers)]
    if training.ep_overlap:
        # Megatron-Bridge's performance scripts turn both on together (moe_a2a_overlap,
        # scripts/performance/utils/overrides.py): the wgrad delay is what frees the overlap.
        # Megatron-Core takes the overlap with the alltoall or flex dispatcher only, and its
        # default is allgather (TransformerConfig.moe_token_dispatcher_type).
        args += ["--moe-token-dispatcher-type", "alltoall"]
        args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    return args


_SCRIPT = """#!/usr/bin/env bash
# Megatron-LM launch for {model} on {gpus}x {gpu} ({nodes} node(s) of {per_node}), written by
# `gpuscale export --to megatron`. Run it on every node (e.g. under srun) with NODE_RANK and
# MASTER_ADDR set; MEGATRON_LM points at a Megatron-LM checkout, DATA_PATH at a preprocessed
# dataset prefix, TOKENIZER_MODEL at the tokenizer.
set -euo pipefail
: "${{MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}}"
: "${{DATA_PATH:?set DATA_PATH to the dataset prefix}}"
: "${{TOKENIZER_MODEL:?set TOKENIZER_MODEL to the tokenizer}}"
export CUDA_DEVICE_MAX_CONNECTIONS=1  # needed for TP/SP communication overlap ordering

PLAN_ARGS=(
{plan_args}
)

exec torchrun --nnodes {nodes} --nproc-per-node {per_node} \\
    --node-rank "${{NODE_RANK:-0}}" --master-addr "${{MASTER_ADDR:-127.0.0.1}}" --master-port "${{MASTER_PORT:-29500}}" \\
    "$MEGATRON_LM/pretrain_gpt.py" "${{PLAN_ARGS[@]}}" \\
    --data-path "$DATA_PATH" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$TOKENIZER_MODEL" \\
    --train-iters "${{TRAIN_ITERS:-1000}}" --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine \\
    --weight-decay 0.1 --clip-grad 1.0 --log-interval 10 "$@"
"""


def _group(args: list[str]) -> list[str]:
    """One flag (with its value, if any) a line, for a script a person can read and edit."""
    lines: list[str] = []
    for token in args:
        if token.startswith("--") or not lines:
            lines.append(token)
        else:
            lines[-1] += " " + shlex.quote(token)
    return lines


ROPE_NOTE = (
    "the rotary embedding's base is not recorded for this model (it does not change the cost): "
    "Megatron-LM's default stands (--rotary-base 10000); add the model's own, and its scaling, "
    "to train it as released"
)


def _rope_notes(model: ModelSpec) -> tuple[str, ...]:
    """What of the rotary embedding the script leaves at Megatron-LM's defaults."""
    if model.position != "rope":
        return ()
    if not model.rope_theta:
        return (ROPE_NOTE,)
    if model.rope_scaling == "llama3":
        return ()
    if model.rope_scaling == "yarn":
        return (
            f"the rotary embedding's YaRN scaling (factor {model.rope_scaling_factor:g}) is not "
            "written: add the model's own YaRN flags to train it as released",
        )
    return (
        "no rotary scaling is recorded for this model; if it has one (Llama 3.x's, YaRN), add "
        "it to train it as released",
    )


def export_megatron(job: TrainingJob) -> Export:
    args = megatron_args(job)
    script = _SCRIPT.format(
        model=job.model_id,
        gpus=job.gpus,
        gpu=job.gpu,
        nodes=job.nodes,
        per_node=job.procs_per_node,
        plan_args="\n".join(f"    {line}" for line in _group(args)),
    )
    return Export(
        target="megatron",
        files=(
            ExportedFile(
                name="launch_megatron.sh",
                content=script,
                purpose="torchrun launch of Megatron-LM pretrain_gpt.py with the plan's arguments",
                executable=True,
            ),
        ),
        notes=_rope_notes(job.model),
    )
