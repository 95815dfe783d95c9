"""``gpuscale infer``: serving latency and throughput per tensor-parallel degree."""

from __future__ import annotations

from typing import Any, cast

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, inter_option, json_option
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
@click.option("--weights", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True)
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="bf16", show_default=True)
@click.option(
    "--engine",
    default="generic",
    show_default=True,
    help=f"Serving-stack profile: {', '.join(profile_names())}.",
)
@click.option("--profile", "profile_file", default=None, help="Calibration profile YAML overlay.")
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
) -> None:
    """Time to first token, time per output token and throughput of serving MODEL, for each
    tensor-parallel degree: does splitting the model over more GPUs pay for its all-reduces?"""
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
