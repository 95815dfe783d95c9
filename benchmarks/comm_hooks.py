"""Gradient-sync hooks on a two-node network testbed: step time, bytes over the slow link,
speed-up over PyTorch's default DDP, and what each hook does to the loss.

    sudo python benchmarks/comm_hooks.py [--rates 100mbit,1gbit,unthrottled] [--steps 6] [--json]

Two network namespaces play two nodes joined by one veth pair; ``tc tbf`` shapes both
directions of the pair to each rate in turn (``unthrottled`` leaves it at veth speed, where the
CPU, not the wire, is the limit). Each node runs ``torchrun --nproc-per-node 2`` with
``GLOO_SOCKET_IFNAME`` on its veth end, so ranks of one node talk through the kernel's local
path and only cross-node traffic meets the shaped link. Every hook trains the same small GPT
(same seed, same data) for ``--warmup`` + ``--steps`` steps; step time is the mean of the
measured steps; slow-link bytes are the veth transmit counters of both ends over those steps.

Compared: PyTorch's default DDP all-reduce, its ``fp16_compress_hook`` and PowerSGD (rank 4,
error feedback), and every gpuscale hook. Targets (issue 5), on the 100 Mbit/s link:
hierarchical >= 1.4x the default, hierarchical+bf16 >= 2.5x, loss unchanged within tolerance.

Needs root (namespaces, tc); elsewhere prints ``skipped: <reason>`` and exits 0. The testbed
(``two_node_testbed.py``) uses only 10.77.0.0/30 inside namespaces it creates and removes them on
exit, on error, on SIGINT/SIGTERM/SIGHUP and on timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from two_node_testbed import ADDRESSES, Testbed, testbed_guard, why_not

SCHEMA_VERSION = 1
PORT = 29500
NPROC_PER_NODE = 2
RATES = ("100mbit", "1gbit", "unthrottled")
TORCH_HOOKS = ("default", "torch-fp16", "torch-powersgd")
GPUSCALE_HOOKS = (
    "hierarchical",
    "hierarchical+bf16",
    "hierarchical+fp16",
    "bf16",
    "fp16",
    "topk",
    "qsgd",
)
HOOKS = TORCH_HOOKS + GPUSCALE_HOOKS
TARGETS = {"100mbit": {"hierarchical": 1.4, "hierarchical+bf16": 2.5}}


# --------------------------------------------------------------------------- testbed (parent)


def run_rate(bed: Testbed, rate: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One torchrun per namespace; return rank 0's measurements at ``rate``."""
    bed.shape(rate)
    result = out / f"{rate}.json"
    worker = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        str(NPROC_PER_NODE),
        "--master-addr",
        ADDRESSES[0],
        "--master-port",
        str(PORT),
    ]
    script = [
        str(Path(__file__).resolve()),
        "--worker",
        "--out",
        str(result),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--hooks",
        ",".join(args.hooks),
        "--model",
        args.model,
        "--bucket-mb",
        str(args.bucket_mb),
    ]
    logs = [out / f"{rate}-node{node}.log" for node in range(len(bed.namespaces))]
    for node, log in enumerate(logs):
        env = {"GPUSCALE_BENCH_IFACE": bed.interfaces[node], "PYTHONUNBUFFERED": "1"}
        bed.spawn(node, [*worker, "--node-rank", str(node), *script], log, env)
    deadline = time.monotonic() + args.timeout
    try:
        # a failed node leaves the other's torchrun waiting in its exit barrier: stop at the
        # first failure instead of at the deadline
        while any(c.poll() is None for c in bed.children) and not any(
            c.poll() for c in bed.children
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"comm_hooks: {rate} passed --timeout {args.timeout:.0f}s")
            time.sleep(0.2)
    finally:
        codes = [c.poll() for c in bed.children]
        bed.reap()
    if any(codes) or not result.exists():
        tails = "\n".join(
            f"--- node {n} ---\n" + log.read_text(errors="replace")[-6000:]
            for n, log in enumerate(logs)
        )
        raise SystemExit(f"comm_hooks: {rate} run failed (exit codes {codes}):\n{tails}")
    return json.loads(result.read_text())


# --------------------------------------------------------------------------- worker (torchrun)

