"""Do disaggregated requests wait for a decode slot before their first token? The decode
workers' running cap against the client's concurrency, read from the recipes and checked on
the measured rows with Little's law (issue 10, branch ``disagg-ttft``).

Diagnostic only: nothing in the model changes and no figure printed here is fed back into it.
A request of a Dynamo + TensorRT-LLM (or SGLang) disaggregated deployment gets its first token
only once a decode worker has admitted it (the decode executor returns the context phase's
token when it schedules the request, ``PyExecutor._handle_first_token_response``), so a
request that finds every decode slot taken waits in TTFT. The slots are the recipe's decode
``max_batch_size`` per attention-DP rank times the ranks times the decode workers
(``serving_recipes._decode_cap``: data/validation/serving/inferencex_disagg_recipes.csv).

Little's law on a closed loop of ``C`` clients (each either before its first token or
decoding): ``C = lam (TTFT + D)`` with ``D = (OSL - 1) x TPOT`` the decode time, and the
requests decoding, ``lam D``, never exceed the slots. Hence, from the measured TTFT and TPOT
alone, the slots' measured occupancy ``lam D / slots`` (at most 1: a check of the recipe
reading on every row), and the TTFT the slots force at that TPOT,
``max(C / slots - 1, 0) x D``, a lower bound of the measured TTFT, reached when the slots are
always full (``slot_wait_s``). A run whose occupancy is near 1 was bound by its decode slots:
its TTFT is the wait for a slot, set by the decode time, so a TTFT miss there is the model's
TPOT miss. A run far below 1 never queued for a slot: its TTFT is spent before the decode
workers (prefill workers, hand-off).

Per run it prints the concurrency, the slots, the measured and modelled occupancy, the
measured/modelled TTFT and TPOT, and ``TTFT'``: the model's TTFT with its decode-slot queue
(the ``queue`` part of its ``TTFT parts`` note, on the runs whose modelled occupancy says the
slots bind) re-priced at the measured TPOT, to first order ``queue x measured / modelled TPOT``
(the queue of a slot-bound closed loop is ``(C / slots - 1)`` decode times). Then the groups (engine, GPU, prompt length, the context servers' attention-DP width,
bound by the slots or not) with their medians, and the disaggregated TTFT error with and without that
re-pricing.

Last, with ``--allgather``, the TensorRT-LLM MoE communication under attention DP before and
after it was shipped (branch ``adp``): TensorRT-LLM's CUTLASS MoE, which every InferenceX
TensorRT-LLM recipe selects (``moe_config.backend: CUTLASS``), runs under attention DP as an
all-gather of every rank's hidden states before the experts and a reduce-scatter of their
output after (``fused_moe_cutlass.py`` ``forward_chunk``/``reducescatter_or_allreduce`` at
000a01de: DeepSeek's FP8 block-scale inputs are gathered in BF16 and quantized inside
``fused_moe``; the all-to-all path needs MNNVL, which Hopper lacks). The model now prices it so
(``IterationModel.moe_gather_scatter``); the comparison prices those layers as the all-to-all
of each token's top-k copies the model used before (:func:`alltoall_moe`) and prints the
TTFT/TPOT errors of the TensorRT-LLM rows, disaggregated and aggregated, with both.

    PYTHONPATH=src python benchmarks/disagg_decode_slots.py [--allgather]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from disagg_ttft_parts import PARTS
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct
from validate_serving import ROWS, predict

SLOT_BOUND = 0.9
"""Measured occupancy from which a run is read as bound by its decode slots (a reading of the
printout, not a model input: the bound runs sit at 0.92-1.02, the others at or below 0.89)."""


def decode_slots(kwargs: dict[str, Any]) -> int | None:
    """Requests the decode workers run at once: the recipe's ``max_batch_size`` per attention-DP
    rank x ranks x workers; None where the row carries no decode cap."""
    cap = kwargs.get("decode_batch")
    if not cap:
        return None
    return int(kwargs["decode_workers"]) * int(kwargs["decode_attention_dp"]) * int(cap)


def decode_s(output_len: float, tpot_ms: float) -> float:
    """A request's decode time: ``OSL - 1`` inter-token intervals (TPOT excludes the first)."""
    return max(output_len - 1.0, 0.0) * tpot_ms / 1e3


def occupancy(concurrency: float, ttft_s: float, decoding_s: float, slots: int) -> float:
    """Share of the decode slots in use on average: Little's law, ``lam = C / (TTFT + D)`` and
    ``lam D`` requests decoding, over the slots."""
    return concurrency * decoding_s / (ttft_s + decoding_s) / slots


