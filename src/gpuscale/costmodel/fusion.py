"""HBM passes of a Llama-style block's memory-bound ops, eager PyTorch vs torch.compile.

Each kernel is listed with what it reads and writes per token, in 2-byte vectors of the width it
works on (an fp32 intermediate counts 2). Eager PyTorch runs one kernel per op, each a full HBM
round trip. TorchInductor fuses every chain of pointwise ops and reductions between two "extern"
kernels (matmuls, SDPA) into one generated kernel that reads its inputs once and writes its
outputs once, recomputing cheap pointwise values instead of storing them (Ansel et al. 2024,
'PyTorch 2', ASPLOS, Sec. 5.3-5.5: Inductor's scheduler fuses pointwise/reduction nodes, the
min-cut partitioner of AOTAutograd rematerialises pointwise ops in backward). torchtitan compiles
each TransformerBlock as one graph (torchtitan parallelize_llama.apply_compile, fullgraph=True,
2024), so the block boundary is a fusion boundary too.

The block is torchtitan's Llama 3 (torchtitan/models/llama/model.py and models/norms.py, 2024):
RMSNorm = ``(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight``, rotary
= ``view_as_complex(x.float()) * freqs_cis`` then ``type_as``, ``repeat_kv`` expand + reshape of
K and V to the query heads, SwiGLU = ``w2(silu(w1(x)) * w3(x))`` with separate w1/w3 (and
wq/wk/wv) linears, and two residual adds. Widths: hidden ``h`` (= the query width in Llama), MLP
``f``, and the K/V width ``kv`` as a share of ``h``.

The cost model charges a layer's backward twice its forward memory-bound time; a count is
folded into that convention as ``(forward + backward) / 3`` passes, as the other profiles'
``elementwise_*`` constants are (llm-foundry.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Kernel:
    """One memory-bound kernel: 2-byte vectors read + written per token, of the hidden width
    (``hidden`` plus ``kv`` times the K/V share of it) and of the MLP width (``ffn``)."""

    name: str
    hidden: float = 0.0
    kv: float = 0.0
    ffn: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Passes:
    """A block's memory-bound traffic in the cost model's units (forward-equivalent passes)."""

    hidden: float
    """2-byte vectors of the hidden width per token."""
    ffn: float
    """2-byte vectors of the MLP width per token."""
    kernels: float
    """Kernel launches."""


def _rmsnorm_eager(name: str) -> tuple[Kernel, ...]:
    # x.float(): read 1, write 2; pow(2): read 2, write 2; mean(-1): read 2 (writes one value per
    # token); + eps and rsqrt: per-token scalars; x * rsqrt: read 2, write 2; type_as: read 2,
    # write 1; * weight: read 1, write 1.
    return (
        Kernel(name=f"{name}.float", hidden=3),
        Kernel(name=f"{name}.pow", hidden=4),
        Kernel(name=f"{name}.mean", hidden=2),
        Kernel(name=f"{name}.add_eps"),
        Kernel(name=f"{name}.rsqrt"),
        Kernel(name=f"{name}.mul", hidden=4),
        Kernel(name=f"{name}.type_as", hidden=3),
        Kernel(name=f"{name}.mul_weight", hidden=2),
    )


def _rmsnorm_eager_backward(name: str) -> tuple[Kernel, ...]:
    # Autograd of the ops above, last first: * weight (grad * weight: read 1, write 1; grad *
    # output: read 2, write 1, summed over tokens: read 1); type_as (bf16 -> fp32: read 1,
    # write 2); x * r (grad * r: read 2, write 2; grad * x: read 4, write 2; summed over the row:
    # read 2); mean (expand / n: write 2); pow (ATen pow_backward, grad * 2 * x.pow(1): the
    # pow (read 2, write 2), the scalar multiply (read 2, write 2), the product with the
    # gradient (read 4, write 2));
    # the two fp32 gradients of x added (read 4, write 2); .float() (fp32 -> bf16: read 2,
    # write 1).
    return (
        Kernel(name=f"{name}.mul_weight.grad_input", hidden=2),
        Kernel(name=f"{name}.mul_weight.grad_weight", hidden=3),
        Kernel(name=f"{name}.mul_weight.sum", hidden=1),
        Kernel(name=f"{name}.type_as.grad", hidden=3),
        Kernel(name=f"{name}.mul.grad_x", hidden=4),
        Kernel(name=f"{name}.mul.grad_r", hidden=6),
        Kernel(name=f"{name}.mul.sum", hidden=2),
        Kernel(name=f"{name}.mean.grad", hidden=2),
        Kernel(name=f"{name}.pow.grad.pow", hidden=4),
        Kernel(name=f"{name}.pow.grad.scale", hidden=4),
        Kernel(name=f"{name}.pow.grad.mul", hidden=6),
        Kernel(name=f"{name}.accumulate", hidden=6),
        Kernel(name=f"{name}.float.grad", hidden=3),
    )


EAGER_FORWARD: tuple[Kernel, ...] = (
    *_rmsnorm_eager("attention_norm"),
    # Rotary on Q and K: .float() (read 1, write 2), complex multiply (read 2, write 2),
    # type_as (read 2, write 1): 10 per width.
    Kernel(name="rope_q.float", hidden=3),
    Kernel(name="rope_q.mul", hidden=4),
    Kernel(name="rope_q.type_as", hidden=3),
    Kernel(name="rope_k.float", kv=3),
    Kernel(name="rope_k.mul", kv=4),
    Kernel(name="rope_k.type_as", kv=3),
    # repeat_kv: expand + reshape copies K and V out to the query heads (read kv, write h).
    Kernel(name="repeat_kv.k", hidden=1, kv=1),
    Kernel(name="repeat_kv.v", hidden=1, kv=1),
    Kernel(name="residual_add_attention", hidden=3),
    *_rmsnorm_eager("ffn_norm"),
    Kernel(name="silu", ffn=2),
    Kernel(name="swiglu_mul", ffn=3),
    Kernel(name="residual_add_mlp", hidden=3),
)
"""Eager forward: one kernel per torch op."""

EAGER_BACKWARD: tuple[Kernel, ...] = (
    # Gradient sums where a tensor feeds two consumers: each residual fork (read 2, write 1),
    # the three dgrads of wq/wk/wv into the norm output's gradient (two adds) and the two of
    # w1/w3 (one add).
    Kernel(name="residual_fork_mlp.grad", hidden=3),
    # SwiGLU: grad * w3(x) and grad * silu(w1(x)) (read 2, write 1 each), silu_backward (read
    # grad and input, write 1).
    Kernel(name="swiglu_mul.grad_a", ffn=3),
    Kernel(name="swiglu_mul.grad_b", ffn=3),
    Kernel(name="silu.grad", ffn=3),
    Kernel(name="w1_w3_dgrad_sum", hidden=3),
    *_rmsnorm_eager_backward("ffn_norm"),
    Kernel(name="residual_fork_attention.grad", hidden=3),
    # repeat_kv backward sums over the repeated heads (read h, write kv), for K and V.
    Kernel(name="repeat_kv.k.grad", hidden=1, kv=1),
    Kernel(name="repeat_kv.v.grad", hidden=1, kv=1),
    # Rotary backward: type_as (read 1, write 2), multiply by conj(freqs) (read 2, write 2),
    # .float() (read 2, write 1).
    Kernel(name="rope_q.type_as.grad", hidden=3),
    Kernel(name="rope_q.mul.grad", hidden=4),
    Kernel(name="rope_q.float.grad", hidden=3),
    Kernel(name="rope_k.type_as.grad", kv=3),
    Kernel(name="rope_k.mul.grad", kv=4),
    Kernel(name="rope_k.float.grad", kv=3),
    Kernel(name="wqkv_dgrad_sum_1", hidden=3),
    Kernel(name="wqkv_dgrad_sum_2", hidden=3),
    *_rmsnorm_eager_backward("attention_norm"),
)
"""Eager backward: autograd's kernel for each op's derivative."""

COMPILED_FORWARD: tuple[Kernel, ...] = (
    # RMSNorm as one persistent reduction over the row: read x, write the normalised output.
    Kernel(name="attention_norm", hidden=2),
    # Rotary's complex multiply is not generated: Inductor has no code generation for complex
    # dtypes and runs it as the ATen kernel ("Torchinductor does not support code generation
    # for complex operators", torch/_inductor/lowering.py fallback). Around it, generated
    # kernels upcast Q and K to fp32 (read 1, write 2) and, after it, cast back to bf16 fused
    # with repeat_kv's copies of K and V (read 2 or 1, write the repeated heads).
    Kernel(name="rope_q.float", hidden=3),
    Kernel(name="rope_k.float", kv=3),
    Kernel(name="rope_q.complex_mul", hidden=4),
    Kernel(name="rope_k.complex_mul", kv=4),
    Kernel(name="rope.type_as_repeat_kv", hidden=5, kv=3),
    # Residual add fused with the next norm: read x and the attention output, write the sum
    # (the residual stream) and the normalised output.
    Kernel(name="residual_add_ffn_norm", hidden=4),
    # silu(a) * b: read a and b, write the product.
    Kernel(name="swiglu", ffn=3),
    # The last residual add ends the compiled block: read 2, write 1.
    Kernel(name="residual_add_mlp", hidden=3),
)
"""Inductor forward: one generated kernel between each pair of extern calls (matmuls, SDPA, and
the ATen complex multiply); the kernel list checked with ``benchmarks/inductor_block.py``."""

COMPILED_BACKWARD: tuple[Kernel, ...] = (
    # The residual add's backward passes the gradient through (no kernel). SwiGLU backward in
    # one kernel: read the gradient, a and b (silu recomputed), write the two input gradients.
    Kernel(name="swiglu.grad", ffn=5),
    # ffn_norm backward fused with the w1/w3 dgrad sum and the residual fork: read the two
    # dgrads, the norm input and the residual gradient, write the summed gradient; the weight
    # gradient reduces over tokens (the other axis), a second kernel re-reading the dgrads and
    # the input.
    Kernel(name="ffn_norm.grad_input", hidden=5),
    Kernel(name="ffn_norm.grad_weight", hidden=3),
    # repeat_kv backward (sum over the repeated heads) fused with the upcast of dK for the
    # complex multiply: read the repeated dK and dV, write dK in fp32 and dV; dQ's upcast.
    Kernel(name="repeat_kv.grad_rope_k.float", hidden=2, kv=3),
    Kernel(name="rope_q.float.grad", hidden=3),
    # The complex multiply by conj(freqs), ATen (read 2, write 2), and the casts back (read 2,
    # write 1).
    Kernel(name="rope_q.complex_mul.grad", hidden=4),
    Kernel(name="rope_k.complex_mul.grad", kv=4),
    Kernel(name="rope_q.type_as.grad", hidden=3),
    Kernel(name="rope_k.type_as.grad", kv=3),
    # attention_norm backward fused with the wq/wk/wv dgrad sum and the residual fork: read
    # three dgrads, the norm input and the residual gradient, write 1; the weight gradient
    # re-reads the three dgrads and the input.
    Kernel(name="attention_norm.grad_input", hidden=6),
    Kernel(name="attention_norm.grad_weight", hidden=4),
)
"""Inductor backward."""


def block_passes(forward: tuple[Kernel, ...], backward: tuple[Kernel, ...], kv: float) -> Passes:
    """The block's memory-bound traffic, with K/V ``kv`` times the hidden width, folded into
    the cost model's forward-equivalent units: ``(forward + backward) / 3``."""
    kernels = forward + backward
    return Passes(
        hidden=sum(k.hidden + kv * k.kv for k in kernels) / 3.0,
        ffn=sum(k.ffn for k in kernels) / 3.0,
        kernels=len(kernels) / 3.0,
    )


