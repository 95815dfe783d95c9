"""``gpuscale infer --search``: the deployment on N GPUs with the most goodput under an SLO."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api.serving import (
    check_decoder,
    check_lengths,
    check_prompt_budget,
    served_format,
    served_kv_dtype,
)
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import check_runs_on
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.errors import is_whole, require
from gpuscale.planner.serving.search import (
    RESOLVED_PLACES,
    UNBOUNDED_S,
    Candidate,
    Scored,
    SearchContext,
    candidates,
    pricer,
    rank,
    scorer,
)
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.price import check_price
from gpuscale.specs import ModelSpec

SCHEMA_VERSION = 2
"""2: an option's mean number of requests in flight is ``mean_requests_in_flight`` (was
``concurrency``, which read as a closed loop's clients)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    model: str
    gpu: str
    gpus: int
    engine: str
    slo_ttft_ms: float
    slo_tpot_ms: float
    price_per_gpu_hour: float | None
    ranked: list[Scored]
    evaluated: int
    priced: int = 0
    """Candidates priced by ``infer``'s own prediction (``planner.serving.search.price``)."""
    infer_args: dict[str, Any] = field(default_factory=dict)
    """The search's own arguments that ``gpuscale.api.infer`` takes too (gpu, engine, weights,
    lengths...): with an exact option's ``infer`` entry, ``infer(model, **those)`` gives that
    option's figures."""

    def _option(self, s: Scored) -> dict[str, Any]:
        c = s.cand
        o: dict[str, Any] = {
            "label": c.label,
            "mode": c.mode,
            "gpus": c.gpus,
            "mean_requests_in_flight": s.mean_in_flight,
            "ttft_ms_p99": s.ttft_p99_s * 1e3,
            "tpot_ms_p99": s.tpot_p99_s * 1e3,
            "goodput_tokens_per_s": s.goodput_tokens_per_s,
            "goodput_tokens_per_s_per_gpu": s.goodput_tokens_per_s / c.gpus,
            "requests_per_s": s.requests_per_s,
            "capacity_resolved": s.capacity_resolved,
            "limit": s.limit,
            "capacity_limit": s.capacity_limit,
            "exact": s.exact,
        }
        if s.exact:
            # ``gpuscale.api.infer`` arguments that give these figures: this deployment under
            # Poisson arrivals.
            o["infer"] = {
                **self.infer_args,
                **deployment_args(c),
                "request_rate": s.requests_per_s,
            }
        if self.price_per_gpu_hour is not None:
            o["tokens_per_dollar"] = (
                s.goodput_tokens_per_s * 3600 / (c.gpus * self.price_per_gpu_hour)
            )
        return o

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "engine": self.engine,
            "slo": {"ttft_ms_p99": self.slo_ttft_ms, "tpot_ms_p99": self.slo_tpot_ms},
            "evaluated": self.evaluated,
            "priced": self.priced,
            "options": [self._option(s) for s in self.ranked],
            "explanation": self.explanation(),
        }

    def figures(self) -> list[Any]:
        return []

    def explanation(self) -> str:
        if not self.ranked:
            # Only the targets given (an unset one is infinite), each as given.
            targets = [
                f"{name} p99 <= {ms:g} ms"
                for name, ms in (("TTFT", self.slo_ttft_ms), ("TPOT", self.slo_tpot_ms))
                if ms < float("inf")
            ]
            if not targets:
                return (
                    f"no deployment of {self.model} on up to {self.gpus} x {self.gpu} holds one "
                    "request: the weights leave no room for one request's KV cache; add GPUs, "
                    "quantize (--weights) or shorten requests"
                )
            return (
                f"no deployment on {self.gpus} x {self.gpu} meets {' and '.join(targets)}: "
                "relax the SLO, add GPUs or quantize (--weights)"
            )
        w = self._option(self.ranked[0])
        text = (
            f"winner: {w['label']} ({w['mode']}, {w['gpus']} GPUs) serves "
            f"{w['goodput_tokens_per_s_per_gpu']:,.0f} output tok/s per GPU within the SLO at "
            f"{w['requests_per_s']:.3g} requests/s of Poisson arrivals (TTFT p99 "
            f"{w['ttft_ms_p99']:.0f} ms, TPOT p99 {w['tpot_ms_p99']:.1f} ms, {w['mean_requests_in_flight']} "
            "requests in flight on average; "
            + (
                "infer --request-rate of this deployment prices it the same)."
                if w["exact"]
                else "the pre-screen's steady state, without the open loop's queue)."
            )
        )
        if "tokens_per_dollar" in w:
            text += (
                f" At ${self.price_per_gpu_hour:.2f} per GPU-hour that is "
                f"{w['tokens_per_dollar']:,.0f} output tokens per dollar (one GPU type: the "
                "per-dollar and per-GPU rankings agree)."
            )
        if len(self.ranked) > 1:
            r = self._option(self.ranked[1])
            ratio = w["goodput_tokens_per_s_per_gpu"] / max(r["goodput_tokens_per_s_per_gpu"], 1e-9)
            why = limit_words(self.ranked[1])
            text += (
                f" Runner-up: {r['label']} at {r['goodput_tokens_per_s_per_gpu']:,.0f} tok/s per "
                f"GPU ({ratio:.2f}x less): {why}."
            )
        return text


