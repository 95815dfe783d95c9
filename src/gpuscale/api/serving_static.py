"""``gpuscale.api.infer_static``: a static batch (no scheduler, no queueing) served at each of
several tensor-parallel degrees, side by side; what ``gpuscale infer`` prints without
``--concurrency``/``--request-rate``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.api.serving import check_lengths, check_requests, served_format
from gpuscale.catalog.serving_engines import engines as serving_engines
from gpuscale.costmodel.inference import InferenceEstimate, estimate_inference
from gpuscale.costmodel.profile import load_profile_for, profile_names
from gpuscale.costmodel.serving.formats import FORMATS, sixteen_bit_on
from gpuscale.errors import PLAIN_DIGITS, InputError, is_whole, parse_int, quoted, require
from gpuscale.specs import ModelSpec
from gpuscale.specs.hardware import fills_whole_nodes
from gpuscale.specs.training import KV_DTYPES, WEIGHT_DTYPES, Inference, KvDtype, WeightDtype

DEFAULT_TP = (1, 2, 4, 8)
"""The degrees compared when none are named (those that do not divide the heads are left out)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticOption:
    """The static batch at one TP degree."""

    tp: int
    estimate: InferenceEstimate

    def row(self) -> dict[str, Any]:
        return {"tp": self.tp, **self.estimate.row()}


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticServingResult:
    """One static batch per TP degree (``options``, in ascending TP) and the verdict."""

    model: str
    gpu: str
    batch: int
    input_len: int
    output_len: int
    weights: str
    kv_dtype: str
    engine: str
    options: tuple[StaticOption, ...]
    profile: str = ""
    """The cost profile priced with: the engine's own, or ``--profile`` laid over it."""

    @property
    def verdict(self) -> str:
        return _verdict([o.row() for o in self.options])

    def to_dict(self) -> dict[str, Any]:
        return document(
            {
                "model": self.model,
                "gpu": self.gpu,
                "batch": self.batch,
                "input": self.input_len,
                "output": self.output_len,
                "weights": self.weights,
                "kv_dtype": self.kv_dtype,
                "engine": self.engine,
                "profile": self.profile or self.engine,
                "options": [o.row() for o in self.options],
                "verdict": self.verdict,
            }
        )

    def figures(self) -> list[Any]:
        """Time per output token and tokens/s per GPU by tensor-parallel degree."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        options = [o for o in self.to_dict()["options"] if o.get("fits")]
        tps = [str(o["tp"]) for o in options]
        fig = make_subplots(rows=1, cols=2, subplot_titles=("ms per token", "tokens/s per GPU"))
        fig.add_trace(go.Bar(x=tps, y=[o["tpot_ms"] for o in options]), row=1, col=1)
        fig.add_trace(
            go.Bar(x=tps, y=[o["output_tokens_per_s_per_gpu"] for o in options]), row=1, col=2
        )
        fig.update_xaxes(title_text="TP")
        fig.update_layout(
            title=f"{self.model} on {self.gpu}: latency and throughput by TP", showlegend=False
        )
        return [fig]


@checks_arguments
def infer_static(
    model: str | ModelSpec,
    *,
    gpu: str,
    tp: int | str | Sequence[int] | None = None,
    gpus_per_node: int | None = None,
    inter: str = catalog.DEFAULT_INTER,
    batch: int = 1,
    input_len: int = 512,
    output_len: int = 256,
    weights: str = "auto",
    kv_dtype: str = "auto",
    engine: str | None = None,
    profile: str | None = None,
) -> StaticServingResult:
    """TTFT, time per output token and throughput of a static batch of ``batch`` sequences at
    each TP degree in ``tp`` (a list or the CLI's comma text; ``None``: 1, 2, 4, 8 less those
    that do not divide the heads or would part-fill a second node of ``gpus_per_node``; a named
    degree that does either is an error).

    ``weights`` "auto" is the checkpoint's stored width (``served_format``), ``kv_dtype``
    "auto" is bf16; ``engine`` (default "generic") is any cost profile or a serving engine
    (its kernel profile: ATOM's is SGLang's, ``serving_engines.yaml``), with ``profile`` a
    calibration YAML laid over it."""
    spec = model if isinstance(model, ModelSpec) else catalog.model(model)
    stated_weights = weights != "auto"
    if weights == "auto":
        # The static table's nearest dtype to the checkpoint's stored format (its 8- or 4-bit
        # weight bytes), 16-bit for a checkpoint that is not pre-quantized.
        stored = served_format(model, "auto", spec)
        bits = round(stored.weight_bytes * 8)
        weights = {8: "fp8" if stored.native == "fp8" else "int8", 4: "int4"}.get(bits, "bf16")
    if weights not in WEIGHT_DTYPES:
        # A format only the serving model takes, or none at all ("bogus" was called a serving
        # format).
        what = "is a serving format" if weights in FORMATS else "is not a known format"
        raise InputError(
            f"--weights {quoted(weights)} {what}; the static-batch table (--batch) takes auto, "
            f"{', '.join(WEIGHT_DTYPES)}; give --concurrency for the serving model "
            f"({', '.join(FORMATS)})",
            field="weights",
        )
    engine = "generic" if engine is None else engine  # "" is refused as a profile name
    # bf16 on a GPU without it: fp16 where auto chose it, refused where stated (one rule with
    # the serving model, ``formats.sixteen_bit_on``).
    device = catalog.gpu(gpu)
    weights = sixteen_bit_on(weights, device, stated=stated_weights, flag="--weights")
    kv_stated = kv_dtype != "auto"
    kv_dtype = "bf16" if kv_dtype == "auto" else kv_dtype
    kv_dtype = sixteen_bit_on(kv_dtype, device, stated=kv_stated, flag="--kv-dtype")
    require(
        kv_dtype in KV_DTYPES,
        f"--kv-dtype {kv_dtype!r} unknown; accepted: auto, {', '.join(KV_DTYPES)}",
        field="kv_dtype",
    )
    check_requests(batch, "batch")
    check_lengths(spec, input_len, output_len)
    engines = serving_engines()
    known = sorted(set(profile_names()) | set(engines))
    require(
        engine in known,
        f"--engine {quoted(engine)} unknown to the static-batch table; accepted: "
        + ", ".join(known),
        field="engine",
    )
    if engine in engines:
        # the vendor rule the serving model applies (atom was priced on an H100 here)
        engines[engine].for_device(catalog.gpu(gpu))
    prof = load_profile_for(engines[engine].cost_profile if engine in engines else engine, profile)
    inference = Inference(
        weight_dtype=cast("WeightDtype", weights),  # checked against WEIGHT_DTYPES above
        kv_dtype=cast("KvDtype", kv_dtype),  # checked against KV_DTYPES above
        batch=batch,
        context_len=input_len + output_len,
    )
    options = []
    degrees = _tp_list(tp, spec.num_heads)
    if tp is None:
        # The default list leaves out degrees that would part-fill a second node, as it leaves
        # out those that do not divide the heads (TP 4 on 3-GPU nodes).
        per_node = catalog.node_size(catalog.gpu(gpu), gpus_per_node)
        degrees = [d for d in degrees if fills_whole_nodes(d, per_node)]
    for degree in degrees:
        # One TP group of ``degree`` GPUs: a refusal names the --tp typed, not a --gpus.
        cluster = catalog.cluster(
            gpu,
            degree,
            gpus_per_node=gpus_per_node,
            inter=inter,
            count=f"--tp {degree} ({degree} GPUs, one tensor-parallel group)",
            count_field="tp",
        )
        est = estimate_inference(
            spec,
            cluster,
            inference,
            tp=degree,
            input_len=input_len,
            output_len=output_len,
            profile=prof,
        )
        options.append(StaticOption(tp=degree, estimate=est))
    return StaticServingResult(
        model=spec.name,
        gpu=catalog.gpu(gpu).id,  # the catalog's id, whatever case it was typed in
        batch=batch,
        input_len=input_len,
        output_len=output_len,
        weights=weights,
        kv_dtype=kv_dtype,
        engine=engine,
        options=tuple(options),
        profile=prof.name,
    )


def _tp_list(tp: int | str | Sequence[int] | None, heads: int) -> list[int]:
    """The TP degrees to compare. Degrees that do not divide the heads are an error when the
    user named them, and are left out of the default list."""
    given = tp is not None
    if tp is None:
        values, text = list(DEFAULT_TP), ",".join(map(str, DEFAULT_TP))
    elif isinstance(tp, str):
        text = tp
        try:
            values = [parse_int(v) for v in tp.split(",")]
        except InputError:
            raise InputError(
                f"--tp {quoted(text)} must be comma-separated integers, e.g. 1,2,4,8, in "
                f"{PLAIN_DIGITS}",
                field="tp",
            ) from None
    elif is_whole(tp):  # one degree (tp=8 failed as 'int' object is not iterable)
        values, text = [cast(int, tp)], str(tp)
    elif isinstance(tp, (list, tuple, np.ndarray)):
        # 2.5 was cut to 2 and an empty list gave a table of no degree.
        values, text = list(tp), ",".join(map(str, tp))
    else:
        raise InputError(
            f"--tp must be a whole number, a list of them or comma-separated text, got {tp!r}; "
            "accepted: e.g. 8, [1, 2, 4, 8] or '1,2,4,8'",
            field="tp",
        )
    require(
        bool(values)
        and all(is_whole(v) and v >= 1 for v in values)
        and len(set(values)) == len(values),
        f"--tp '{text}' needs distinct positive integers, e.g. 1,2,4,8",
        field="tp",
    )
    values = [int(v) for v in values]  # numpy integers as Python ones, for the JSON
    bad = [v for v in values if heads % v]
    if bad and given:
        raise InputError(
            f"--tp {bad[0]} does not divide the model's {heads} attention heads; "
            f"accepted: divisors of {heads}",
            field="tp",
        )
    return sorted(v for v in values if v not in bad)


def _verdict(rows: list[dict[str, Any]]) -> str:
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        return "fits at none of these TP degrees: add GPUs, quantize weights (--weights) or the KV cache"
    fastest = min(fitting, key=lambda r: r["tpot_ms"])
    cheapest = max(fitting, key=lambda r: r["output_tokens_per_s_per_gpu"])
    smallest = fitting[0]
    parts = [f"lowest latency at TP={fastest['tp']} ({fastest['tpot_ms']:.1f} ms/token)"]
    if smallest["tp"] != fastest["tp"]:
        parts.append(
            f"TP={smallest['tp']} is {smallest['tpot_ms'] / fastest['tpot_ms']:.1f}x slower "
            "per token"
        )
    parts.append(
        f"most tokens per GPU at TP={cheapest['tp']} "
        f"({cheapest['output_tokens_per_s_per_gpu']:,.0f}/s per GPU)"
    )
    return "; ".join(parts)
