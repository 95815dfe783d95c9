"""Edges of the SLO search's exact pricing (``planner.serving.search.price``) found in review.

A candidate can pass the vectorized pre-screen yet miss the SLO under ``infer``'s open loop at
every rate: with varying lengths (``input_cv``) the open loop's p99 TTFT carries the long
prompts the pre-screen's steady state does not. Pricing then stepped the rate down without end
(its floor moved with each step; at a subnormal rate ``r * 0.85 == r``): the search hung."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.api import serving_search as ss
from gpuscale.planner.serving import search as ps
from gpuscale.planner.serving.deployment import Prediction

LONG_PROMPTS: dict[str, Any] = {
    "gpu": "h100-sxm", "gpus": 8, "input_len": 8192, "output_len": 256, "slo_ttft_ms": 400,
    "slo_tpot_ms": 15, "input_cv": 1.0, "output_cv": 1.0,
}  # fmt: skip
READS = 200
"""Most open-loop predictions one candidate's price may take (the scan from 1% of the grid's
bound to it takes about 29, past it to the capacity a few more, a bisection to 1e-6 of a rate
about 25)."""


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count ``price``'s open-loop reads per candidate; fail past :data:`READS`."""
    counts: list[int] = []
    reader = ps.open_loop_reader

    def counting(cand: ps.Candidate, ctx: ps.SearchContext) -> Any:
        read = reader(cand, ctx)
        if read is None:
            return None
        counts.append(0)

        def one(rate: float) -> Any:
            counts[-1] += 1
            assert counts[-1] <= READS, f"{cand.label}: {READS} reads, last at {rate:g} req/s"
            return read(rate)

        return one

    monkeypatch.setattr(ps, "open_loop_reader", counting)
    return counts


def test_a_candidate_infer_never_admits_is_dropped_in_few_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = ss.search_context(catalog.model("llama3.1-8b"), model="llama3.1-8b", **LONG_PROMPTS)
    cand = next(c for c in ps.candidates(ctx.model, 8, 8) if c.label == "2 x TP4")
    screened = ps.score(cand, ctx, False)
    assert screened is not None  # the pre-screen admits it
    counts = _counted(monkeypatch)
    assert ps.price(screened, ctx) is None
    # the capacity and the lightest rate: the idle engine's p99s miss
    assert counts == [2]


def test_the_search_ends_and_its_places_are_what_infer_prints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _counted(monkeypatch)
    r = ss.search("llama3.1-8b", **LONG_PROMPTS)
    assert counts and max(counts) <= READS
    for o in r.to_dict()["options"]:
        if o["exact"]:
            assert o["ttft_ms_p99"] <= LONG_PROMPTS["slo_ttft_ms"]
            assert o["tpot_ms_p99"] <= LONG_PROMPTS["slo_tpot_ms"]


def test_attention_dp_tpot_quantiles_keep_their_spread_about_the_lockstep_mean() -> None:
    """Attention-DP ranks in lockstep: every iteration lasts the fullest rank's, an excess the
    mean TPOT carries and this rank's own decode-only and prefill iterations do not. Every
    request's TPOT averages its iterations, so the excess shifts the whole spread: the median
    sits at the mean, the p99 above it by the spread of prefills a request meets. Flooring only
    the quantiles above the median at the mean left the median 31% under the mean and p90 = p99
    = the mean (DeepSeek-R1, TP8-EP8-DP-attn8 on H200 at 4 requests/s: 38.6 / 55.9 / 55.9 ms)."""
    kw: dict[str, Any] = {"gpu": "h200-sxm", "tp": 8, "ep": 8, "attention_dp": 8}
    for engine in ("sglang", "tensorrt-llm"):
        for load in ({"request_rate": 4.0}, {"request_rate": 2.0, "input_cv": 1.0}):
            o = infer("deepseek-r1", engine=engine, **kw, **load).to_dict()["options"][0]
            assert o["tpot_ms_p50"] == pytest.approx(o["tpot_ms"], rel=0.02), (engine, load)
            assert o["tpot_ms"] < o["tpot_ms_p90"] < o["tpot_ms_p99"], (engine, load)


def test_no_place_names_only_the_targets_given() -> None:
    """With no place, the verdict names the targets that were given, in their own precision,
    and without a target it says the model does not fit: it read "TTFT p99 <= inf ms and TPOT
    p99 <= inf ms: relax the SLO" for a 405B model on two GPUs, and "TPOT p99 <= 0 ms" for a
    0.4 ms target."""
    big = ss.search("llama3.1-405b", gpu="h100-sxm", gpus=2).explanation()
    assert "inf" not in big and "relax the SLO" not in big
    assert "holds one request" in big and "2 x h100-sxm" in big
    tight = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=1, slo_tpot_ms=0.4).explanation()
    assert "TPOT p99 <= 0.4 ms" in tight and "TTFT" not in tight and "inf" not in tight


