"""Reference transformers in plain PyTorch, built from a :class:`ModelSpec`, that keep for
backward what Megatron-style fused kernels keep. They are the ground truth of the memory model.

Where they deliberately differ from a naive ``nn.Module`` stack:

- RMSNorm is a fused function keeping its input and the fp32 ``rstd`` (Apex/Megatron
  ``FusedRMSNorm``); ``torch.nn.functional.rms_norm`` on CPU keeps fp32 intermediates instead.
- SwiGLU keeps its two inputs and recomputes ``silu`` (Megatron ``bias_swiglu``); an unfused
  ``silu(g) * u`` would also keep ``silu(g)``.
- Dropout is ``torch.native_dropout`` (a ``bool`` mask, as on CUDA); ``F.dropout`` on CPU keeps a
  mask of the input's dtype.
- Flash attention is PyTorch's ``scaled_dot_product_attention`` (CPU flash kernel: Q, K, V, the
  output and the fp32 log-sum-exp). The unfused path expands K and V to every query head, as
  Hugging Face ``repeat_kv`` and Megatron's unfused core attention do.
- RoPE is left out: it rotates Q and K in place of the projections' outputs, the same bytes.

``eager=True`` builds the naive stack instead, as Hugging Face ``LlamaRMSNorm``,
``apply_rotary_pos_emb`` and ``LlamaMLP`` write it (what eager torchtune/torchtitan keep too):
RMSNorm upcasts to fp32 in Python ops, RoPE rotates Q and K with ``rotate_half``, SwiGLU is
``silu(g) * u``. ``lora_dropout`` puts PEFT's dropout on each adapter's input.

One CPU-only difference remains: ``layer_norm`` on a bf16 CPU tensor keeps its mean and rstd in
bf16 (CUDA keeps fp32), 4 bytes per token and norm less than the model predicts.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpuscale.specs import ModelSpec


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, rstd = ctx.saved_tensors
        xhat = x.float() * rstd
        g = grad.float()
        gw = (g * xhat).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        gxhat = g * weight.float()
        gx = rstd * (gxhat - xhat * (gxhat * xhat).mean(-1, keepdim=True))
        return gx.to(x.dtype), gw, None


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5, *, eager: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps, self.eager = eps, eager

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.eager:
            return _RMSNormFn.apply(x, self.weight, self.eps)
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _SwiGLUFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate, up = ctx.saved_tensors
        g = gate.float()
        sig = torch.sigmoid(g)
        silu = g * sig
        d_gate = grad.float() * up.float() * (sig * (1 + g * (1 - sig)))
        return d_gate.to(gate.dtype), (grad.float() * silu).to(up.dtype)


def _dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return torch.native_dropout(x, p, training)[0] if p > 0 else x


class LoRALinear(nn.Module):
    """A frozen base linear plus a trainable ``B(A(x))`` adapter (Hu et al. 2021)."""

    def __init__(self, d_in: int, d_out: int, bias: bool, rank: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=bias)
        self.base.requires_grad_(False)
        self.lora_a = nn.Linear(d_in, rank, bias=False)
        self.lora_b = nn.Linear(rank, d_out, bias=False)
        self.p = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(_dropout(x, self.p, self.training)))


class Block(nn.Module):
    def __init__(
        self,
        m: ModelSpec,
        *,
        flash: bool,
        dropout: float,
        lora: dict[str, int] | None,
        eager: bool = False,
        lora_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.m, self.flash, self.p, self.eager = m, flash, dropout, eager
        if eager and m.position == "rope":
            angles = torch.outer(
                torch.arange(m.max_seq_len, dtype=torch.float32),
                1.0 / 10000 ** (torch.arange(0, m.head_dim, 2).float() / m.head_dim),
            )
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)
        norm = (
            (lambda: RMSNorm(m.hidden_size, eager=eager))
            if m.norm == "rmsnorm"
            else (lambda: nn.LayerNorm(m.hidden_size))
        )
        self.norm1, self.norm2 = norm(), norm()

        def linear(name: str, d_in: int, d_out: int, bias: bool) -> nn.Module:
            if lora is not None and name in lora:
                return LoRALinear(d_in, d_out, bias, lora[name], lora_dropout)
            layer = nn.Linear(d_in, d_out, bias=bias)
            if lora is not None:
                layer.requires_grad_(False)
            return layer

        h, q, kv, f = m.hidden_size, m.q_width, m.kv_width, m.ffn_hidden_size
        self.q = linear("q", h, q, m.qkv_bias)
        self.k = linear("k", h, kv, m.qkv_bias)
        self.v = linear("v", h, kv, m.qkv_bias)
        self.o = linear("o", q, h, m.linear_bias)
        if m.mlp == "gated":
            self.gate = linear("gate", h, f, m.linear_bias)
        self.up = linear("up", h, f, m.linear_bias)
        self.down = linear("down", f, h, m.linear_bias)
        if not flash:
            causal = torch.ones(m.max_seq_len, m.max_seq_len, dtype=torch.bool).triu(1)
            self.register_buffer("causal", causal, persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        m = self.m
        b, s, _ = x.shape
        q = self.q(x).view(b, s, m.num_heads, m.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, m.num_kv_heads, m.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, m.num_kv_heads, m.head_dim).transpose(1, 2)
        if self.eager and m.position == "rope":
            cos, sin = self.cos[:s].to(q.dtype), self.sin[:s].to(q.dtype)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
        if self.flash:
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=m.causal, enable_gqa=m.num_kv_heads != m.num_heads
            )
        else:
            groups = m.num_heads // m.num_kv_heads
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(m.head_dim))
            if m.causal:
                scores = scores.masked_fill(self.causal[:s, :s], float("-inf"))
            probs = _dropout(torch.softmax(scores, dim=-1), self.p, self.training)
            out = probs @ v
        return self.o(out.transpose(1, 2).reshape(b, s, m.q_width))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        if self.m.mlp == "gated" and self.eager:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        if self.m.mlp == "gated":
            return self.down(_SwiGLUFn.apply(self.gate(x), self.up(x)))
        return self.down(F.gelu(self.up(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + _dropout(self.attention(self.norm1(x)), self.p, self.training)
        return x + _dropout(self.mlp(self.norm2(x)), self.p, self.training)


class Transformer(nn.Module):
    """Embedding, ``num_layers`` blocks, final norm, output head, cross-entropy loss."""

    def __init__(
        self,
        m: ModelSpec,
        *,
        flash: bool = True,
        dropout: float = 0.0,
        lora: dict[str, int] | None = None,
        lora_head: int = 0,
        eager: bool = False,
        lora_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.m, self.p = m, dropout
        self.embed = nn.Embedding(m.vocab_size, m.hidden_size)
        if m.position == "learned":
            self.pos = nn.Embedding(m.max_seq_len, m.hidden_size)
            self.register_buffer("positions", torch.arange(m.max_seq_len), persistent=False)
        self.blocks = nn.ModuleList(
            Block(
                m, flash=flash, dropout=dropout, lora=lora, eager=eager, lora_dropout=lora_dropout
            )
            for _ in range(m.num_layers)
        )
        self.norm = (
            RMSNorm(m.hidden_size, eager=eager)
            if m.norm == "rmsnorm"
            else nn.LayerNorm(m.hidden_size)
        )
        self.head: nn.Module
        if lora is not None and lora_head:
            self.head = LoRALinear(m.hidden_size, m.vocab_size, False, lora_head)
        else:
            self.head = nn.Linear(m.hidden_size, m.vocab_size, bias=False)
        if m.tied_embeddings and isinstance(self.head, nn.Linear):
            self.head.weight = self.embed.weight
        if lora is not None:
            self.embed.requires_grad_(False)
            self.norm.requires_grad_(False)
            for block in self.blocks:
                block.norm1.requires_grad_(False)
                block.norm2.requires_grad_(False)
            if isinstance(self.head, nn.Linear):
                self.head.requires_grad_(False)
            if m.position == "learned":
                self.pos.requires_grad_(False)

    def forward(
        self, tokens: torch.Tensor, targets: torch.Tensor, *, recompute: bool = False
    ) -> torch.Tensor:
        s = tokens.shape[1]
        x = self.embed(tokens)
        if self.m.position == "learned":
            x = x + self.pos(self.positions[:s])
        x = _dropout(x, self.p, self.training)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True) if recompute else block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().reshape(-1, self.m.vocab_size), targets.reshape(-1))


def saved_activation_bytes(model: nn.Module, inputs: list[torch.Tensor], run: Any) -> int:
    """Bytes of distinct storages autograd keeps for backward while ``run()`` executes, leaving
    out parameters, buffers, the ``inputs`` (the batch) and 0-d scalars."""
    known = {
        t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), *inputs]
    }
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in known and t.dim() > 0:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    loss.backward()
    return sum(seen.values())
