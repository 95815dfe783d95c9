"""``gpuscale advise-comm``: which DDP communication hook pays off for this model and network,
and by how much; plainly "none" when the step is not bandwidth-bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
from rich import box
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, inter_option, json_option, profile_options
from gpuscale.costmodel.collectives import LevelBandwidth
from gpuscale.costmodel.communication import exposed_comm_s
from gpuscale.costmodel.compute import microbatch_compute
from gpuscale.costmodel.grad_sync import HookOptions, SyncCost, sync_costs
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.step import estimate_plan
from gpuscale.errors import require
from gpuscale.specs import Plan, PlanBatch, Training
from gpuscale.specs.training import PRECISIONS

DEFAULT_GPU = "h100-sxm"


@dataclass(frozen=True, slots=True)
class HookRow:
    cost: SyncCost
    exposed_s: float
    step_s: float
    speedup: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "hook": self.cost.hook,
            "fidelity": self.cost.fidelity,
            "sync_s": self.cost.network_s,
            "codec_s": self.cost.codec_s,
            "exposed_sync_s": self.exposed_s,
            "step_time_s": self.step_s,
            "speedup_vs_default": self.speedup,
            "node_egress_bytes": self.cost.node_egress_bytes,
        }


def _verdict(
    rows: dict[str, HookRow], hidden_s: float, min_gain: float, multi_node: bool
) -> tuple[str | None, str]:
    """The hook to use (None: keep the default) and a sentence that says why."""
    base = rows["default"]
    sync = base.cost.network_s
    best = max(rows.values(), key=lambda r: r.speedup)
    hidden = sync <= hidden_s
    ceiling = base.step_s / (base.step_s - base.exposed_s)
    share = base.exposed_s / base.step_s
    if hidden:
        # Fully overlapped sync still slows the backward it shares the GPU with (profile
        # constant comm_compute_interference): fewer bytes can pay a little even here.
        head = (
            f"not bandwidth-bound: gradient sync ({_ms(sync)} ms) hides behind backward "
            f"({_ms(hidden_s)} ms of overlap) and costs only the slowdown of the compute it "
            f"shares the GPU with ({_ms(base.exposed_s)} ms, {share:.0%} of the step)"
        )
    else:
        where = "" if multi_node else " on one node"
        head = (
            f"bandwidth-bound{where}: gradient sync exposes {_ms(base.exposed_s)} ms "
            f"({share:.0%} of the step; free communication would give {ceiling:.2f}x)"
        )
    if best.speedup < 1.0 + min_gain:
        gain = (
            "no hook beats the default"
            if best.cost.hook == "default"
            else f"no hook gains {min_gain:.0%} (best: {best.cost.hook} {best.speedup:.2f}x)"
        )
        return None, f"{head}; {gain}; keep PyTorch's default all-reduce"
    # Prefer the most faithful hook within min_gain of the fastest one.
    rank = {"exact": 0, "16-bit": 1, "lossy": 2}
    pick = min(
        (r for r in rows.values() if r.speedup * (1.0 + min_gain) >= best.speedup),
        key=lambda r: (rank[r.cost.fidelity], -r.speedup),
    )
    text = (
        f"{head}; {pick.cost.hook} makes the step {pick.speedup:.2f}x faster "
        f"({_ms(base.step_s)} -> {_ms(pick.step_s)} ms)"
    )
    if pick.cost.fidelity == "lossy":
        safer = [
            r for r in rows.values() if r.cost.fidelity != "lossy" and r.cost.hook != "default"
        ]
        alt = max(safer, key=lambda r: r.speedup)
        text += (
            f"; it changes the mean gradient and relies on error feedback: compare the loss "
            f"curve with a default run (best non-lossy: {alt.cost.hook}, {alt.speedup:.2f}x)"
        )
    elif pick.cost.fidelity == "16-bit":
        text += "; gradients cross the wire rounded to 16 bits"
    return pick.cost.hook, text


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


@click.command("advise-comm")
@click.argument("model")
@click.option("--gpus", type=int, required=True, help="Data-parallel GPUs (one DDP replica each).")
@inter_option()
@click.option("--gpu", default=DEFAULT_GPU, show_default=True, help="Catalog GPU id.")
@click.option("--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True)
@click.option(
    "--nics-per-node",
    type=int,
    default=None,
    help="[default: one per GPU on RDMA fabrics, one per node on TCP Ethernet]",
)
@click.option(
    "--mbs", type=int, default=1, show_default=True, help="Micro-batch per GPU, sequences."
)
@click.option(
    "--gbs",
    type=int,
    default=None,
    help="Global batch, sequences [default: mbs x gpus]; more means gradient accumulation.",
)
@click.option("--seq", type=int, default=4096, show_default=True, help="Sequence length.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True)
@profile_options
@click.option(
    "--topk-ratio",
    type=float,
    default=0.01,
    show_default=True,
    help="Fraction of gradient entries top-k sends.",
)
@click.option("--qsgd-levels", type=int, default=127, show_default=True)
@click.option("--qsgd-chunk", type=int, default=512, show_default=True)
@click.option(
    "--min-gain",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.02,
    show_default=True,
    help="Smallest step speed-up worth a hook (0.02 = 2%).",
)
@json_option
def command(
    model: str,
    gpus: int,
    inter: str,
    gpu: str,
    gpus_per_node: int,
    nics_per_node: int | None,
    mbs: int,
    gbs: int | None,
    seq: int,
    precision: str,
    framework: str,
    profile_file: str | None,
    topk_ratio: float,
    qsgd_levels: int,
    qsgd_chunk: int,
    min_gain: float,
    as_json: bool,
) -> None:
    """Which DDP communication hook of gpuscale.runtime pays off for MODEL trained data-parallel
    on GPUS GPUs over the INTER fabric, and by how much.

    Prices PyTorch's default all-reduce, bf16 compression, hierarchical all-reduce (with and
    without bf16 across nodes), top-k and QSGD with the cost model, and says plainly when the
    step is not bandwidth-bound.
    """
    require(gpus >= 2, f"--gpus must be >= 2 for data parallelism, got {gpus}")
    require(mbs >= 1, f"--mbs must be >= 1, got {mbs}")
    require(min_gain >= 0, f"--min-gain must be >= 0, got {min_gain}")
    spec = catalog.model(model)
    options = HookOptions(topk_ratio=topk_ratio, qsgd_levels=qsgd_levels, qsgd_chunk=qsgd_chunk)
    plan = Plan(dp=gpus, micro_batch=mbs, global_batch=gbs if gbs is not None else mbs * gpus)
    cluster = catalog.cluster(
        gpu, gpus, gpus_per_node=gpus_per_node, inter=inter, nics_per_node=nics_per_node
    )
    training = Training(seq_len=seq, precision=precision)  # type: ignore[arg-type]
    profile = load_profile_for(framework, profile_file)

    est = estimate_plan(spec, cluster, training, plan, profile)
    backward = float(
        microbatch_compute(
            spec, cluster.pace_device, training, PlanBatch.from_plans([plan]), profile
        ).backward_s[0]
    )
    hidden = profile.overlap_of("dp") * backward
    interference = profile.const("comm_compute_interference")
    entry_bytes = profile.const("grad_reduce_bytes")
    entries = float(est.gradient_bytes_per_gpu[0]) / entry_bytes
    hbm = cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    costs = sync_costs(
        entries,
        entry_bytes,
        gpus,
        cluster.gpus_per_node,
        LevelBandwidth.of(cluster, profile),
        hbm,
        options,
    )

    step = float(est.step_time_s[0])
    rest = step - float(est.comm_dp_s[0])
    rows = {}
    for name, c in costs.items():
        exposed = float(exposed_comm_s(c.network_s, hidden, interference))
        step_h = rest + exposed + c.codec_s
        rows[name] = HookRow(cost=c, exposed_s=exposed, step_s=step_h, speedup=step / step_h)
    pick, verdict = _verdict(rows, hidden, min_gain, cluster.num_nodes > 1)
    document = {
        "model": spec.name,
        "gpu": cluster.device.id,
        "gpus": gpus,
        "gpus_per_node": cluster.gpus_per_node,
        "nodes": cluster.num_nodes,
        "inter": cluster.inter.id,
        "framework": framework,
        "profile": profile.name,
        "fits": bool(est.fits[0]),
        "memory_per_gpu_gib": float(est.memory_per_gpu_bytes[0]) / 2**30,
        "gradient_bytes": entries * entry_bytes,
        "backward_overlap_s": hidden,
        "step_time_s": step,
        "bandwidth_bound": rows["default"].cost.network_s > hidden,
        "recommendation": pick,
        "verdict": verdict,
        "hooks": [r.as_dict() for r in rows.values()],
        "options": {
            "topk_ratio": topk_ratio,
            "qsgd_levels": qsgd_levels,
            "qsgd_chunk": qsgd_chunk,
            "min_gain": min_gain,
        },
    }
    if as_json:
        emit_json(document)
        return
    _render(document)


def _render(doc: dict[str, Any]) -> None:
    title = (
        f"{doc['model']}: DDP on {doc['gpus']} x {doc['gpu']}, {doc['nodes']} "
        f"node{'s' if doc['nodes'] != 1 else ''} of "
        f"{doc['gpus_per_node']} over {doc['inter']}\ngradients {doc['gradient_bytes'] / 1e9:.2f} GB "
        f"per step; {doc['backward_overlap_s'] * 1e3:.1f} ms of backward hides sync; times in ms"
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("hook", "sync", "exposed", "codec", "step", "speed-up", "egress GB", "mean"):
        table.add_column(col, justify="left" if col == "hook" else "right", no_wrap=col == "hook")
    for r in doc["hooks"]:
        mark = "[bold]" if r["hook"] == doc["recommendation"] else ""
        end = "[/bold]" if mark else ""
        table.add_row(
            f"{mark}{r['hook']}{end}",
            _ms(r["sync_s"]),
            _ms(r["exposed_sync_s"]),
            _ms(r["codec_s"]),
            _ms(r["step_time_s"]),
            f"{mark}{r['speedup_vs_default']:.2f}x{end}",
            f"{r['node_egress_bytes'] / 1e9:.2f}",
            r["fidelity"],
        )
    console.print(table)
    if not doc["fits"]:
        console.print(
            f"[yellow]warning[/yellow] a DDP replica needs {doc['memory_per_gpu_gib']:.0f} GiB "
            f"per GPU, more than a {doc['gpu']} holds: shard it (gpuscale plan) before "
            "tuning DDP hooks"
        )
    console.print(f"verdict  {doc['verdict']}")