def test_tpot_median_is_the_mean_near_capacity_without_attention_dp() -> None:
    """Every request shares its iterations, so the requests' mean TPOT is the mean iteration
    per token; near the capacity the iterations carrying several prompts put the spread's
    centre 1.5% under it (Llama-3.1-70B FP8, 8 x TP1 on H200 at 15 req/s: p50 46.6 ms at a
    47.4 ms mean), and the search ranks by the p99 above that centre."""
    kw: dict[str, Any] = {"gpu": "h200-sxm", "weights": "fp8", "replicas": 8}
    o = infer("llama3.1-70b", request_rate=15.043, **kw).to_dict()["options"][0]
    assert o["tpot_ms_p50"] == pytest.approx(o["tpot_ms"], rel=1e-3)
    assert o["tpot_ms"] < o["tpot_ms_p90"] < o["tpot_ms_p99"]


def test_a_search_over_part_of_a_node_runs_as_infer_runs_its_deployments() -> None:
    """``infer`` runs a deployment on the whole nodes that hold it (15 GPUs on two 8-GPU
    nodes; ``api.serving.deployment_cluster``), and the search proposes such splits; yet
    ``--gpus 12`` was refused ("must be a multiple of --gpus-per-node"). Now 12 GPUs are
    searched on two nodes, every place within 12, each what ``infer`` prints for it."""
    kw: dict[str, Any] = {"gpu": "h100-sxm", "weights": "fp8", "slo_ttft_ms": 500,
                          "slo_tpot_ms": 30}  # fmt: skip
    r = ss.search("llama3.1-70b", gpus=12, **kw)
    doc = r.to_dict()
    assert doc["options"] and all(o["gpus"] <= 12 for o in doc["options"])
    assert any(o["gpus"] > 8 for o in doc["options"])
    for o in doc["options"][:2]:
        got = infer("llama3.1-70b", **o["infer"]).to_dict()["options"][0]
        assert got["ttft_ms_p99"] == pytest.approx(o["ttft_ms_p99"], rel=1e-12)
        assert got["output_tokens_per_s"] == pytest.approx(o["goodput_tokens_per_s"], rel=1e-12)