def compiled_passes(kv: float) -> Passes:
    """torchtitan's Llama block under torch.compile (Inductor)."""
    return block_passes(COMPILED_FORWARD, COMPILED_BACKWARD, kv)


def eager_passes(kv: float) -> Passes:
    """The same block in eager PyTorch."""
    return block_passes(EAGER_FORWARD, EAGER_BACKWARD, kv)


# --- float8 linears with tensorwise dynamic scaling (torchao) ---------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Float8Casts:
    """Bytes per element moved to feed one float8 linear, forward and backward."""

    input_forward: float
    """Per element of the input (tokens x k), forward."""
    input_backward: float
    """Per element of the input, backward (the weight-gradient GEMM's layout)."""
    grad_output: float
    """Per element of the output gradient (tokens x n), backward."""
    weight_forward: float
    """Per weight element (k x n), forward."""
    weight_backward: float
    """Per weight element, backward."""


def torchao_tensorwise_casts(*, compiled: bool, fp8_all_gather: bool) -> Float8Casts:
    """HBM bytes of torchao's dynamic tensorwise float8 casts around one linear (torchao
    float8/float8_linear.py and float8_scaling_utils.hp_tensor_to_float8_dynamic, v0.5-0.8):
    each operand's scale comes from ``amax(abs(x))`` over the whole tensor, then the operand is
    cast with it; ``torch._scaled_mm`` takes its first operand row-major and its second
    column-major, so the weight-gradient GEMM (``grad_output^T @ input``) and the input-gradient
    GEMM (``grad_output @ weight``) need the transposed float8 copies of the input and of the
    weight (read 1, write 1 byte each).

    Eager: the amax is its own kernel (read 2), the cast another (read 2, write 1), the
    output gradient is cast to e5m2 the same way and transposed for the weight gradient (read
    1, write 1). Compiled: Inductor fuses the amax into the kernel that produces the tensor (the
    norm, SwiGLU, rotary/SDPA-output and residual kernels of the block, all memory-bound) as an
    extra reduction output, and writes the output gradient's two layouts from one cast kernel;
    the cast itself waits for the whole-tensor amax and stays a kernel of its own (read 2,
    write 1) -- torchtitan docs/float8.md: ``--training.compile`` "required for competitive
    performance", to "fuse the float8 scaling/casting kernels".

    Weights: with FSDP float8 all-gather (torchtitan ``enable_fsdp_float8_all_gather``) each
    rank casts its shard before the all-gather and one all-reduce of all amaxes follows the
    optimizer step (``precompute_float8_dynamic_scale_for_fsdp``): 1/dp of a weight, left out;
    the gathered float8 weight still needs its transposed copy for the input gradient.
    Without it every forward reads the 16-bit weight for its amax (2) and casts it (3).
    """
    amax = 0.0 if compiled else 2.0
    cast = 2.0 + 1.0
    transpose = 1.0 + 1.0
    grad = 2.0 + 1.0 + 1.0 if compiled else amax + cast + transpose
    return Float8Casts(
        input_forward=amax + cast,
        input_backward=transpose,
        grad_output=grad,
        weight_forward=0.0 if fp8_all_gather else 2.0 + cast,
        weight_backward=transpose,
    )


def transformer_engine_casts(low_bytes: float) -> Float8Casts:
    """HBM bytes of Transformer Engine's casts around one low-precision linear, ``low_bytes``
    per element in the low precision (block scales included): the fused cast-transpose reads
    the 16-bit input once and writes it twice, as is and transposed for the weight-gradient
    GEMM (TE ``cast_transpose``, ``fp8_cast_transpose_fused``), so backward reuses the saved
    transposed copy; backward casts the output gradient the same way. The weight's low-precision
    copy (and its transpose) is cached across a step's micro-batches (TE
    ``is_first_microbatch``): no per-micro-batch weight traffic."""
    cast_transpose = 2.0 + 2.0 * low_bytes
    return Float8Casts(
        input_forward=cast_transpose,
        input_backward=0.0,
        grad_output=cast_transpose,
        weight_forward=0.0,
        weight_backward=0.0,
    )
