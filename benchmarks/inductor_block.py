"""Check the kernel tables of costmodel/fusion.py against PyTorch itself, on CPU.

    python benchmarks/inductor_block.py [--tokens 1024] [--hidden 512] [--json]

Builds torchtitan's Llama block (models/llama/model.py and models/norms.py, 2024: RMSNorm with
the fp32 upcast, complex rotary, repeat_kv, separate wq/wk/wv and w1/w3, SwiGLU, two residual
adds) at a small width and prints:

- eager: every ATen op autograd and the module run, forward and backward, with the bytes it
  reads and writes (a dispatch mode; matmuls, SDPA and views left out), summed in 2-byte vectors
  of the hidden width per token, next to ``fusion.EAGER_FORWARD``/``EAGER_BACKWARD`` at the same
  K/V and MLP ratios (the dispatch count reads a broadcast operand at its full size, so it sits
  a little above the table);
- compiled: the kernels ``torch.compile`` (Inductor, ``fullgraph=True``, as torchtitan compiles
  each block) generates for the forward and backward graphs, and the ATen kernels it falls back
  to, next to ``fusion.COMPILED_FORWARD``/``COMPILED_BACKWARD``'s kernel lists.

Inductor's grouping is the same scheduler on CPU and GPU (C++ instead of Triton kernels); the
bytes are the table's. On CPU (torch 2.13) the forward is the table's 9 kernels (7 generated,
the 2 ATen complex multiplies); the backward has 13 against the table's 11: a copy around the CPU
flash-attention backward and an ATen clone are CPU-only, the repeat_kv sum runs as one kernel
for dK and one for dV (same bytes), and each norm's input and weight gradients share a kernel
(the table counts them apart). Needs torch; about a minute on one core.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuscale.costmodel.fusion import (
    COMPILED_BACKWARD,
    COMPILED_FORWARD,
    EAGER_BACKWARD,
    EAGER_FORWARD,
    Kernel,
)

EXTERN = ("mm", "addmm", "bmm", "scaled_dot_product", "_efficient_attention", "_flash_attention")
VIEWS = (
    "detach", "t.", "view", "_unsafe_view", "expand", "transpose", "permute", "select", "slice",
    "unsqueeze", "squeeze", "split", "alias", "as_strided", "_reshape_alias", "empty", "ones_like",
    "new_empty", "new_zeros", "zeros_like", "_conj",
)  # fmt: skip


def _block(hidden: int, heads: int, kv_heads: int, ffn: int) -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    head_dim = hidden // heads

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.float()
            y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)
            return y.type_as(x) * self.weight

    def rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
        c = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        c = c * freqs.view(1, c.shape[1], 1, c.shape[-1])
        return torch.view_as_real(c).flatten(3).type_as(x)

    def repeat_kv(x: torch.Tensor) -> torch.Tensor:
        b, s, h, d = x.shape
        n = heads // kv_heads
        return x[:, :, :, None, :].expand(b, s, h, n, d).reshape(b, s, h * n, d)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq = nn.Linear(hidden, hidden, bias=False)
            self.wk = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(hidden, hidden, bias=False)
            self.w1 = nn.Linear(hidden, ffn, bias=False)
            self.w3 = nn.Linear(hidden, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden, bias=False)
            self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()

        def forward(self, x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            y = self.attention_norm(x)
            q = rope(self.wq(y).view(b, t, heads, head_dim), freqs)
            k = rope(self.wk(y).view(b, t, kv_heads, head_dim), freqs)
            v = self.wv(y).view(b, t, kv_heads, head_dim)
            k, v = repeat_kv(k), repeat_kv(v)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            h = x + self.wo(o.transpose(1, 2).contiguous().view(b, t, hidden))
            z = self.ffn_norm(h)
            return h + self.w2(F.silu(self.w1(z)) * self.w3(z))

    return Block().to(torch.bfloat16)


def _eager_bytes(block: Any, x: Any, freqs: Any) -> tuple[float, int, float, int]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.bytes, self.kernels = 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            name = func.__name__
            if any(e in name for e in EXTERN) or name.startswith(VIEWS):
                return out
            ins = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            ptrs = {a.untyped_storage().data_ptr() for a in ins}
            outs = [
                o
                for o in tree_leaves(out)
                if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() not in ptrs
            ]
            if outs:
                self.bytes += sum(a.numel() * a.element_size() for a in ins + outs)
                self.kernels += 1
            return out

    with Count() as fwd:
        out = block(x, freqs)
    with Count() as bwd:
        out.float().sum().backward()
    return fwd.bytes, fwd.kernels, bwd.bytes, bwd.kernels


def _compiled_kernels(block: Any, x: Any, freqs: Any) -> list[list[str]]:
    import torch
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(block, fullgraph=True)

    def step() -> None:
        compiled(x, freqs).float().sum().backward()

    _, codes = run_and_get_code(step)
    # Calls only (a kernel's definition is "name = async_compile...", not "name(").
    calls = r"^\s+(?:\w+ = )?(cpp_fused_\w+|triton_\w+|extern_kernels\.\w+|torch\.ops\.aten\.\w+)(?:\.\w+)?\("
    graphs = []
    for code in codes:
        names = re.findall(calls, code, re.M)
        graphs.append(
            [
                n
                for n in names
                if not n.startswith("extern_kernels")
                and not (
                    n.startswith("torch.ops")
                    and any(v in n for v in ("view", "reshape", "_conj", "scaled_dot", "empty"))
                )
            ]
        )
    return graphs


def _table(kernels: tuple[Kernel, ...], kv: float, ffn: float) -> float:
    return sum(k.hidden + kv * k.kv + ffn * k.ffn for k in kernels)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("needs torch", file=sys.stderr)
        return 2
    import warnings

    warnings.filterwarnings("ignore")  # Inductor's complex-operator fallback warning
    torch.manual_seed(0)
    heads, kv_heads, ffn = 8, 2, 3 * args.hidden  # Llama 3's K/V share (8 of 32) and MLP ratio
    head_dim = args.hidden // heads
    freqs = torch.polar(
        torch.ones(args.tokens, head_dim // 2), torch.randn(args.tokens, head_dim // 2)
    )
    x = torch.randn(1, args.tokens, args.hidden, dtype=torch.bfloat16, requires_grad=True)
    unit = 2.0 * args.tokens * args.hidden
    kv, ratio = kv_heads / heads, ffn / args.hidden
    fb, fk, bb, bk = _eager_bytes(_block(args.hidden, heads, kv_heads, ffn), x, freqs)
    graphs = _compiled_kernels(_block(args.hidden, heads, kv_heads, ffn), x, freqs)
    doc = {
        "eager_forward_vectors": {"torch": fb / unit, "table": _table(EAGER_FORWARD, kv, ratio)},
        "eager_backward_vectors": {"torch": bb / unit, "table": _table(EAGER_BACKWARD, kv, ratio)},
        "eager_forward_kernels": {"torch": fk, "table": len(EAGER_FORWARD)},
        "eager_backward_kernels": {"torch": bk, "table": len(EAGER_BACKWARD)},
        "compiled_forward_kernels": {"torch": graphs[0], "table": len(COMPILED_FORWARD)},
        "compiled_backward_kernels": {
            "torch": graphs[1] if len(graphs) > 1 else [],
            "table": len(COMPILED_BACKWARD),
        },
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for key, value in doc.items():
        torch_side = value["torch"]
        if isinstance(torch_side, list):
            print(f"{key:28s} torch {len(torch_side):3d}  table {value['table']:3d}")
            for name in torch_side:
                print(f"    {name}")
        else:
            print(f"{key:28s} torch {torch_side:7.1f}  table {value['table']:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
