"""How the disaggregated context servers' prompts spread over their attention-DP ranks in the
model, and whether the spread can explain their TTFT miss (issue 10, branch ``adp``).

Diagnostic only: nothing printed here is fed back into the model. The TensorRT-LLM H200 1k/1k
disaggregated rows miss TTFT by about 2.2x exactly where the context servers run attention DP
8. One candidate is the ranks' imbalance: each rank prefills its own prompts, the MoE layers
gather every rank's tokens in every layer, so an iteration lasts as long as its fullest rank,
and an idle rank runs a dummy request (``PyExecutor._pad_attention_dp_dummy_request``: "Pad
with a dummy request, if required, to ensure every attention_dp rank has at least one active
request"). TensorRT-LLM deals new requests to the ranks by count (``_balance_requests_across_
ranks``, a heap on the ranks' active tokens among those below the expected count), and the
model's closed loop (``disagg_closed_loop.simulate``) deals them round the ranks the same way
and prices every iteration at its fullest rank (``iteration_s(max(load))``) with every rank's
MoE tokens taken as the fullest rank's (``IterationModel`` group tokens ``attention_dp x
tokens``), while on Hopper the CUTLASS MoE gathers the ranks' actual tokens without padding
(``use_dp_padding`` only on SM120, ``modeling_deepseekv3.py``).

Per run (the distinct expressible TensorRT-LLM disaggregated rows) it follows the model's own
prediction, records every context iteration's prompt tokens per rank, and prints: iterations,
the fullest rank's tokens, the mean over ranks, their ratio (fullest / mean, 1 = balanced),
the share of rank-iterations that are idle (a dummy), the share of the MoE tokens the model
charges that are real (``sum / (ranks x fullest)``: below 1, the model over-charges the MoE),
and the measured / modelled TTFT. Then the medians per group (GPU, prompt length, the context
servers' attention-DP width).

    PYTHONPATH=src python benchmarks/adp_prefill_ranks.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuscale.planner.serving import deployment
from gpuscale.planner.serving.disagg_closed_loop import PrefillStage
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct
from validate_serving import ROWS, predict


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """The context iterations of one prediction."""

    row: ServingRow
    model_ttft_ms: float
    iterations: int
    fullest: float
    """Mean prompt tokens of the fullest rank per iteration."""
    mean: float
    """Mean prompt tokens per rank per iteration (idle ranks counted as 0)."""
    idle: float
    """Share of rank-iterations without a prompt (a dummy request under attention DP)."""
    moe_real: float
    """Prompt tokens the iterations carried over the MoE tokens the model charges them
    (``ranks x fullest`` each)."""

    @property
    def ratio(self) -> float:
        return self.fullest / max(self.mean, 1e-9)

    @property
    def ttft_ratio(self) -> float:
        return self.row.ttft_ms / self.model_ttft_ms


def spread(loads: list[list[float]]) -> tuple[float, float, float, float]:
    """(fullest, mean, idle share, real MoE share) of iterations given as tokens per rank."""
    if not loads:
        return 0.0, 0.0, 0.0, 1.0
    fullest = statistics.mean(max(x) for x in loads)
    mean = statistics.mean(sum(x) / len(x) for x in loads)
    idle = statistics.mean(sum(1 for v in x if v <= 0.0) / len(x) for x in loads)
    charged = sum(max(x) * len(x) for x in loads)
    real = sum(sum(x) for x in loads) / max(charged, 1e-9)
    return fullest, mean, idle, real


@contextmanager
def recording(into: list[list[float]]) -> Iterator[None]:
    """Every ``PrefillStage`` the assembly builds records its iterations' loads in ``into``."""
    original = deployment.PrefillStage

    def stage(**kwargs: Any) -> PrefillStage:
        return PrefillStage(**kwargs, on_iteration=lambda x: into.append(list(x)))

    deployment.PrefillStage = stage  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        deployment.PrefillStage = original  # type: ignore[misc]


def runs() -> list[Spread]:
    out = []
    for row in distinct(load(ROWS)):
        if row.raw["mode"] != "disagg" or row.raw["backend"] != "trtllm" or not row.expressible:
            continue
        loads: list[list[float]] = []
        with recording(loads):
            pred = predict(row)
        fullest, mean, idle, real = spread(loads)
        out.append(
            Spread(
                row=row,
                model_ttft_ms=float(pred["ttft_ms"]),
                iterations=len(loads),
                fullest=fullest,
                mean=mean,
                idle=idle,
                moe_real=real,
            )
        )
    return out


def _key(s: Spread) -> tuple[str, str, int]:
    return (s.row.raw["system"], s.row.raw["isl"], int(s.row.kwargs["prefill_attention_dp"]))


def main() -> None:
    found = runs()
    print(
        f"{'gpu':8} {'isl':>5} {'adp':>3} {'C':>5} {'iters':>6} | {'fullest':>8} {'mean':>8} "
        f"{'ratio':>5} {'idle':>5} {'moe real':>8} | {'TTFT m/p':>8}"
    )
    for s in sorted(found, key=lambda x: (_key(x), x.row.concurrency)):
        g, isl, adp = _key(s)
        print(
            f"{g[:8]:8} {isl:>5} {adp:>3} {s.row.concurrency:>5} {s.iterations:>6} | "
            f"{s.fullest:8.0f} {s.mean:8.0f} {s.ratio:5.2f} {s.idle:5.2f} {s.moe_real:8.2f} | "
            f"{s.ttft_ratio:8.2f}"
        )
    groups: dict[tuple[str, str, int], list[Spread]] = defaultdict(list)
    for s in found:
        groups[_key(s)].append(s)
    med = statistics.median
    print("\nby group (medians):")
    print(
        f"  {'gpu':8} {'isl':>5} {'adp':>3} {'runs':>4} | {'ratio':>5} {'idle':>5} "
        f"{'moe real':>8} | {'TTFT m/p':>8}"
    )
    for key in sorted(groups):
        v = groups[key]
        print(
            f"  {key[0][:8]:8} {key[1]:>5} {key[2]:>3} {len(v):>4} | "
            f"{med(x.ratio for x in v):5.2f} {med(x.idle for x in v):5.2f} "
            f"{med(x.moe_real for x in v):8.2f} | {med(x.ttft_ratio for x in v):8.2f}"
        )


if __name__ == "__main__":
    main()
