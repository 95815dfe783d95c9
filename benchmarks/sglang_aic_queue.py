"""Where the SGLang gap-analysis rows queue: what SGLang 0.5.6.post2's scheduler can hold back,
against what the rows' own figures say waited (diagnostic; the model reads nothing here).

Closed loop with fixed lengths (AIConfigurator's aiperf runs): every client always has one
request in the system, so by Little's law (Little 1961) the engine completes ``X = C / E2E``
requests per second with ``E2E = TTFT + (OSL - 1) TPOT`` from the row's means, and on average
``Lq = X TTFT`` requests are waiting for their first token; the other ``C - Lq`` are decoding.
``W/S = TTFT / ((OSL - 1) TPOT)`` is the wait as a share of a request's decode time: a running
cap ``R`` below ``C`` gives ``W/S = (C - R) / R`` (each surplus request waits a whole request).

What SGLang 0.5.6.post2 (the rows' version; read in the PyPI wheel ``sglang==0.5.6.post2``) can
hold back, under the launch the model reads for each row (``serving_launches.aic_generator_launch``
for the Dynamo 0.8.0 versions, the engine profile otherwise):

* a running slot: ``--max-running-requests`` is the row's ``batch_size``, which equals ``C`` on
  every SGLang gap row, and ``tp_worker.py`` takes ``min(max_running_requests,
  req_to_token_pool.size)`` with the pool sized to the same value (``model_runner.py``
  ``init_memory_pool``), so a closed loop of ``C`` never waits for a slot (``slot`` column 0);
* KV pages at admission (``schedule_policy.py`` ``PrefillAdder``): a request is added only if
  its prompt plus ``min(max_new_tokens, 4096)`` is below the free and evictable tokens less,
  for every running request, ``min(remaining output, 4096) x new_token_ratio`` and the mixed
  decode tokens (``rem_total_tokens``); ``new_token_ratio`` starts at ``0.7 x
  --schedule-conservativeness`` (1.0) and decays to 0.14 of that over 600 decode-only steps
  (``scheduler.py``, ``environ.py``). ``R_kv`` is the most requests that rule keeps running in a
  staggered steady state at the ratio's start, 0.7 (the fewest it can allow), in the model's
  pool (``kv_cache_tokens_per_rank``);
* prompts per prefill batch: ``--max-prefill-tokens`` under 0.5.x ``add_one_req``
  (``steady_state.prefill_batch_prompts``) at the running count the row implies; a row whose
  ``prompts/it`` (``X TPOT``: with ``--enable-mixed-chunk`` every iteration steps every decode,
  so ``TPOT`` is the iteration) exceeds it is one that launch cannot produce.

``Lq s+kv`` is the queue those two bounds give (``C - min(C, slot cap, R_kv)``), ``Lq mod`` the
waiting in the model's own prediction of the row (its scheduler simulation: prompts behind
other prompts in prefill batches, the benchmark's burst). A row whose measured ``Lq`` is far
above both waited for something the scheduler of the launch read does not hold back: the
client, the Dynamo frontend and worker process the rows ran through, or another launch.
The ``tok/s`` column (``C / TPOT``, tokens the serving process streams per second) is printed
beside it for that reason.

    PYTHONPATH=src python benchmarks/sglang_aic_queue.py [--all]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpuscale.api import infer
from gpuscale.catalog.serving_engines import EngineProfile, engine
from gpuscale.planner.serving.steady_state import prefill_batch_prompts
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_fields import AIC_GAP_SOURCE
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
INIT_NEW_TOKEN_RATIO = 0.7
"""SGLang 0.5.6.post2 ``environ.py`` ``SGLANG_INIT_NEW_TOKEN_RATIO`` default, times
``--schedule-conservativeness`` 1.0 (``scheduler.py`` ``init_new_token_ratio``)."""
CLIP_MAX_NEW_TOKENS = 4096
"""``schedule_policy.py`` ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` default: the output tokens
admission reserves per request at most."""
UNEXPLAINED = 2.0
"""A row's measured queue is called unexplained when it exceeds the scheduler's by this factor
and by more than one request (a reading, not a fit: it only sorts the printout)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """What a closed-loop row's own means imply (Little's law)."""

    concurrency: float
    ttft_s: float
    tpot_s: float
    osl: float

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.osl - 1.0) * self.tpot_s

    @property
    def requests_per_s(self) -> float:
        return self.concurrency / self.e2e_s

    @property
    def waiting(self) -> float:
        """Requests waiting for their first token, on average (``Lq = X TTFT``)."""
        return self.requests_per_s * self.ttft_s

    @property
    def running(self) -> float:
        return self.concurrency - self.waiting

    @property
    def wait_share(self) -> float:
        """``W/S``: the wait over the decode time of one request."""
        return self.ttft_s / max((self.osl - 1.0) * self.tpot_s, 1e-12)

    @property
    def prompts_per_iteration(self) -> float:
        return self.requests_per_s * self.tpot_s

    @property
    def tokens_per_s(self) -> float:
        """Output tokens streamed per second, ``C / TPOT`` while all decode."""
        return self.concurrency / self.tpot_s


def kv_admitted_requests(
    pool_tokens: float,
    isl: float,
    osl: float,
    *,
    ratio: float = INIT_NEW_TOKEN_RATIO,
    mixed: bool = False,
) -> float:
    """Most requests SGLang 0.5.x's ``PrefillAdder`` keeps running in a staggered steady state
    (outputs spread evenly over ``[0, osl]``) in a pool of ``pool_tokens``.

    A running request holds its prompt and what it generated (``isl + g``) and reserves
    ``min(osl - g, 4096) x ratio`` (``rem_total_token_offset``), plus one token while mixed with
    a prefill batch; a new one is admitted while ``isl + min(osl, 4096)`` is below what is left
    (``add_one_req``: ``total_tokens >= self.rem_total_tokens`` refuses). Averaged over ``g``:
    ``R (isl + osl / 2 + ratio x min(osl, 4096) / 2 [+ 1]) + isl + min(osl, 4096) < pool``."""
    clipped = min(osl, float(CLIP_MAX_NEW_TOKENS))
    per = isl + osl / 2.0 + ratio * clipped / 2.0 + (1.0 if mixed else 0.0)
    need = isl + clipped
    return max(float(np.ceil((pool_tokens - need) / per)), 0.0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    row: ServingRow
    measured: Measured
    slot_cap: float
    pool_tokens: float
    kv_running: float
    prompts_allowed: float
    model_ttft_s: float
    model_waiting: float
    """Requests the model's own prediction of the row leaves waiting for their first token
    (``C x TTFT / E2E``, its scheduler simulation: prompts behind other prompts, the burst)."""

    @property
    def scheduler_queue(self) -> float:
        """Requests the 0.5.6.post2 scheduler holds back: no slot or no KV pages."""
        c = self.measured.concurrency
        return max(c - min(c, self.slot_cap, self.kv_running), 0.0)

    @property
    def launch_refuted(self) -> bool:
        """The row ran more prompts per iteration than the launch read can start."""
        return self.measured.prompts_per_iteration > self.prompts_allowed

    @property
    def unexplained(self) -> bool:
        """Far more waiting than the modelled scheduler and the slot and KV bounds give."""
        lq = self.measured.waiting
        ref = max(self.scheduler_queue, self.model_waiting)
        return lq > UNEXPLAINED * ref and lq - ref > 1.0


def engine_for(row: ServingRow) -> EngineProfile:
    """The SGLang profile with the launch options the model reads for ``row``."""
    eng = engine("sglang")
    opts: dict[str, Any] = dict(row.kwargs.get("engine_options", {}))
    if "mixed_chunk" in opts:
        eng = dataclasses.replace(
            eng, prefill_policy="mixed" if opts.pop("mixed_chunk") else "prefill_first"
        )
    if "max_prefill_tokens" in opts:
        eng = dataclasses.replace(eng, max_prefill_tokens=int(opts.pop("max_prefill_tokens")))
    if "max_num_seqs" in opts:
        eng = dataclasses.replace(eng, max_num_seqs=int(opts.pop("max_num_seqs")))
    return eng


def verdict(row: ServingRow) -> Verdict:
    r = row.raw
    meas = Measured(
        concurrency=float(row.concurrency),
        ttft_s=float(r["silicon_ttft_ms"]) / 1e3,
        tpot_s=float(r["silicon_tpot_ms"]) / 1e3,
        osl=float(r["osl"]),
    )
    eng = engine_for(row)
    out = infer(r["model_path"], **row.kwargs).to_dict()["options"][0]
    pool = float(out["kv_cache_tokens_per_rank"])
    isl = float(r["isl"])
    mixed = eng.prefill_policy != "prefill_first"
    allowed = float(prefill_batch_prompts(eng, np.array([meas.running]), isl)[0])
    return Verdict(
        row=row,
        measured=meas,
        slot_cap=float(eng.max_num_seqs),
        pool_tokens=pool,
        kv_running=kv_admitted_requests(pool, isl, meas.osl, mixed=mixed),
        prompts_allowed=allowed,
        model_ttft_s=float(out["ttft_ms"]) / 1e3,
        model_waiting=meas.concurrency * float(out["ttft_ms"]) / 1e3 / float(out["e2e_s"]),
    )


def gap_rows(rows: Sequence[ServingRow], every: bool = False) -> list[ServingRow]:
    """SGLang aggregated gap-analysis rows (``--all``: also rows of other sources)."""
    return [
        row
        for row in rows
        if row.expressible
        and row.engine == "sglang"
        and row.raw["mode"] == "agg"
        and (every or AIC_GAP_SOURCE in row.raw["silicon_data_source"])
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every SGLang aggregated row")
    args = parser.parse_args(argv)
    verdicts = [verdict(row) for row in gap_rows(load(ROWS), args.all)]
    print(
        f"{'version':12} {'model':12} {'tp':>2} {'isl':>5}x{'osl':<5} {'C':>4} {'TTFT':>6} "
        f"{'TPOT':>5} {'X/s':>6} {'Lq':>6} {'W/S':>5} {'pr/it':>5} {'allow':>5} {'tok/s':>6} "
        f"{'pool':>8} {'R_kv':>6} {'Lq s+kv':>7} {'Lq mod':>6} {'TTFTm':>6}  verdict"
    )
    groups: dict[tuple[str, str, str], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        r, m = v.row.raw, v.measured
        tag = (
            "launch refuted (more prompts/it than it starts)"
            if v.launch_refuted
            else "beyond the scheduler's bounds"
            if v.unexplained
            else "within the scheduler's"
        )
        print(
            f"{r['backend_version']:12} {r['model_path'].split('/')[-1][:12]:12} "
            f"{r['tp_size']:>2} {r['isl']:>5}x{r['osl']:<5} {m.concurrency:4.0f} "
            f"{m.ttft_s:6.2f} {m.tpot_s * 1e3:5.1f} {m.requests_per_s:6.1f} {m.waiting:6.1f} "
            f"{m.wait_share:5.3f} {m.prompts_per_iteration:5.2f} {v.prompts_allowed:5.0f} "
            f"{m.tokens_per_s:6.0f} {v.pool_tokens:8.0f} {v.kv_running:6.0f} "
            f"{v.scheduler_queue:7.1f} {v.model_waiting:6.1f} {v.model_ttft_s:6.2f}  {tag}"
        )
        key = (r["backend_version"], r["model_path"].split("/")[-1][:12], r["tp_size"])
        groups[key].append(v)
    print("\nper version, model and TP: rows, median Lq measured / modelled / slot+KV bound,")
    print("median W/S and tok/s; rows whose launch is refuted / that wait beyond the bounds")
    for key, vs in sorted(groups.items()):
        print(
            f"  {key[0]:12} {key[1]:12} tp{key[2]:>2} n={len(vs):3} "
            f"Lq {statistics.median(v.measured.waiting for v in vs):6.1f} / "
            f"{statistics.median(v.model_waiting for v in vs):6.1f} / "
            f"{statistics.median(v.scheduler_queue for v in vs):5.1f}  "
            f"W/S {statistics.median(v.measured.wait_share for v in vs):5.3f}  "
            f"tok/s {statistics.median(v.measured.tokens_per_s for v in vs):6.0f}  "
            f"refuted {sum(v.launch_refuted for v in vs):2}  "
            f"beyond {sum(v.unexplained and not v.launch_refuted for v in vs):2}"
        )
    by_model: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for key, vs in groups.items():
        by_model[key[:2]].extend(vs)
    print("\nrank correlation of the waiting beyond the model's (Lq - Lq mod) with tok/s and C")
    for key, vs in sorted(by_model.items()):
        if len(vs) < 8:
            continue
        excess = [v.measured.waiting - v.model_waiting for v in vs]
        print(
            f"  {key[0]:12} {key[1]:12} n={len(vs):3} "
            f"tok/s {spearman(excess, [v.measured.tokens_per_s for v in vs]):+.2f}  "
            f"C {spearman(excess, [v.measured.concurrency for v in vs]):+.2f}"
        )


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Rank correlation (ties broken by order; the figures here have none that matter)."""
    ra = np.argsort(np.argsort(np.asarray(a, dtype=float))).astype(float)
    rb = np.argsort(np.argsort(np.asarray(b, dtype=float))).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


if __name__ == "__main__":
    main()