SLO_WORDS = {
    "tpot": "its TPOT p99 reaches the target at that load",
    "ttft": "its TTFT p99 reaches the target at that load",
    "ttft+tpot": "its TTFT and TPOT p99s reach the targets at that load",
}
CAPACITY_WORDS = {
    "running_slots": "its engines' running slots (the cap on requests running at once) fill",
    "kv_cache": "its KV cache fills",
    "token_budget": "its prompts fill the token budget of its iterations (prefill throughput)",
    "throughput_peak": "its throughput peaks (more running requests add none)",
    "prefill_throughput": "its prefill workers run at their throughput",
    "kv_transfer": "its KV transfers saturate the prefill workers' links",
    "decode_running_slots": "its decode workers' running slots fill",
    "decode_kv_cache": "its decode workers' KV cache fills",
    "decode_token_budget": "its decode workers' iterations fill their token budget",
    "decode_throughput_peak": "its decode workers' throughput peaks",
}
"""Words for ``Scored.capacity_limit``'s names (``steady_state.CAPACITY_LIMITS`` and the
disaggregated ones of ``deployment.disaggregated_limit``)."""


def limit_words(s: Scored) -> str:
    """What ends the option's walk up the load, in words, as the search computed it
    (``Scored.limit``): the p99 target(s) it reaches (the crossing is resolved, so the p99
    sits on the target) or, at its capacity with the SLO still met, the limit that sets the
    capacity (``Scored.capacity_limit``), never a guess."""
    if s.limit in SLO_WORDS:
        return SLO_WORDS[s.limit]
    names = [CAPACITY_WORDS.get(n, n.replace("_", " ")) for n in s.capacity_limit.split("+") if n]
    if not names:
        return "it reaches its capacity within the SLO"
    return f"it reaches its capacity within the SLO: {' and '.join(names)}"


def deployment_args(c: Candidate) -> dict[str, int]:
    """``gpuscale.api.infer``'s layout arguments for a searched deployment."""
    if c.prefill is not None and c.decode is not None:
        p, d = c.prefill.par, c.decode.par
        return {
            "prefill_workers": c.prefill.workers, "prefill_tp": p.tp, "prefill_ep": p.ep,
            "prefill_attention_dp": p.attention_dp, "decode_workers": c.decode.workers,
            "decode_tp": d.tp, "decode_ep": d.ep, "decode_attention_dp": d.attention_dp,
        }  # fmt: skip
    q = c.par
    return {"tp": q.tp, "pp": q.pp, "ep": q.ep, "attention_dp": q.attention_dp,
            "replicas": c.replicas}  # fmt: skip