def slot_wait_s(concurrency: float, slots: int, decoding_s: float) -> float:
    """The TTFT a closed loop of ``concurrency`` clients must show when at most ``slots`` decode
    at once, each for ``decoding_s``: ``(C / slots - 1) D`` (Little's law with every slot full;
    a lower bound when they are not)."""
    return max(concurrency / slots - 1.0, 0.0) * decoding_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    row: ServingRow
    slots: int
    model_ttft_ms: float
    model_tpot_ms: float
    queue_ms: float
    """The model's decode-slot queue (``TTFT parts`` note)."""

    @property
    def occ_measured(self) -> float:
        d = decode_s(self.row.kwargs["output_len"], self.row.tpot_ms)
        return occupancy(self.row.concurrency, self.row.ttft_ms / 1e3, d, self.slots)

    @property
    def occ_model(self) -> float:
        d = decode_s(self.row.kwargs["output_len"], self.model_tpot_ms)
        return occupancy(self.row.concurrency, self.model_ttft_ms / 1e3, d, self.slots)

    @property
    def bound(self) -> bool:
        return self.occ_measured >= SLOT_BOUND

    @property
    def repriced_ttft_ms(self) -> float:
        """The model's TTFT with its decode-slot queue at the measured TPOT (first order), where
        the model's own slots bind (modelled occupancy >= :data:`SLOT_BOUND`); elsewhere its
        queue is the prefill workers' (a closed loop past their capacity) and is left as is."""
        if self.occ_model < SLOT_BOUND:
            return self.model_ttft_ms
        return self.model_ttft_ms + self.queue_ms * (self.row.tpot_ms / self.model_tpot_ms - 1.0)

    @property
    def lower_bound_ms(self) -> float:
        d = decode_s(self.row.kwargs["output_len"], self.row.tpot_ms)
        return slot_wait_s(self.row.concurrency, self.slots, d) * 1e3


def runs() -> tuple[list[Run], list[ServingRow]]:
    """The distinct expressible disaggregated rows with a decode cap, and those without one."""
    out: list[Run] = []
    uncapped: list[ServingRow] = []
    for row in distinct(load(ROWS)):
        if row.raw["mode"] != "disagg" or not row.expressible:
            continue
        slots = decode_slots(row.kwargs)
        if slots is None:
            uncapped.append(row)
            continue
        pred = predict(row)
        parts = next((m for n in pred["notes"] if (m := PARTS.search(n))), None)
        queue = float(parts.group(5)) if parts else 0.0
        out.append(
            Run(
                row=row,
                slots=slots,
                model_ttft_ms=float(pred["ttft_ms"]),
                model_tpot_ms=float(pred["tpot_ms"]),
                queue_ms=queue,
            )
        )
    return out, uncapped


def _key(run: Run) -> tuple[str, str, str, str, str]:
    """(engine, GPU, prompt length, context servers' attention-DP width, bound or not)."""
    r, kw = run.row.raw, run.row.kwargs
    ctx = f"adp{kw['prefill_attention_dp']}" if kw["prefill_attention_dp"] > 1 else "tp"
    return (r["backend"], r["system"], r["isl"], ctx, "slots" if run.bound else "before")