HARDWARE: list[tuple[str, dict[str, Any]]] = [
    ("llama3.1-8b", {"gpu": "a100-sxm-80gb", "gpus": 4, "slo_ttft_ms": 300, "slo_tpot_ms": 20}),
    ("llama3.1-70b", {"gpu": "b200", "gpus": 8, "weights": "fp8", "slo_ttft_ms": 500,
                      "slo_tpot_ms": 20}),
    ("llama3.1-70b", {"gpu": "mi300x", "gpus": 8, "slo_ttft_ms": 1000, "slo_tpot_ms": 40,
                      "input_cv": 0.5, "output_cv": 0.5}),
    ("deepseek-r1", {"gpu": "gb200", "gpus": 16, "engine": "tensorrt-llm", "slo_ttft_ms": 2000,
                     "slo_tpot_ms": 50}),
    ("llama3.1-70b", {"gpu": "h200-sxm", "gpus": 16, "weights": "fp8", "gpus_per_node": 4,
                      "slo_ttft_ms": 500, "slo_tpot_ms": 30, "price": 3.5}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("model", "kw"), HARDWARE, ids=[f"{m}-{k['gpu']}-{k['gpus']}" for m, k in HARDWARE]
)
def test_every_priced_place_is_what_its_infer_entry_prints(model: str, kw: dict[str, Any]) -> None:
    """Not only the winner and the runner-up on H100/H200: every exact place of searches on
    A100, B200, MI300X, GB200 and 4-GPU nodes, aggregated and disaggregated, with varying
    lengths and a price, is what ``infer(model, **option["infer"])`` prints, within the SLO."""
    doc = ss.search(model, **kw).to_dict()
    exact = [o for o in doc["options"] if o["exact"]]
    assert len(exact) >= 2
    for o in exact:
        got = infer(model, **o["infer"]).to_dict()["options"][0]
        for mine, theirs in (("ttft_ms_p99", "ttft_ms_p99"), ("tpot_ms_p99", "tpot_ms_p99"),
                             ("goodput_tokens_per_s", "output_tokens_per_s"),
                             ("requests_per_s", "requests_per_s")):  # fmt: skip
            assert o[mine] == pytest.approx(got[theirs], rel=1e-12), (o["label"], mine)
        assert got["gpus"] == o["gpus"] and got["fits"]
        assert got["ttft_ms_p99"] <= kw["slo_ttft_ms"] and got["tpot_ms_p99"] <= kw["slo_tpot_ms"]
        if "price" in kw:
            per_dollar = o["goodput_tokens_per_s"] * 3600 / (o["gpus"] * kw["price"])
            assert o["tokens_per_dollar"] == pytest.approx(per_dollar, rel=1e-12)


def test_a_decode_pool_is_read_once_per_parallelism(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pre-screen rebuilt a decode pool's load curve for every split that holds it, though
    it does not depend on the worker count: gpt-oss-120b on 72 B200s took 10 s of CPU (1,055
    candidates, 2,232 load curves), over the search's 5 s. Now two per decode parallelism
    (the curve and its reading on the grid), one per aggregated candidate; the grid readings
    are those of a curve per split to 2e-15 (checked on 1,446 readings of four searches)."""
    calls = [0]
    curve = ps.load_curve

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return curve(*args, **kwargs)

    monkeypatch.setattr(ps, "load_curve", counted)
    kw: dict[str, Any] = {"gpu": "b200", "gpus": 72, "engine": "tensorrt-llm",
                          "slo_ttft_ms": 300, "slo_tpot_ms": 10}  # fmt: skip
    ctx = ss.search_context(catalog.model("gpt-oss-120b"), model="gpt-oss-120b", **kw)
    cands = ps.candidates(ctx.model, 72, ctx.cluster.gpus_per_node)
    for c in cands:
        ps.score(c, ctx, False)
    aggregated = sum(c.mode == "aggregated" for c in cands)
    decode_pars = {c.decode.par for c in cands if c.decode is not None}
    assert len(cands) - aggregated > 1000
    assert calls[0] <= aggregated + 2 * len(decode_pars)


def _fake_prediction(rate: float, ttft_p99_s: float, cap: float) -> Prediction:
    x = min(rate, cap)
    pct = {f"{k}_p{q}": v for k, v in (("ttft", ttft_p99_s), ("tpot", 0.01), ("e2e", 1.0))
           for q in (50, 90, 99)}  # fmt: skip
    return Prediction(
        mode="aggregated", gpus=1, fits=True, memory_per_gpu_gib=1.0, kv_tokens_per_rank=1e5,
        ttft_s=ttft_p99_s, tpot_s=0.01, e2e_s=1.0, pct=pct, requests_per_s=x,
        output_tokens_per_s=x * 128, kv_occupancy=0.5, preemptions_per_request=0.0,
        running_per_rank=1.0, queue_s=0.0, saturated=rate >= cap, iteration_s=0.01,
        gemm_precision="bf16", weight_only=False, capacity_limit="kv_cache",
    )  # fmt: skip


def test_the_rate_found_has_no_scanned_rate_below_it_that_misses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A p99 that falls as the rate rises (here TTFT p99 over the target from 1 to 1.5 req/s,
    under it again up to 3): the price is the first crossing, 1 req/s, not 3. Stepping down
    from the pre-screen's bound (2.5) found the SLO held there and walked up to 3."""
    ctx = ss.search_context(
        catalog.model("llama3.1-8b"), model="llama3.1-8b", gpu="h100-sxm", gpus=1,
        input_len=128, output_len=128, slo_ttft_ms=100,
    )  # fmt: skip
    cand = ps.candidates(ctx.model, 1, 1)[0]

    def ttft(rate: float) -> float:
        return 0.2 if 1.0 <= rate < 1.5 or rate >= 3.0 else 0.05

    monkeypatch.setattr(
        ps, "open_loop_reader", lambda c, x: lambda r: _fake_prediction(r, ttft(r), 10.0)
    )
    screened = ps.Scored(
        cand=cand, mean_in_flight=1, goodput_tokens_per_s=2.0 * 128, ttft_p99_s=0.05,
        tpot_p99_s=0.01, requests_per_s=2.0, capacity_resolved=False,
        goodput_bound_tokens_per_s=2.5 * 128,
    )  # fmt: skip
    s = ps.price(screened, ctx)
    assert s is not None and s.limit == "ttft"
    assert s.requests_per_s == pytest.approx(1.0, rel=1e-5) and s.requests_per_s < 1.0
    below = s.requests_per_s * np.geomspace(ps.SCAN_FROM, 1.0, 400)
    assert all(ttft(r) <= 0.1 for r in below)


def test_the_ttft_p99_of_a_decode_pull_split_rises_with_the_rate() -> None:
    """DeepSeek-R1, TensorRT-LLM, H200: TP8-EP8-DP-attn8 prefill + TP8-EP8 decode. Its TTFT p99
    fell 305.2 -> 294.9 ms from 0.42 to 0.50 req/s: the decode admission took ``ceil`` of the
    mean hand-off over the mean iteration, which drops a whole iteration (31 -> 21 ms) where
    the iteration outgrows the 12.5 ms hand-off (``deployment.decode_admission_s``)."""
    ctx = ss.search_context(
        catalog.model("deepseek-r1"), model="deepseek-r1", gpu="h200-sxm", gpus=16,
        engine="tensorrt-llm", slo_ttft_ms=297,
    )  # fmt: skip
    label = "1 x TP8-EP8-DP-attn8 prefill + 1 x TP8-EP8 decode"
    cand = next(c for c in ps.candidates(ctx.model, 16, 8) if c.label == label)
    read = ps.open_loop_reader(cand, ctx)
    assert read is not None
    p99 = np.array([read(r).pct["ttft_p99"] for r in np.linspace(0.3, 0.7, 41)])
    assert np.all(np.diff(p99) > 0.0)