def whole_nodes(gpu: str, gpus: int, gpus_per_node: int | None) -> int:
    """GPUs of the whole nodes that hold ``gpus`` (``gpus`` itself within one node)."""
    per_node = catalog.node_size(catalog.gpu(gpu), gpus_per_node)
    return gpus if gpus <= per_node else -(-gpus // per_node) * per_node


def _layouts(c: Candidate) -> tuple[Parallelism, ...]:
    """The engine instances' layouts of a candidate: its pools' for a disaggregated one."""
    if c.prefill is not None and c.decode is not None:
        return (c.prefill.par, c.decode.par)
    return (c.par,)


def search_context(
    spec: ModelSpec,
    *,
    model: str | ModelSpec,
    gpu: str,
    gpus: int,
    engine: str = "vllm",
    weights: str = "auto",
    kv_dtype: str = "auto",
    input_len: int = 1024,
    output_len: int = 1024,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    gpus_per_node: int | None = None,
    inter: str = catalog.DEFAULT_INTER,
    input_cv: float = 0.0,
    output_cv: float = 0.0,
) -> SearchContext:
    """What every candidate of one search is priced against: the engine as it starts on
    ``gpu``, its cost profile, the served weight and KV formats, the workload, the cluster and
    the SLO targets in seconds (no target: unbounded). One rule for :func:`search` and for
    the checks that walk candidates themselves."""
    # The engine's scheduler defaults depend on the GPU it starts on (vLLM: smaller
    # budget and running cap below 70 GiB and on A100; serving_engines.yaml).
    eng = engine_profile(engine).for_device(catalog.gpu(gpu))
    check_prompt_budget(eng, input_len, caller="search")
    fmt = served_format(model, weights, spec, catalog.gpu(gpu))
    check_runs_on(fmt, catalog.gpu(gpu))
    return SearchContext(
        model=spec,
        # On whole nodes, as ``infer`` runs each deployment it reports (12 GPUs: two 8-GPU
        # nodes, of which the candidates use at most 12).
        cluster=catalog.cluster(
            gpu, whole_nodes(gpu, gpus, gpus_per_node), gpus_per_node=gpus_per_node, inter=inter
        ),
        fmt=fmt,
        kv_dtype=served_kv_dtype(model, weights, fmt, eng, kv_dtype, spec, catalog.gpu(gpu)),
        profile=load_profile_for(eng.cost_profile),
        eng=eng,
        work=Workload(
            input_len=float(input_len),
            output_len=float(output_len),
            input_cv=input_cv,
            output_cv=output_cv,
        ),
        # A target not given: none (the planner's UNBOUNDED_S).
        slo_ttft_s=slo_ttft_ms / 1e3 if slo_ttft_ms else UNBOUNDED_S,
        slo_tpot_s=slo_tpot_ms / 1e3 if slo_tpot_ms else UNBOUNDED_S,
    )


@checks_arguments
def search(
    model: str | ModelSpec,
    *,
    gpu: str,
    gpus: int,
    engine: str = "vllm",
    weights: str = "auto",
    kv_dtype: str = "auto",
    input_len: int = 1024,
    output_len: int = 1024,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    price: float | None = None,
    gpus_per_node: int | None = None,
    inter: str = catalog.DEFAULT_INTER,
    disaggregated: bool = True,
    resolved_places: int | None = RESOLVED_PLACES,
    input_cv: float = 0.0,
    output_cv: float = 0.0,
) -> SearchResult:
    """Every deployment of ``model`` on at most ``gpus`` GPUs, ranked by goodput per GPU (or per
    dollar with ``price`` $/GPU-hour) under p99 TTFT/TPOT targets (no target: unbounded).

    The first ``resolved_places`` places are priced by ``infer``'s own prediction under
    Poisson arrivals at their goodput's rate (each option's ``infer`` entry: those arguments,
    with this call's, give its figures), the SLO crossing or the capacity resolved, whichever
    ends the walk up the rate (None: every candidate, slower; 0: the vectorized pre-screen's
    grid reading only, without the open loop's queue); the pruned ranking equals pricing every
    candidate on those places. ``input_cv``/``output_cv`` spread the request lengths as
    ``infer``'s do."""
    spec = model if isinstance(model, ModelSpec) else catalog.model(model)
    check_decoder(spec)
    check_lengths(spec, input_len, output_len)
    require(
        is_whole(gpus) and gpus >= 1,
        f"--gpus must be a whole number >= 1, got {gpus!r}",
        field="gpus",
    )
    require(gpus <= 512, f"--gpus {gpus}: the search covers up to 512 GPUs", field="gpus")
    for name, target in (("slo_ttft_ms", slo_ttft_ms), ("slo_tpot_ms", slo_tpot_ms)):
        # inf was taken as a target; no target is the flag left out (None).
        require(
            target is None or (math.isfinite(target) and target > 0),
            f"--{name.replace('_', '-')} must be a finite number of milliseconds > 0, got "
            f"{target}; leave it out for no target",
            field=name,
        )
    check_price(price)  # plan's rule (planner.search.Job)
    for name, cv in (("input_cv", input_cv), ("output_cv", output_cv)):
        require(
            0.0 <= cv <= 10.0,
            f"--{name.replace('_', '-')} must be in [0, 10], got {cv!r}",
            field=name,
        )
    ctx = search_context(
        spec,
        model=model,
        gpu=gpu,
        gpus=gpus,
        engine=engine,
        weights=weights,
        kv_dtype=kv_dtype,
        input_len=input_len,
        output_len=output_len,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        gpus_per_node=gpus_per_node,
        inter=inter,
        input_cv=input_cv,
        output_cv=output_cv,
    )
    # Only layouts the engine can run: none disaggregated for an engine modelled aggregated only
    # (EngineProfile.disaggregated), none past its tensor-parallel cap or pipelined where it has
    # no pipeline stages (EngineProfile.layout_refusal).
    cands = [
        c
        for c in candidates(
            spec, gpus, ctx.cluster.gpus_per_node, disagg=disaggregated and ctx.eng.disaggregated
        )
        if all(
            ctx.eng.layout_refusal(
                tp=p.tp,
                pp=p.pp,
                ep=p.ep,
                attention_dp=p.attention_dp,
                gpus_per_node=ctx.cluster.gpus_per_node,
            )
            is None
            for p in _layouts(c)
        )
    ]
    one = scorer(ctx)
    require(
        resolved_places is None or resolved_places >= 0,
        f"resolved_places must be >= 0 or None, got {resolved_places}",
        field="resolved_places",
    )
    # The places are priced (``price``), never the pre-screen's edge resolved: no count of
    # resolved edges, which read 0 on every search.
    prices = [0]
    exact = pricer(ctx)

    def priced(screened: Scored) -> Scored | None:
        prices[0] += 1
        return exact(screened)

    scored = rank(cands, one, resolved_places, priced)
    return SearchResult(
        model=spec.name,
        gpu=catalog.gpu(gpu).id,  # the catalog's id, whatever case it was typed in
        gpus=gpus,
        engine=ctx.eng.name,
        slo_ttft_ms=slo_ttft_ms or float("inf"),
        slo_tpot_ms=slo_tpot_ms or float("inf"),
        price_per_gpu_hour=price,
        ranked=scored,
        evaluated=len(cands),
        priced=prices[0],
        infer_args={
            "gpu": gpu,
            "engine": engine,
            "weights": weights,
            "kv_dtype": kv_dtype,
            "input_len": input_len,
            "output_len": output_len,
            "input_cv": input_cv,
            "output_cv": output_cv,
            "gpus_per_node": gpus_per_node,
            "inter": inter,
        },
    )


infer_search = search
"""``gpuscale.infer_search``: :func:`search` under the name of the ``gpuscale infer --search``
it answers (the CLI and the web page call it as ``serving_search.search``)."""