def _err(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    e = [abs(p / m - 1.0) * 100.0 for m, p in pairs]
    return statistics.mean(e), statistics.median(e)


def main() -> None:
    found, uncapped = runs()
    print(
        f"{'engine':7} {'gpu':8} {'isl':>5} {'C':>5} {'slots':>6} {'C/slot':>6} | "
        f"{'occ meas':>8} {'model':>5} | {'TTFT m/p':>8} {'TPOT m/p':>8} | "
        f"{'queue ms':>8} {'TTFT lb ms':>10} {'meas ms':>8} {'TTFT` m/p':>9}"
    )
    for run in sorted(found, key=lambda x: (_key(x)[:4], x.row.concurrency)):
        r = run.row.raw
        print(
            f"{r['backend']:7} {r['system'][:8]:8} {r['isl']:>5} {run.row.concurrency:>5} "
            f"{run.slots:>6} {run.row.concurrency / run.slots:6.2f} | "
            f"{run.occ_measured:8.2f} {run.occ_model:5.2f} | "
            f"{run.row.ttft_ms / run.model_ttft_ms:8.2f} {run.row.tpot_ms / run.model_tpot_ms:8.2f} | "
            f"{run.queue_ms:8.0f} {run.lower_bound_ms:10.0f} {run.row.ttft_ms:8.0f} "
            f"{run.row.ttft_ms / run.repriced_ttft_ms:9.2f}"
        )
    print(f"\n({len(uncapped)} runs carry no decode cap and are left out: SGLang stated rows)")
    groups: dict[tuple[str, str, str, str, str], list[Run]] = defaultdict(list)
    for run in found:
        groups[_key(run)].append(run)
    print(
        "\nby group (bound: measured occupancy >= "
        f"{SLOT_BOUND}; 'before': the time went before the decode slots):"
    )
    print(
        f"  {'engine':7} {'gpu':8} {'isl':>5} {'ctx':5} {'bound':6} {'runs':>4} {'C/slot':>6} "
        f"{'occ meas':>8} {'TTFT m/p':>8} {'TPOT m/p':>8} {'TTFT` m/p':>9}"
    )
    for key in sorted(groups):
        g = groups[key]
        med = statistics.median
        print(
            f"  {key[0]:7} {key[1][:8]:8} {key[2]:>5} {key[3]:5} {key[4]:6} {len(g):>4} "
            f"{med(x.row.concurrency / x.slots for x in g):6.2f} "
            f"{med(x.occ_measured for x in g):8.2f} "
            f"{med(x.row.ttft_ms / x.model_ttft_ms for x in g):8.2f} "
            f"{med(x.row.tpot_ms / x.model_tpot_ms for x in g):8.2f} "
            f"{med(x.row.ttft_ms / x.repriced_ttft_ms for x in g):9.2f}"
        )
    plain = _err([(x.row.ttft_ms, x.model_ttft_ms) for x in found])
    again = _err([(x.row.ttft_ms, x.repriced_ttft_ms) for x in found])
    bound = [x for x in found if x.bound]
    plain_b = _err([(x.row.ttft_ms, x.model_ttft_ms) for x in bound])
    again_b = _err([(x.row.ttft_ms, x.repriced_ttft_ms) for x in bound])
    print(
        f"\nTTFT mean/median |error|, {len(found)} runs with a decode cap: model "
        f"{plain[0]:.1f} / {plain[1]:.1f}%, decode-slot queue at the measured TPOT "
        f"{again[0]:.1f} / {again[1]:.1f}%"
    )
    print(
        f"  of which bound by the slots ({len(bound)} runs): model {plain_b[0]:.1f} / "
        f"{plain_b[1]:.1f}%, queue at the measured TPOT {again_b[0]:.1f} / {again_b[1]:.1f}%"
    )
    worst = max(found, key=lambda x: x.occ_measured)
    print(
        f"highest measured occupancy: {worst.occ_measured:.2f} (at most 1 if the caps are read right)"
    )


_orig_comm = IterationModel._communication


def alltoall_moe(
    self: IterationModel,
    tokens: np.ndarray,
    moe_layers: int,
    prefill_tokens: np.ndarray | float = 0.0,
) -> np.ndarray:
    """The iteration's collectives with each attention-DP MoE layer priced as the all-to-all of
    each token's top-k copies (FP8 out, BF16 back) the model used for every engine before the
    gather/scatter of TensorRT-LLM's CUTLASS MoE was shipped."""
    plain = dataclasses.replace(self, moe_gather_scatter=False)
    return np.asarray(_orig_comm(plain, tokens, moe_layers, prefill_tokens))


@contextmanager
def _communication(comm: Callable[..., np.ndarray]) -> Iterator[None]:
    IterationModel._communication = comm  # type: ignore[method-assign]
    try:
        yield
    finally:
        IterationModel._communication = _orig_comm  # type: ignore[method-assign]


def what_if_allgather() -> dict[str, tuple[tuple[float, float], tuple[float, float], int]]:
    """TensorRT-LLM DeepSeek rows' TTFT and TPOT mean |error| in % with the all-to-all
    (:func:`alltoall_moe`) and with the shipped gather/scatter, per mode and attention DP (of the engine; of the context and the
    decode workers): name -> ((TTFT plain, TTFT what-if), (TPOT plain, TPOT what-if), runs);
    the printout adds the medians."""
    rows = [
        r
        for r in distinct(load(ROWS))
        if r.expressible and r.raw["backend"] == "trtllm" and "DeepSeek" in r.raw["model_path"]
    ]
    with _communication(alltoall_moe):
        plain = [predict(r) for r in rows]
    again = [predict(r) for r in rows]
    groups: dict[str, list[int]] = defaultdict(list)

    def dp(width: Any) -> str:
        return "adp" if int(width or 1) > 1 else "tp"

    for i, row in enumerate(rows):
        kw = row.kwargs
        if row.raw["mode"] == "agg":
            name = f"agg    engine {dp(kw.get('attention_dp'))}"
        else:
            name = (
                f"disagg ctx {dp(kw['prefill_attention_dp'])} gen {dp(kw['decode_attention_dp'])}"
            )
        groups[name].append(i)
    out = {}
    for name, idx in sorted(groups.items()):
        t0 = _err([(rows[i].ttft_ms, plain[i]["ttft_ms"]) for i in idx])
        t1 = _err([(rows[i].ttft_ms, again[i]["ttft_ms"]) for i in idx])
        p0 = _err([(rows[i].tpot_ms, plain[i]["tpot_ms"]) for i in idx])
        p1 = _err([(rows[i].tpot_ms, again[i]["tpot_ms"]) for i in idx])
        print(
            f"  trtllm DeepSeek {name:21} n={len(idx):4}  TTFT {t0[0]:5.1f} / {t0[1]:5.1f}% -> "
            f"{t1[0]:5.1f} / {t1[1]:5.1f}%   TPOT {p0[0]:5.1f} / {p0[1]:5.1f}% -> "
            f"{p1[0]:5.1f} / {p1[1]:5.1f}%"
        )
        out[name] = ((t0[0], t1[0]), (p0[0], p1[0]), len(idx))
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--allgather",
        action="store_true",
        help="also print TensorRT-LLM's all-gather/reduce-scatter MoE against the all-to-all",
    )
    args = parser.parse_args()
    main()
    if args.allgather:
        print(
            "\nTensorRT-LLM attention-DP MoE layers, all-to-all of top-k copies (before) -> "
            "all-gather + reduce-scatter in BF16 (shipped) (mean / median |error|):"
        )
        what_if_allgather()
