"""How many prompts per iteration the SGLang 0.5.6.post2 Llama-3.1-8B gap-analysis rows ran.

Closed loop with fixed lengths (AIConfigurator's benchmark client,
``serving_clients.client_requests``): every client always has one request in the system, so by
Little's law the engine completes
``C / E2E`` requests per second, ``E2E = TTFT + (OSL - 1) TPOT`` from the row's own means. With
``--enable-mixed-chunk`` every iteration steps every running decode once (SGLang scheduler
``get_next_batch_to_run``: one new prefill batch, mixed with the running batch), so a decoding
request sees one iteration per token and ``TPOT`` is the mean iteration time. A prompt is
prefilled once per request, so the engine ran ``C / E2E * TPOT`` prompts per iteration. That
figure is set against the most one prefill batch can start under each reading of the launch
(diagnostic, measured figures only; nothing here is read by the model):

* ``0.5.x``: ``--max-prefill-tokens isl+1500`` with SGLang 0.5.x ``PrefillAdder.add_one_req``
  (a later request only if its whole prompt is below what is left of the limit), at most;
* ``newer``: the same limit under sgl-project/sglang PR #25741's rule (add while any is left);
* ``default``: no ``--max-prefill-tokens`` (16384) and the 8192-token chunk budget.

Mixed decodes lower every bound (they are subtracted from the limit); the bounds printed take
none, so a row above a bound is one that reading cannot produce at all.

    PYTHONPATH=src python benchmarks/sglang_gap_throughput.py
"""

from __future__ import annotations

from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import AIC_PREFILL_SLACK
from gpuscale.validation.serving_rows import load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
CHUNK = 8192
"""SGLang ServerArgs chunked_prefill_size on a 141 GB H200 (catalog serving_engines.yaml)."""


def bound_05x(isl: int, limit: int) -> float:
    """Whole prompts one 0.5.x prefill batch starts: the first always, a later one only while
    its prompt is below what is left (``real_input_tokens >= rem_input_tokens`` refuses)."""
    n, left = 1, limit - isl
    while isl < left:
        n, left = n + 1, left - isl
    return float(n)


def bound_newer(isl: int, limit: int) -> float:
    """Prompts (a chunk counting its share) under PR #25741: add while some limit is left,
    the crossing one cut at the chunk budget."""
    n, left, chunk = 0.0, float(limit), float(CHUNK)
    while left > 0 and chunk > 0:
        take = min(float(isl), chunk)
        n += take / isl
        left -= take
        chunk -= take
    return n


def main() -> None:
    print(
        f"{'tp':>3} {'isl':>5} {'osl':>5} {'C':>4} {'req/s':>7} {'prompts/it':>10}"
        f" {'0.5.x':>6} {'newer':>6} {'default':>7}"
    )
    over = {"0.5.x": 0, "newer": 0, "default": 0}
    n = 0
    for row in load(ROWS):
        r = row.raw
        if not (
            r["backend"] == "sglang"
            and r["backend_version"] == "0.5.6.post2"
            and "Llama-3.1-8B" in r["model_path"]
            and row.expressible
            and r["mode"] == "agg"
        ):
            continue
        isl, osl, c = int(r["isl"]), int(r["osl"]), row.concurrency
        ttft, tpot = float(r["silicon_ttft_ms"]) / 1e3, float(r["silicon_tpot_ms"]) / 1e3
        rate = c / (ttft + (osl - 1) * tpot)
        per_it = rate * tpot
        limit = isl + AIC_PREFILL_SLACK
        b = {
            "0.5.x": bound_05x(isl, limit),
            "newer": bound_newer(isl, limit),
            "default": min(CHUNK, 16384) / isl,
        }
        for k, v in b.items():
            over[k] += per_it > v * (1 + 1e-9)
        n += 1
        flag = " <- above 0.5.x" if per_it > b["0.5.x"] else ""
        print(
            f"{r['tp_size']:>3} {isl:>5} {osl:>5} {c:>4} {rate:7.1f} {per_it:10.2f}"
            f" {b['0.5.x']:6.2f} {b['newer']:6.2f} {b['default']:7.2f}{flag}"
        )
    print(
        f"rows {n}; rows needing more prompts per iteration than the reading allows: "
        + ", ".join(f"{k} {v}" for k, v in over.items())
    )


if __name__ == "__main__":
    main()
