"""``advise_comm``: which DDP communication hook pays off, as ``gpuscale advise-comm`` answers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.api.training import FabricArg, GpuArg, ModelArg, gpu_count
from gpuscale.costmodel.grad_sync import HookOptions
from gpuscale.costmodel.profile import load_training_profile
from gpuscale.errors import require
from gpuscale.planner.comm_hooks import HookAdvice, advise_hooks
from gpuscale.specs import Cluster, Plan, Training
from gpuscale.specs.training import TrainPrecision
from gpuscale.specs.units import GIB

__all__ = ["AdviseCommResult", "advise_comm"]

DEFAULT_GPU = "h100-sxm"


@dataclass(frozen=True, kw_only=True, slots=True)
class AdviseCommResult:
    """Every hook priced for one DDP job, and the one to use (``gpuscale advise-comm --json``)."""

    model: str
    cluster: Cluster
    framework: str
    profile: str
    advice: HookAdvice
    options: HookOptions
    min_gain: float

    @property
    def recommendation(self) -> str | None:
        """The hook to use; ``None``: keep PyTorch's default all-reduce."""
        return self.advice.recommendation

    @property
    def verdict(self) -> str:
        return self.advice.verdict

    def to_dict(self) -> dict[str, Any]:
        a, c = self.advice, self.cluster
        return document(
            {
                "model": self.model,
                "gpu": c.device.id,
                "gpus": c.num_gpus,
                "gpus_per_node": c.gpus_per_node,
                "nodes": c.num_nodes,
                "inter": c.inter.id,
                "framework": self.framework,
                "profile": self.profile,
                "fits": a.fits,
                "memory_per_gpu_gib": a.memory_per_gpu_bytes / GIB,
                "gradient_bytes": a.gradient_bytes,
                "backward_overlap_s": a.backward_overlap_s,
                "step_time_s": a.step_s,
                "bandwidth_bound": a.bandwidth_bound,
                "recommendation": a.recommendation,
                "verdict": a.verdict,
                "hooks": [
                    {
                        "hook": r.cost.hook,
                        "fidelity": r.cost.fidelity,
                        "sync_s": r.cost.network_s,
                        "codec_s": r.cost.codec_s,
                        "exposed_sync_s": r.exposed_s,
                        "step_time_s": r.step_s,
                        "speedup_vs_default": r.speedup,
                        "node_egress_bytes": r.cost.node_egress_bytes,
                    }
                    for r in a.rows.values()
                ],
                "options": {
                    "topk_ratio": self.options.topk_ratio,
                    "qsgd_levels": self.options.qsgd_levels,
                    "qsgd_chunk": self.options.qsgd_chunk,
                    "min_gain": self.min_gain,
                },
            }
        )

    def figures(self) -> list[Any]:
        from gpuscale.report.advise import hooks_figure

        return [hooks_figure(self.advice, self.model)]


@checks_arguments
def advise_comm(
    model: ModelArg,
    *,
    gpus: int,
    inter: FabricArg = catalog.DEFAULT_INTER,
    gpu: GpuArg = DEFAULT_GPU,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    mbs: int = 1,
    gbs: int | None = None,
    seq: int = 4096,
    precision: str = "bf16",
    framework: str = "generic",
    profile: str | Path | None = None,
    topk_ratio: float = 0.01,
    qsgd_levels: int = 127,
    qsgd_chunk: int = 512,
    min_gain: float = 0.02,
) -> AdviseCommResult:
    """Which DDP communication hook of :mod:`gpuscale.runtime` pays off for ``model`` trained
    data-parallel on ``gpus`` GPUs, and by how much (``None`` when none gains ``min_gain``).

    ``gbs`` defaults to ``mbs x gpus`` (one micro-batch per replica, no accumulation: the case
    where gradient sync weighs most)."""
    require(gpus >= 2, f"--gpus must be >= 2 for data parallelism, got {gpus}", field="gpus")
    gpu_count(gpus, "gpus")
    require(mbs >= 1, f"--mbs must be >= 1, got {mbs}", field="mbs")
    require(
        0 <= min_gain < 1, f"--min-gain must be 0 to 1 (excluded), got {min_gain}", field="min_gain"
    )
    spec = catalog.model(model)
    options = HookOptions(topk_ratio=topk_ratio, qsgd_levels=qsgd_levels, qsgd_chunk=qsgd_chunk)
    plan = Plan(dp=gpus, micro_batch=mbs, global_batch=gbs if gbs is not None else mbs * gpus)
    cluster = catalog.cluster(
        gpu, gpus, gpus_per_node=gpus_per_node, inter=inter, nics_per_node=nics_per_node
    )
    training = Training(seq_len=seq, precision=cast(TrainPrecision, precision))
    prof = load_training_profile(framework, None if profile is None else str(profile))
    advice = advise_hooks(spec, cluster, training, plan, prof, options, min_gain=min_gain)
    return AdviseCommResult(
        model=spec.name,
        cluster=cluster,
        framework=framework,
        profile=prof.name,
        advice=advice,
        options=options,
        min_gain=min_gain,
    )
