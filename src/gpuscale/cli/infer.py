"""``gpuscale infer``: serving latency and throughput per tensor-parallel degree."""

from __future__ import annotations

from typing import Any, cast

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.api.serving import infer as api_infer
from gpuscale.api.serving_search import search as api_search
from gpuscale.cli._common import console, emit_json, inter_option, json_option
from gpuscale.cli._serving_options import serving_options
from gpuscale.costmodel.inference import estimate_inference
from gpuscale.costmodel.profile import load_profile_for, profile_names
from gpuscale.errors import InputError, require
from gpuscale.specs.training import KV_DTYPES, WEIGHT_DTYPES, Inference, KvDtype, WeightDtype


def _tp_list(text: str, heads: int, given: bool) -> list[int]:
    """The TP degrees to compare. Degrees that do not divide the heads are an error when the
    user named them, and are left out of the default list."""
    items = [v.strip() for v in text.split(",")]
    try:
        values = [int(v) for v in items]
    except ValueError:
        raise InputError(f"--tp '{text}' must be comma-separated integers, e.g. 1,2,4,8") from None
    require(
        all(v >= 1 for v in values) and len(set(values)) == len(values),
        f"--tp '{text}' needs distinct positive integers, e.g. 1,2,4,8",
    )
    bad = [v for v in values if heads % v]
    if bad and given:
        raise InputError(
            f"--tp {bad[0]} does not divide the model's {heads} attention heads; "
            f"accepted: divisors of {heads}"
        )
    return sorted(v for v in values if v not in bad)


