"""The architecture of a transformer, as the cost model needs it (no weights, no framework)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscale.errors import require

MlpKind = Literal["gated", "plain"]
NormKind = Literal["rmsnorm", "layernorm"]
PositionKind = Literal["rope", "learned", "alibi"]
RouterScore = Literal["softmax", "sigmoid"]
RopeScaling = Literal["", "llama3", "yarn"]
QkNormKind = Literal["none", "rmsnorm", "rmsnorm_full", "l2"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A decoder (or encoder) transformer described by the shapes that set its cost."""

    name: str
    """Catalog id or the path of the ``config.json`` it came from."""
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    """Key/value heads: ``num_heads`` for multi-head attention, fewer under GQA/MQA."""
    ffn_hidden_size: int
    """Inner width of the MLP (of one expert, for mixture-of-experts models)."""
    vocab_size: int
    max_seq_len: int
    head_dim: int = 0
    """Width of one attention head; 0 means ``hidden_size // num_heads``."""
    mlp: MlpKind = "gated"
    """``gated``: SwiGLU with three matrices (Llama family); ``plain``: two matrices (GPT family)."""
    norm: NormKind = "rmsnorm"
    position: PositionKind = "rope"
    """``learned`` adds a ``max_seq_len x hidden_size`` table of parameters."""
    tied_embeddings: bool = False
    """Output projection shares the input embedding matrix (counted once)."""
    qkv_bias: bool = False
    linear_bias: bool = False
    """Bias on the attention output projection and the MLP matrices (GPT-2, OPT, BLOOM, BERT)."""
    num_experts: int = 1
    """Experts per MoE layer; 1 for a dense model."""
    experts_per_token: int = 1
    """Top-k routing of mixture-of-experts models."""
    causal: bool = True
    """False for encoders (BERT): attention covers the full square, not the causal half."""
    extra_params: int = 0
    """Parameters outside the repeated blocks that no other field covers (e.g. BERT's pooler)."""
    shared_experts: int = 0
    """Always-active experts of ``ffn_hidden_size`` beside the routed ones (DeepSeekMoE)."""
    dense_layers: int = 0
    """Layers with a dense MLP of ``dense_ffn_hidden_size`` instead of experts: the leading
    ones of DeepSeek-V3 (``first_k_dense_replace``) or every other one of Llama 4 Maverick
    (``interleave_moe_layer_step`` 2). Counted, not placed: the cost model prices the mean block
    (:attr:`moe_layer_share`), on every pipeline stage alike."""
    moe_layer_step: int = 1
    """Where the dense layers sit: 1, leading (DeepSeek-V3); n > 1, all but every n-th layer
    (Llama 4 Maverick ``interleave_moe_layer_step`` 2: layers n-1, 2n-1, ... are MoE). Only
    exports read it (Megatron-LM ``--moe-layer-freq``); costs count layers, not places."""
    dense_ffn_hidden_size: int = 0
    """Inner width of those dense MLPs; 0 means ``ffn_hidden_size``."""
    kv_lora_rank: int = 0
    """Multi-head latent attention (DeepSeek-V2/V3, arXiv:2405.04434 Sec. 2.1): width of the
    compressed KV latent cached per token; 0 for ordinary multi-head/GQA attention."""
    q_lora_rank: int = 0
    """MLA query compression width (0: queries projected directly)."""
    qk_rope_head_dim: int = 0
    """MLA: decoupled rotary key width per token, cached beside the latent."""
    qk_nope_head_dim: int = 0
    """MLA: non-rotary query/key width per head."""
    v_head_dim: int = 0
    """MLA: value width per head."""
    sliding_window: int = 0
    """Tokens a sliding-window attention layer attends to; 0 when no layer has a window."""
    sliding_window_layers: int = 0
    """How many layers use the sliding window (gpt-oss alternates: half of them)."""
    attention_chunk_size: int = 0
    """Chunked local attention (Llama 4 ``attention_chunk_size``): on
    ``attention_chunk_layers`` layers each token attends only within its own chunk of this many
    tokens. Training and the static-batch model price those pairs
    (``costmodel.flops.local_pairs``); the serving model prices the layers as full attention,
    time and KV cache (how an engine pages a chunked layer's cache is engine-specific), exact
    while a request's context fits one chunk and an upper bound beyond
    (:meth:`attention_chunks_unpriced`)."""
    attention_chunk_layers: int = 0
    """How many layers use chunked attention (Llama 4: the RoPE layers, 3 of every 4)."""
    linear_attention_layers: int = 0
    """Layers with a fixed-size recurrent state instead of a KV cache (Gated DeltaNet in
    Qwen3-Next/Qwen3.5 hybrids); the rest are full attention."""
    linear_num_key_heads: int = 0
    """Gated DeltaNet query/key heads (config ``linear_num_key_heads``); 0: the linear-attention
    layers are sized as ordinary attention layers."""
    linear_num_value_heads: int = 0
    """Gated DeltaNet value heads (``linear_num_value_heads``): one recurrent state each."""
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    """Width of the depthwise causal convolution over q, k, v (``linear_conv_kernel_dim``)."""
    sparse_attention_topk: int = 0
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5 ``index_topk``): each query attends to
    this many cached tokens chosen by a lightning indexer; 0: dense attention."""
    indexer_heads: int = 0
    """DSA indexer query heads (``index_n_heads``); its keys are one head per token."""
    indexer_head_dim: int = 0
    """DSA indexer head width (``index_head_dim``)."""
    attention_output_gate: bool = False
    """Full-attention layers also project a per-channel sigmoid gate on their output
    (Qwen3-Next/Qwen3.5 ``attn_output_gate``): the query projection is twice as wide."""
    router_score: RouterScore = "softmax"
    """How the MoE router turns logits into expert weights: ``softmax`` over the chosen experts'
    logits (Mixtral, Qwen3-MoE, gpt-oss) or ``sigmoid`` of each logit (DeepSeek-V3
    ``scoring_func``, arXiv:2412.19437 Sec. 2.1.2; Llama 4's top-1 router). Only exports read the
    router fields: routing costs the same either way."""
    router_expert_bias: bool = False
    """Auxiliary-loss-free balancing: a per-expert bias added to the scores for the top-k choice
    only (DeepSeek-V3 ``topk_method`` ``noaux_tc``, ``e_score_correction_bias``; MiniMax-M2
    ``use_routing_bias``)."""
    router_groups: int = 0
    """Group-limited routing: experts fall into this many groups and a token picks its top-k
    within the ``router_group_topk`` best groups (DeepSeek-V3 ``n_group`` 8, ``topk_group`` 4);
    0 or 1: no groups."""
    router_group_topk: int = 0
    router_scaling_factor: float = 1.0
    """Scale on the routed experts' weights (DeepSeek-V3 ``routed_scaling_factor`` 2.5)."""
    router_topk_normalized: bool = True
    """The chosen experts' weights sum to one (``norm_topk_prob``; a softmax over the top-k
    logits, Mixtral); False: a softmax over all experts, kept as is for the top-k
    (DeepSeek-V2, Qwen2-MoE)."""
    router_scales_input: bool = False
    """The router's weight multiplies the expert's input, not its output (Llama4TextMoe:
    ``routed_in = hidden_states * router_scores``)."""
    rope_theta: float = 0.0
    """Base of the rotary embedding's frequencies (config ``rope_theta``, or
    ``rope_parameters.rope_theta``); 0 where the source does not record it. Only exports read it
    (Megatron-LM ``--rotary-base``); its scaling (Llama 3.x's, YaRN) is not carried."""
    rope_scaling: RopeScaling = ""
    """How the rotary frequencies are stretched for long context (config ``rope_scaling``
    ``rope_type``): ``llama3`` (Llama 3.1+; low/high frequency factors 1 and 4 over an original
    8,192 tokens) or ``yarn`` (Peng et al. 2023, arXiv:2309.00071); empty for none or not
    recorded. Only exports read it."""
    rope_scaling_factor: float = 0.0
    """The scaling's ``factor`` (Llama 3.1 8, DeepSeek-V3 40); 0 without scaling."""
    norm_offset_one: bool = False
    """The norms store their scale as an offset from one, ``x * (1 + weight)`` with the weight
    initialized at zero (Qwen3-Next/Qwen3.5 ``Qwen3NextRMSNorm``; Megatron-LM
    ``--apply-layernorm-1p``). The same function class: only exports read it."""
    shared_expert_gate: bool = False
    """A sigmoid gate (one ``hidden x 1`` linear) scales the shared experts' output (Qwen2-MoE,
    Qwen3-Next, Qwen3.5 ``shared_expert_gate``)."""
    qk_norm: QkNormKind = "none"
    """A norm on the queries and keys before attention: ``rmsnorm`` over each head with weights
    (Qwen3 ``q_norm``/``k_norm`` of ``head_dim``), ``rmsnorm_full`` over all heads together
    (MiniMax-M2 ``use_qk_norm``: ``q_norm`` of ``num_heads x head_dim``), ``l2`` per head without
    weights (Llama 4 ``use_qk_norm``, ``Llama4TextL2Norm``). MLA's norms on its compressed
    latents come with MLA. The cost model counts its scales (``params.qk_norm_params``) and
    nothing else: a norm over the heads is a negligible cost."""
    rotary_dim: int = 0
    """Channels of each head that carry the rotary embedding (MiniMax-M2 ``rotary_dim`` 64 of
    128, GPT-J 64 of 256); 0 means the whole head. Only exports read it."""
    parallel_block: bool = False
    """Attention and MLP read the same normed input and add to the residual together (GPT-J;
    GPT-NeoX ``use_parallel_residual``) instead of one after the other. Only exports read it."""
    attention_sinks: bool = False
    """Every head has a learned sink logit in its softmax (gpt-oss ``sinks``, arXiv:2508.10925
    Sec. 2), with gpt-oss's clamped SwiGLU beside it. Counted as one parameter per head."""
    attention_weights_16bit: bool = False
    """The published quantized checkpoint quantizes only the experts and keeps the attention
    projections and the router in 16 bits (gpt-oss ``quantization_config.
    modules_to_not_convert``: ``self_attn``, ``mlp.router``, ``embed_tokens``, ``lm_head``)."""
    dense_mlp_weights_16bit: bool = False
    """The published quantized checkpoint keeps the shared experts and the leading dense layers'
    MLP in 16 bits, quantizing only the routed experts (Kimi-K2.5 compressed-tensors ``ignore``:
    ``re:.*shared_experts.*``, ``re:.*mlp\\.(gate|up|gate_up|down)_proj.*``)."""
    stored_weights: str = ""
    """The weight format (a ``--weights`` name) the ``config.json`` this spec was read from
    declares in its ``quantization_config``; empty for 16-bit weights, a scheme not read, or a
    catalog entry (whose checkpoint ``catalog.served_weights`` looks up)."""
    stored_kv_cache: str = ""
    """The KV-cache dtype that ``quantization_config`` declares (ModelOpt
    ``kv_cache_quant_algo``: ``fp8``); empty when none (``catalog.served_kv_cache``)."""
    unread_quantization: str = ""
    """What the ``config.json``'s ``quantization_config`` says when it is a scheme not read here
    (``declares quant_method 'bitsandbytes'``); ``--weights auto`` is then refused rather than
    priced as 16-bit weights."""
    source: str = ""

    def __post_init__(self) -> None:
        for field in (
            "num_layers",
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "ffn_hidden_size",
            "vocab_size",
            "max_seq_len",
            "num_experts",
            "experts_per_token",
        ):
            value = getattr(self, field)
            require(
                isinstance(value, int) and value > 0,
                f"model '{self.name}': {field} must be a positive integer, got {value!r}",
            )
        require(
            self.num_heads % self.num_kv_heads == 0,
            f"model '{self.name}': num_heads ({self.num_heads}) must be a multiple of "
            f"num_kv_heads ({self.num_kv_heads})",
        )
        require(
            self.experts_per_token <= self.num_experts,
            f"model '{self.name}': experts_per_token ({self.experts_per_token}) exceeds "
            f"num_experts ({self.num_experts})",
        )
        require(self.head_dim >= 0, f"model '{self.name}': head_dim must be >= 0")
        for field in (
            "shared_experts",
            "dense_layers",
            "dense_ffn_hidden_size",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
            "sliding_window",
            "sliding_window_layers",
            "attention_chunk_size",
            "attention_chunk_layers",
            "linear_attention_layers",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel",
            "sparse_attention_topk",
            "indexer_heads",
            "indexer_head_dim",
            "router_groups",
            "router_group_topk",
            "rotary_dim",
        ):
            value = getattr(self, field)
            require(
                isinstance(value, int) and value >= 0,
                f"model '{self.name}': {field} must be a non-negative integer, got {value!r}",
            )
        require(
            self.dense_layers + self.linear_attention_layers <= self.num_layers
            and self.sliding_window_layers <= self.num_layers
            and self.attention_chunk_layers <= self.num_layers,
            f"model '{self.name}': dense/linear-attention/sliding-window/chunked layer counts exceed "
            f"num_layers ({self.num_layers})",
        )
        require(
            isinstance(self.moe_layer_step, int)
            and self.moe_layer_step >= 1
            and (
                self.moe_layer_step == 1
                or self.dense_layers == self.num_layers - self.num_layers // self.moe_layer_step
            ),
            f"model '{self.name}': moe_layer_step {self.moe_layer_step!r} needs the dense layers "
            "between the MoE ones (num_layers - num_layers // moe_layer_step of them); accepted: "
            "a positive integer, 1 for leading dense layers",
        )
        require(
            (self.attention_chunk_size > 0) == (self.attention_chunk_layers > 0),
            f"model '{self.name}': give attention_chunk_size and attention_chunk_layers together, "
            "or neither",
        )
        gdn = (
            self.linear_num_key_heads,
            self.linear_num_value_heads,
            self.linear_key_head_dim,
            self.linear_value_head_dim,
        )
        require(
            all(gdn) or not any(gdn),
            f"model '{self.name}': give all of linear_num_key_heads, linear_num_value_heads, "
            "linear_key_head_dim and linear_value_head_dim, or none",
        )
        require(
            self.router_score in ("softmax", "sigmoid"),
            f"model '{self.name}': router_score must be softmax or sigmoid, got "
            f"{self.router_score!r}",
        )
        require(
            self.qk_norm in ("none", "rmsnorm", "rmsnorm_full", "l2"),
            f"model '{self.name}': qk_norm must be none, rmsnorm, rmsnorm_full or l2, got "
            f"{self.qk_norm!r}",
        )
        require(
            isinstance(self.router_scaling_factor, int | float) and self.router_scaling_factor > 0,
            f"model '{self.name}': router_scaling_factor must be a positive number, got "
            f"{self.router_scaling_factor!r}",
        )
        groups = self.router_groups
        require(
            (groups <= 1 and self.router_group_topk <= 1)
            or (
                (groups > 1 and self.num_experts % groups == 0)
                and 1 <= self.router_group_topk <= groups
            ),
            f"model '{self.name}': router_groups ({groups}) must divide num_experts "
            f"({self.num_experts}) and router_group_topk ({self.router_group_topk}) lie in "
            "1..router_groups; 0 for no groups",
        )
        require(
            isinstance(self.rope_theta, int | float) and 0.0 <= self.rope_theta < 1e12,
            f"model '{self.name}': rope_theta must be 0 (not recorded) or a positive number, got "
            f"{self.rope_theta!r}",
        )
        require(
            self.rope_scaling in ("", "llama3", "yarn")
            and (self.rope_scaling_factor > 0) == (self.rope_scaling != ""),
            f"model '{self.name}': rope_scaling must be '', llama3 or yarn, with a positive "
            f"rope_scaling_factor exactly when set; got {self.rope_scaling!r}, "
            f"{self.rope_scaling_factor!r}",
        )
        require(
            not self.router_expert_bias or self.router_score == "sigmoid",
            f"model '{self.name}': an expert-bias router scores with a sigmoid (DeepSeek-V3 "
            "noaux_tc); got router_score softmax",
        )
        if self.head_dim == 0:
            require(
                self.hidden_size % self.num_heads == 0,
                f"model '{self.name}': hidden_size ({self.hidden_size}) is not divisible by "
                f"num_heads ({self.num_heads}); give head_dim explicitly",
            )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        require(
            self.rotary_dim <= self.head_dim,
            f"model '{self.name}': rotary_dim ({self.rotary_dim}) exceeds head_dim "
            f"({self.head_dim}); 0 means the whole head",
        )

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def has_gated_deltanet(self) -> bool:
        """Linear-attention layers with their own Gated DeltaNet shapes (Qwen3-Next/Qwen3.5)."""
        return self.linear_attention_layers > 0 and self.linear_num_value_heads > 0

    def attention_chunks_unpriced(self, context_tokens: int) -> bool:
        """Whether a context this long spans several attention chunks, which the serving model
        does not price (it prices those layers as full attention)."""
        return self.attention_chunk_layers > 0 and context_tokens > self.attention_chunk_size

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def moe_layer_share(self) -> float:
        """Share of the blocks whose MLP is routed experts (1 for an MoE model without leading
        dense blocks, 0 for a dense one): the cost model prices the mean block."""
        if not self.is_moe:
            return 0.0
        return (self.num_layers - self.dense_layers) / self.num_layers

    @property
    def q_width(self) -> int:
        """Width of all query heads together (``num_heads * head_dim``)."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of all key (or value) heads together (``num_kv_heads * head_dim``)."""
        return self.num_kv_heads * self.head_dim

    @property
    def v_width(self) -> int:
        """Width of all value heads together: MLA's values are ``v_head_dim`` wide (128 in
        DeepSeek-V3, against 192 for its queries and keys), else :attr:`kv_width`."""
        if self.is_mla and self.v_head_dim:
            return self.num_kv_heads * self.v_head_dim
        return self.kv_width

    @property
    def attention_out_width(self) -> int:
        """Width of the attention output (the output projection's input): the values' width
        per head over every query head."""
        if self.is_mla and self.v_head_dim:
            return self.num_heads * self.v_head_dim
        return self.q_width
