"""``gpuscale infer``: serving latency and throughput per tensor-parallel degree."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import catalog
from gpuscale.api import profile_names
from gpuscale.api.serving import infer as api_infer
from gpuscale.api.serving_search import search as api_search
from gpuscale.api.serving_static import infer_static
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    html_option,
    inter_option,
    json_option,
    write_result_html,
)
from gpuscale.cli._serving_options import serving_options
from gpuscale.errors import InputError, require
from gpuscale.report.serving import print_search, print_serving, print_static
from gpuscale.specs.training import KV_DTYPES, WEIGHT_DTYPES

_SEARCH_ONLY = ("search", "gpus", "slo_ttft_ms", "slo_tpot_ms", "price")
"""Options of ``--search``; the rest of :func:`serving_options` describe one deployment."""


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
@html_option
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
    engine: str | None,
    profile_file: str | None,
    as_json: bool,
    html_path: str | None,
    **serving: Any,
) -> None:
    """Time to first token, time per output token and throughput of serving MODEL.

    Under load (--concurrency C or --request-rate R): a continuously batching engine
    (--engine tensorrt-llm|vllm|sglang) with its scheduler, KV cache and queueing, aggregated
    (--tp/--pp/--ep/--attention-dp/--replicas) or disaggregated (--prefill-workers ...
    --decode-workers ...). With --search: the deployment on --gpus GPUs with the most goodput
    under --slo-ttft-ms/--slo-tpot-ms. Otherwise a static batch (--batch) per TP degree."""
    check_writable(html_path, "--html")
    ctx = click.get_current_context()
    given = ctx.get_parameter_source("tp_text") is not click.core.ParameterSource.DEFAULT
    common: dict[str, Any] = {
        "gpu": gpu,
        "weights": weights,
        "kv_dtype": kv_dtype,
        "input_len": input_len,
        "output_len": output_len,
    }
    place: dict[str, Any] = {"gpus_per_node": gpus_per_node, "inter": inter}
    if serving["search"]:
        require(
            serving["gpus"] is not None, "--search needs --gpus N (GPUs available)", field="gpus"
        )
        search = {k: serving[k] for k in _SEARCH_ONLY[1:]}
        result: Any = api_search(model, engine=engine or "vllm", **common, **search, **place)
        render = print_search
    elif any(
        serving[k] is not None
        for k in ("concurrency", "request_rate", "prefill_workers", "decode_workers")
    ):
        load = {k: v for k, v in serving.items() if k not in _SEARCH_ONLY}
        tp = _single(tp_text, given)
        result = api_infer(
            model, engine=engine or "vllm", tp=tp, profile=profile_file, **common, **load, **place
        )
        render = print_serving
    else:
        result = infer_static(
            model,
            tp=tp_text if given else None,
            batch=batch,
            engine=engine,
            profile=profile_file,
            **common,
            **place,
        )
        render = print_static
    doc = result.to_dict()
    write_result_html(
        html_path, f"gpuscale infer: {model} on {gpu}", str(doc.get("verdict", "")), result
    )
    if as_json:
        emit_json(doc)
    else:
        render(console, doc)


def _single(tp_text: str, given: bool) -> int:
    if not given:
        return 1
    try:
        return int(tp_text)
    except ValueError:
        raise InputError(
            f"--tp '{tp_text}': the serving model takes one degree, e.g. --tp 4", field="tp"
        ) from None