MODELS = {
    # vocab, width, layers, heads, sequence, sequences per rank
    "gpt-3m": (512, 256, 4, 4, 64, 4),
    "gpt-tiny": (128, 64, 1, 2, 16, 2),
}


def _veth_bytes() -> int:
    """Bytes this namespace's veth end has transmitted (/proc/net/dev is per network namespace)."""
    dev = os.environ["GPUSCALE_BENCH_IFACE"]
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == dev:
            return int(counters.split()[8])
    raise RuntimeError(f"{dev} not in /proc/net/dev")


def _fifo(hook: Any) -> Any:
    """Run ``hook`` one bucket at a time on a worker thread.

    PowerSGD issues its second and third all-reduce from the completion callbacks of the first;
    with several buckets in flight those callbacks interleave differently on different ranks,
    and gloo aborts ("collective mismatch"). NCCL orders them on one stream; here a FIFO thread
    (gpuscale's CommWorker) does, and backward still overlaps."""
    from gpuscale.runtime.hooks._worker import CommWorker

    thread = CommWorker("powersgd")

    def serialized(state, bucket):  # unannotated: DDP checks a hook's annotations
        return thread.submit(lambda: hook(state, bucket).wait())

    return serialized


def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel

    from gpuscale.runtime import build_groups, register_hook

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    groups = build_groups()
    vocab, width, layers, heads, seq, batch = MODELS[args.model]

    class TinyGPT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            self.pos = torch.nn.Parameter(torch.zeros(seq, width))
            block = torch.nn.TransformerEncoderLayer(
                width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True
            )
            self.blocks = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, vocab, bias=False)
            self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.blocks(self.embed(tokens) + self.pos, mask=self.mask, is_causal=True)
            return self.head(h)

    # A learnable stream: each next token is a fixed random function of the previous one,
    # with 10% noise, so the loss falls from ln(vocab) during the run.
    table = torch.randint(vocab, (vocab,), generator=torch.Generator().manual_seed(7))

    def batch_for(step: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(1000 * step + rank)
        tokens = torch.empty(batch, seq + 1, dtype=torch.long)
        tokens[:, 0] = torch.randint(vocab, (batch,), generator=gen)
        for t in range(seq):
            noise = torch.randint(vocab, (batch,), generator=gen)
            keep = torch.rand(batch, generator=gen) > 0.1
            tokens[:, t + 1] = torch.where(keep, table[tokens[:, t]], noise)
        return tokens

    data = [batch_for(s) for s in range(args.warmup + args.steps)]
    results: dict[str, Any] = {}
    for name in args.hooks.split(","):
        torch.manual_seed(0)
        model = TinyGPT()
        ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
        if name == "torch-fp16":
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif name == "torch-powersgd":
            state = powerSGD_hook.PowerSGDState(
                process_group=None, matrix_approximation_rank=4, start_powerSGD_iter=2
            )
            ddp.register_comm_hook(state, _fifo(powerSGD_hook.powerSGD_hook))
        elif name != "default":
            register_hook(ddp, name, groups)
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)

        def step(tokens: torch.Tensor, ddp: Any = ddp, opt: Any = opt) -> float:
            opt.zero_grad(set_to_none=True)
            logits = ddp(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1)
            )
            loss.backward()
            opt.step()
            return float(loss.detach())

        for s in range(args.warmup):
            step(data[s])
        dist.barrier()
        sent = _veth_bytes() if local_rank == 0 else 0
        start = time.perf_counter()
        losses = [step(data[args.warmup + s]) for s in range(args.steps)]
        dist.barrier()
        elapsed = time.perf_counter() - start
        sent = (_veth_bytes() - sent) if local_rank == 0 else 0
        summary = torch.tensor(
            [float(sent), losses[-1] / world, elapsed / world], dtype=torch.float64
        )
        dist.all_reduce(summary)
        results[name] = {
            "step_time_s": float(summary[2]) / args.steps,
            "slow_link_bytes": float(summary[0]) / args.steps,
            "final_loss": float(summary[1]),
        }
    if rank == 0:
        params = sum(p.numel() for p in TinyGPT().parameters())
        Path(args.out).write_text(json.dumps({"params": params, "world": world, "hooks": results}))
    dist.barrier()
    dist.destroy_process_group()
    # Skip interpreter teardown: on the shaped link a rank once aborted there ("terminate
    # called without an active exception") after its results were in, failing the whole run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------------------- report


