"""Honest error bands: how far off the model was on published runs like this one that it had
never seen.

Bands come from the leave-one-source-out residuals of ``benchmarks/validate.py --write-bands``
(each row predicted with every fitted value refitted without its source), grouped into regimes
(hardware generation x parallelism mix x scale), stored in
``catalog/data/validation_bands.yaml``. A regime with few rows has no band of its own and gets
its parent's (wider population, e.g. ``hopper/fsdp`` for ``hopper/fsdp/>512``). A prediction
outside what was validated (another GPU generation, a larger model or GPU count,
mixture-of-experts) gets the widest band and a warning saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscale.catalog import validation_bands
from gpuscale.costmodel.params import total_params
from gpuscale.specs import Cluster, ModelSpec, Plan


def parallelism_mix(plan: Plan) -> str:
    """``fsdp`` (ZeRO-3 only), ``dp`` (replicas only), ``tp`` (tensor, no pipeline), ``tp+pp``."""
    if plan.pp > 1:
        return "tp+pp"
    if plan.tp > 1 or plan.cp > 1:
        return "tp"
    return "fsdp" if plan.zero == 3 else "dp"


def scale_bucket(num_gpus: int) -> str:
    if num_gpus <= 64:
        return "<=64"
    return "65-512" if num_gpus <= 512 else ">512"


def regime_key(generation: str, plan: Plan, num_gpus: int) -> str:
    return f"{generation}/{parallelism_mix(plan)}/{scale_bucket(num_gpus)}"


@dataclass(frozen=True, slots=True)
class Band:
    relative: float
    """Half-width of the band as a fraction of the prediction: the 80th percentile of
    |measured / predicted - 1| over the regime's leave-one-source-out residuals."""
    regime: str
    """Which validation regime the band comes from, with its row count."""
    warnings: tuple[str, ...] = field(default=())
    tokens_per_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "relative": self.relative,
            "regime": self.regime,
            "warnings": list(self.warnings),
            "tokens_per_s_low": self.tokens_per_s * (1 - self.relative),
            "tokens_per_s_high": self.tokens_per_s * (1 + self.relative),
        }

    def around(self, tokens_per_s: float) -> Band:
        return Band(self.relative, self.regime, self.warnings, tokens_per_s)

    def warn(self, warning: str) -> Band:
        return Band(self.relative, self.regime, (*self.warnings, warning), self.tokens_per_s)


def band_for(
    model: ModelSpec,
    cluster: Cluster,
    plan: Plan,
    framework: str,
    data: Mapping[str, Any] | None = None,
) -> Band:
    """The band of the closest validated regime, and warnings for every extrapolation.
    ``data``: a bands document (default: the shipped ``validation_bands.yaml``)."""
    data = validation_bands() if data is None else data
    regimes: dict[str, dict[str, float]] = data["regimes"]
    scope = data["validated"]
    generation = cluster.pace_device.generation
    warnings: list[str] = []
    if generation not in scope["generations"]:
        warnings.append(
            f"no published run on {generation} GPUs was validated "
            f"(validated: {', '.join(scope['generations'])}); extrapolating"
        )
    params_b = total_params(model) / 1e9
    if not scope["params_b"][0] <= params_b <= scope["params_b"][1]:
        warnings.append(
            f"model size {params_b:.1f}B is outside the validated "
            f"{scope['params_b'][0]}-{scope['params_b'][1]}B"
        )
    if not scope["gpus"][0] <= cluster.num_gpus <= scope["gpus"][1]:
        warnings.append(
            f"{cluster.num_gpus} GPUs is outside the validated "
            f"{scope['gpus'][0]}-{scope['gpus'][1]}"
        )
    if model.is_moe:
        warnings.append(
            # Held-out Megatron-Bridge runs (benchmarks/validate_bridge.py, docs/benchmarks.md
            # "Held-out training runs"): MoE throughput predicted too fast, dense runs not.
            "no mixture-of-experts run is in the band's runs; on held-out Megatron-Core MoE "
            "runs its throughput came out too high (benchmarks/validate_bridge.py)"
        )
    if cluster.inter.kind not in scope["fabrics"] and cluster.num_gpus > cluster.gpus_per_node:
        warnings.append(f"no run over {cluster.inter.kind} was validated")
    # generic is the base every validated framework profile refines: its curves are checked
    # through them, so only other unvalidated profiles are flagged.
    if framework not in (*scope["frameworks"], "generic"):
        warnings.append(f"framework profile '{framework}' has no validation rows")

    key = regime_key(generation, plan, cluster.num_gpus)
    for candidate in (key, f"{generation}/{parallelism_mix(plan)}", generation):
        if candidate in regimes and not warnings:
            r = regimes[candidate]
            return Band(
                float(r["p80_abs_error"]), f"{candidate}, {int(r['rows'])} runs", tuple(warnings)
            )
    overall = regimes["overall"]
    # Outside the validated ground the band is at least the worst regime's.
    widest = max(float(r["p80_abs_error"]) for r in regimes.values())
    relative = widest if warnings else float(overall["p80_abs_error"])
    return Band(relative, f"all validated runs ({int(overall['rows'])})", tuple(warnings))