@click.command("infer")
@click.argument("model")
@click.option("--gpu", required=True, help="Catalog GPU id.")
@click.option(
    "--tp",
    "tp_text",
    default="1,2,4,8",
    show_default=True,
    help="Tensor-parallel degrees to compare (comma-separated).",
)
@click.option("--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True)
@inter_option("Fabric used when TP spans nodes.")
@click.option("--batch", type=int, default=1, show_default=True, help="Concurrent sequences.")
@click.option(
    "--input", "input_len", type=int, default=512, show_default=True, help="Prompt tokens."
)
@click.option(
    "--output", "output_len", type=int, default=256, show_default=True, help="Generated tokens."
)
@click.option(
    "--weights",
    default="bf16",
    show_default=True,
    help="Weight format: bf16, fp8, fp8_block, nvfp4, mxfp4, int8_wo, fp8_wo, int4_wo "
    "(weight-only where the GPU lacks the rate); the static-batch table takes "
    f"{', '.join(WEIGHT_DTYPES)}.",
)
@click.option(
    "--kv-dtype",
    type=click.Choice(("auto", *KV_DTYPES)),
    default="auto",
    show_default=True,
    help="KV-cache dtype; auto: the engine's default for the weights (bf16 for the static table).",
)
@click.option(
    "--engine",
    default=None,
    help="Serving engine under load: tensorrt-llm, vllm, sglang (default vllm); for the "
    f"static-batch table any profile: {', '.join(profile_names())} (default generic).",
)
@click.option("--profile", "profile_file", default=None, help="Calibration profile YAML overlay.")
@serving_options
@json_option
def command(
    model: str,
    gpu: str,
    tp_text: str,
    gpus_per_node: int,
    inter: str,
    batch: int,
    input_len: int,
    output_len: int,
    weights: str,
    kv_dtype: str,
    engine: str,
    profile_file: str | None,
    as_json: bool,
    **serving: Any,
) -> None:
    """Time to first token, time per output token and throughput of serving MODEL.

    Under load (--concurrency C or --request-rate R): a continuously batching engine
    (--engine tensorrt-llm|vllm|sglang) with its scheduler, KV cache and queueing, aggregated
    (--tp/--pp/--ep/--attention-dp/--replicas) or disaggregated (--prefill-workers ...
    --decode-workers ...). With --search: the deployment on --gpus GPUs with the most goodput
    under --slo-ttft-ms/--slo-tpot-ms. Otherwise a static batch (--batch) per TP degree."""
    if serving["search"]:
        serving["gpus_per_node"], serving["inter"] = gpus_per_node, inter
        _search(model, gpu, input_len, output_len, weights, kv_dtype, engine, serving, as_json)
        return
    if any(serving[k] is not None for k in ("concurrency", "request_rate")) or any(
        serving[k] is not None for k in ("prefill_workers", "decode_workers")
    ):
        _serve(
            model,
            gpu,
            tp_text,
            gpus_per_node,
            inter,
            input_len,
            output_len,
            weights,
            kv_dtype,
            engine,
            profile_file,
            as_json,
            serving,
        )
        return
    require(
        weights in WEIGHT_DTYPES,
        f"--weights {weights} is a serving format; the static-batch table (--batch) takes "
        f"{', '.join(WEIGHT_DTYPES)}; give --concurrency for the serving model",
    )
    engine = engine or "generic"
    kv_dtype = "bf16" if kv_dtype == "auto" else kv_dtype
    spec = catalog.model(model)
    for flag, value in (("--batch", batch), ("--input", input_len), ("--output", output_len)):
        require(value >= 1, f"{flag} must be >= 1, got {value}")
    profile = load_profile_for(engine, profile_file)
    inference = Inference(
        weight_dtype=cast("WeightDtype", weights),  # click.Choice(WEIGHT_DTYPES)
        kv_dtype=cast("KvDtype", kv_dtype),  # click.Choice(KV_DTYPES)
        batch=batch,
        context_len=input_len + output_len,
    )
    rows: list[dict[str, Any]] = []
    ctx = click.get_current_context()
    given = ctx.get_parameter_source("tp_text") is not click.core.ParameterSource.DEFAULT
    for tp in _tp_list(tp_text, spec.num_heads, given):
        cluster = catalog.cluster(gpu, tp, gpus_per_node=gpus_per_node, inter=inter)
        est = estimate_inference(
            spec,
            cluster,
            inference,
            tp=tp,
            input_len=input_len,
            output_len=output_len,
            profile=profile,
        )
        rows.append({"tp": tp, **est.row()})
    fitting = [r for r in rows if r["fits"]]
    verdict = _verdict(rows, fitting)
    if as_json:
        emit_json(
            {
                "model": spec.name,
                "gpu": gpu,
                "batch": batch,
                "input": input_len,
                "output": output_len,
                "weights": weights,
                "kv_dtype": kv_dtype,
                "engine": engine,
                "options": rows,
                "verdict": verdict,
            }
        )
        return
    table = Table(
        title=f"{spec.name} on {gpu}: batch {batch}, {input_len} in / {output_len} out, "
        f"{weights} weights, {kv_dtype} KV, {engine}",
        title_justify="left",
    )
    for col in (
        "TP",
        "fits",
        "GiB/GPU",
        "TTFT ms",
        "ms/tok",
        "tok/s",
        "tok/s/GPU",
        "mem ms",
        "comm ms",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        b = r["breakdown"]
        table.add_row(
            str(r["tp"]),
            "yes" if r["fits"] else "[red]no[/red]",
            f"{r['memory_per_gpu_gib']:.1f}",
            f"{r['ttft_ms']:.1f}",
            f"{r['tpot_ms']:.2f}",
            f"{r['output_tokens_per_s']:,.0f}",
            f"{r['output_tokens_per_s_per_gpu']:,.0f}",
            f"{(b['decode_gemm'] + b['decode_attention']) * 1e3:.2f}",
            f"{b['decode_tp_comm'] * 1e3:.2f}",
        )
    console.print(table)
    console.print(f"verdict: {verdict}")


def _single(tp_text: str, given: bool) -> int:
    if not given:
        return 1
    try:
        return int(tp_text)
    except ValueError:
        raise InputError(
            f"--tp '{tp_text}': the serving model takes one degree, e.g. --tp 4", field="tp"
        ) from None


def _serve(
    model: str,
    gpu: str,
    tp_text: str,
    gpus_per_node: int,
    inter: str,
    input_len: int,
    output_len: int,
    weights: str,
    kv_dtype: str,
    engine: str | None,
    profile_file: str | None,
    as_json: bool,
    s: dict[str, Any],
) -> None:
    ctx = click.get_current_context()
    given = ctx.get_parameter_source("tp_text") is not click.core.ParameterSource.DEFAULT
    result = api_infer(
        model,
        gpu=gpu,
        engine=engine or "vllm",
        weights=weights,
        kv_dtype=kv_dtype,
        input_len=input_len,
        output_len=output_len,
        concurrency=s["concurrency"],
        request_rate=s["request_rate"],
        num_requests=s["num_requests"],
        prefix_hit=s["prefix_hit"],
        input_cv=s["input_cv"],
        output_cv=s["output_cv"],
        tp=_single(tp_text, given),
        pp=s["pp"],
        ep=s["ep"],
        attention_dp=s["attention_dp"],
        replicas=s["replicas"],
        prefill_workers=s["prefill_workers"],
        prefill_tp=s["prefill_tp"],
        prefill_ep=s["prefill_ep"],
        prefill_attention_dp=s["prefill_attention_dp"],
        prefill_batch=s["prefill_batch"],
        decode_workers=s["decode_workers"],
        decode_tp=s["decode_tp"],
        decode_ep=s["decode_ep"],
        decode_attention_dp=s["decode_attention_dp"],
        decode_batch=s["decode_batch"],
        gpus_per_node=gpus_per_node,
        inter=inter,
        profile=profile_file,
    )
    doc = result.to_dict()
    if as_json:
        emit_json(doc)
        return
    o = doc["options"][0]
    table = Table(
        title=f"{doc['model']} on {gpu} ({doc['engine']}, {doc['weights']}): "
        f"{input_len} in / {output_len} out, "
        + (f"concurrency {s['concurrency']}" if s["concurrency"] else f"{s['request_rate']} req/s"),
        title_justify="left",
    )
    for col in ("", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="right")
    table.add_row(
        "TTFT ms",
        *(f"{o[k]:.1f}" for k in ("ttft_ms", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99")),
    )
    table.add_row(
        "TPOT ms",
        *(f"{o[k]:.2f}" for k in ("tpot_ms", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99")),
    )
    table.add_row(
        "e2e s", *(f"{o[k]:.2f}" for k in ("e2e_s", "e2e_s_p50", "e2e_s_p90", "e2e_s_p99"))
    )
    console.print(table)
    console.print(
        f"throughput: {o['output_tokens_per_s']:,.0f} output tok/s "
        f"({o['output_tokens_per_s_per_gpu']:,.0f}/GPU), {o['requests_per_s']:.2f} req/s; "
        f"KV cache {o['kv_cache_occupancy']:.0%} full, "
        f"{o['preemptions_per_request']:.2f} preemptions/request; TPOT excludes the first token"
    )
    for note in o["notes"]:
        console.print(f"note: {note}")
    console.print(f"verdict: {doc['verdict']}")


def _search(
    model: str,
    gpu: str,
    input_len: int,
    output_len: int,
    weights: str,
    kv_dtype: str,
    engine: str | None,
    s: dict[str, Any],
    as_json: bool,
) -> None:
    require(s["gpus"] is not None, "--search needs --gpus N (GPUs available)", field="gpus")
    result = api_search(
        model,
        gpu=gpu,
        gpus=s["gpus"],
        engine=engine or "vllm",
        weights=weights,
        kv_dtype=kv_dtype,
        input_len=input_len,
        output_len=output_len,
        slo_ttft_ms=s["slo_ttft_ms"],
        slo_tpot_ms=s["slo_tpot_ms"],
        price=s["price"],
        gpus_per_node=s["gpus_per_node"],
        inter=s["inter"],
    )
    doc = result.to_dict()
    if as_json:
        emit_json(doc)
        return
    table = Table(
        title=f"{doc['model']} on up to {s['gpus']} x {gpu}: best deployments", title_justify="left"
    )
    for col in ("deployment", "GPUs", "conc.", "TTFT p99 ms", "TPOT p99 ms", "goodput tok/s/GPU"):
        table.add_column(col, justify="right")
    for o in doc["options"][:8]:
        table.add_row(
            o["label"],
            str(o["gpus"]),
            str(o["concurrency"]),
            f"{o['ttft_ms_p99']:.0f}",
            f"{o['tpot_ms_p99']:.1f}",
            f"{o['goodput_tokens_per_s_per_gpu']:,.0f}",
        )
    console.print(table)
    console.print(doc["explanation"])


def _verdict(rows: list[dict[str, Any]], fitting: list[dict[str, Any]]) -> str:
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