def summarize(raw: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    for rate, run in raw.items():
        hooks = run["hooks"]
        base = hooks.get("default")
        rows = {}
        for name, r in hooks.items():
            rows[name] = {
                "step_time_s": r["step_time_s"],
                "speedup_vs_default": base["step_time_s"] / r["step_time_s"] if base else None,
                "slow_link_bytes": r["slow_link_bytes"],
                "final_loss": r["final_loss"],
                "final_loss_delta": (r["final_loss"] - base["final_loss"]) / base["final_loss"]
                if base
                else None,
            }
        rates[rate] = rows
    return rates


def _print_table(rates: dict[str, Any], meta: dict[str, Any]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for rate, rows in rates.items():
        table = Table(
            title=f"{rate}: {meta['world']} ranks as 2 nodes x {NPROC_PER_NODE}, "
            f"{meta['model']} ({meta['params'] / 1e6:.2f} M params)",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        for col in ("hook", "step s", "speed-up", "link MB", "loss", "loss delta", "target"):
            table.add_column(
                col, justify="left" if col == "hook" else "right", no_wrap=col == "hook"
            )
        for name, r in rows.items():
            target = TARGETS.get(rate, {}).get(name)
            verdict = ""
            if target is not None and r["speedup_vs_default"] is not None:
                verdict = f">= {target}x {'met' if r['speedup_vs_default'] >= target else 'MISSED'}"
            speed = r["speedup_vs_default"]
            delta = r["final_loss_delta"]
            table.add_row(
                name,
                f"{r['step_time_s']:.3f}",
                "" if speed is None else f"{speed:.2f}x",
                f"{r['slow_link_bytes'] / 1e6:.2f}",
                f"{r['final_loss']:.4f}",
                "" if delta is None else f"{delta:+.2%}",
                verdict,
            )
        console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rates",
        default=",".join(RATES),
        help="comma-separated tc rates (e.g. 100mbit, 1gbit) or 'unthrottled'",
    )
    parser.add_argument(
        "--hooks", default=",".join(HOOKS), help=f"comma-separated, from {', '.join(HOOKS)}"
    )
    parser.add_argument("--steps", type=int, default=6, help="measured steps per hook")
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="unmeasured steps per hook (DDP rebuilds buckets after the first)",
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt-3m")
    parser.add_argument(
        "--bucket-mb",
        type=float,
        default=25.0,
        help="DDP bucket_cap_mb for every hook (25 is PyTorch's default)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per link rate")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    args.hooks = [h for h in args.hooks.split(",") if h]
    unknown_hooks = sorted(set(args.hooks) - set(HOOKS))
    if unknown_hooks:
        parser.error(f"unknown hooks {unknown_hooks}; known: {', '.join(HOOKS)}")
    if "default" not in args.hooks:
        args.hooks.insert(0, "default")
    rates = [r for r in args.rates.split(",") if r]
    for rate in rates:
        if rate != "unthrottled" and not any(
            rate.endswith(u) and rate[: -len(u)].replace(".", "", 1).isdigit()
            for u in ("kbit", "mbit", "gbit")
        ):
            parser.error(f"rate '{rate}' is not like 100mbit, 1gbit or 'unthrottled'")
    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be >= 1")

    with testbed_guard() as bed:
        reason = why_not(bed, tools=("ip", "tc", "torchrun"))
        if reason is not None:
            if args.json:
                print(json.dumps({"schema_version": SCHEMA_VERSION, "skipped": reason}))
            else:
                print(f"skipped: {reason}")
            return 0
        raw: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="gsbench-") as tmp:
            for rate in rates:
                if not args.json:
                    print(f"running {rate} ...", file=sys.stderr, flush=True)
                raw[rate] = run_rate(bed, rate, args, Path(tmp))
    first = next(iter(raw.values()))
    meta = {
        "model": args.model,
        "params": first["params"],
        "world": first["world"],
        "steps": args.steps,
        "warmup": args.warmup,
        "bucket_mb": args.bucket_mb,
        "command": " ".join(
            ["python", "benchmarks/comm_hooks.py", *(argv if argv is not None else sys.argv[1:])]
        ),
    }
    rates_out = summarize(raw)
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, **meta, "rates": rates_out}, indent=2))
    else:
        _print_table(rates_out, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
