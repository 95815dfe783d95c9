"""``gpuscale infer``: serving latency and throughput per tensor-parallel degree."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from gpuscale.api import profile_names
from gpuscale.api.serving import ENGINE_OPTIONS, ENGINES, MAX_NUM_REQUESTS, WEIGHT_FORMATS
from gpuscale.api.serving import infer as api_infer
from gpuscale.api.serving_search import search as api_search
from gpuscale.api.serving_static import infer_static
from gpuscale.api.serving_sweep import infer_sweep
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    typed_options,
    whole_number,
    write_result_html,
)
from gpuscale.cli._options import MODEL, SEARCH, SERVING, WORKER, flag, opt, options
from gpuscale.errors import PLAIN_DIGITS, InputError, parse_float, parse_int, quoted, require
from gpuscale.report.serving import print_search, print_serving, print_static, print_sweep
from gpuscale.specs.training import KV_DTYPES, WEIGHT_DTYPES


def _engine_only() -> str:
    """The engine options some engines lack, with the engines that have them, from
    :data:`ENGINE_OPTIONS` (the table the API checks against)."""
    every = {e for o in ENGINE_OPTIONS.values() for e in o.engines}
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, o in ENGINE_OPTIONS.items():
        if set(o.engines) != every:
            groups.setdefault(o.engines, []).append(name)
    return "; ".join(f"{', '.join(names)}: {' / '.join(e)} only" for e, names in groups.items())


LOAD = ("concurrency", "request_rate", "prefill_workers", "decode_workers")
"""Options that ask for the serving model under load (any one of them)."""

SPECULATIVE = ("speculative", "draft_tokens", "acceptance")
"""Speculative decoding under load (``gpuscale.api.speculative``)."""

UNDER_LOAD = (
    *("concurrency", "request_rate", "num_requests", "prefix_hit", "input_cv", "output_cv"),
    *SPECULATIVE,
    *("pp", "ep", "attention_dp", "replicas"),
    *(f"{stage}_{what}" for stage in ("prefill", "decode") for what in WORKER),
    "decode_routing",
)
"""Options only the serving model under load takes."""

SPREAD = ("input_cv", "output_cv")
"""The spread of request lengths: under load and in the search."""

SEARCHED = ("gpus", "slo_ttft_ms", "slo_tpot_ms", "price")
"""Options only ``--search`` takes."""

NOT_TAKEN: dict[str, tuple[tuple[str, ...], str]] = {
    "static": (
        (*UNDER_LOAD, *SEARCHED),
        "the static-batch table (no --concurrency or --request-rate) does not take it; give "
        "--concurrency or --request-rate for the serving model under load, --search for the "
        "deployment search",
    ),
    "load": (
        ("batch", *SEARCHED),
        "the serving model under load does not take it (the batch follows from the load; "
        "--search takes --gpus, --slo-*, --price)",
    ),
    "search": (
        (*(k for k in UNDER_LOAD if k not in SPREAD), "tp", "batch", "profile"),
        "--search chooses the layout and the load itself; it takes --gpus, --slo-ttft-ms, "
        "--slo-tpot-ms, --price, --engine, --weights, --kv-dtype, --input, --output, "
        "--input-cv, --output-cv, --gpus-per-node and --inter",
    ),
}
"""What each question does not take, and why: a flag it would ignore is refused instead."""

CONCURRENCY = flag(
    "concurrency",
    type=str,
    help="Closed loop: requests kept in flight; several, comma-separated (1,8,64,256), sweep "
    "the load and print the latency-throughput curve.",
)


@click.command("infer")
@options(
    MODEL,
    flag("gpu", required=True),
    flag(
        "tp",
        type=str,
        default="1,2,4,8",
        help="Tensor-parallel degrees to compare (comma-separated).",
    ),
    "gpus_per_node",
    flag("inter", help="Fabric used when TP spans nodes."),
    "batch",
    opt("--input input_len", int, 512, "Prompt tokens."),
    opt("--output output_len", int, 256, "Generated tokens."),
    opt(
        "--weights",
        default="auto",
        help="Weight format under load: auto (the format a pre-quantized checkpoint such as "
        "deepseek-ai/DeepSeek-R1 or openai/gpt-oss-120b stores, else bf16), "
        f"{', '.join(WEIGHT_FORMATS[1:])} (int8, int4: weight-only as int8_wo, int4_wo; "
        "weight-only too where the GPU lacks the rate); the static-batch table takes auto, "
        f"{', '.join(WEIGHT_DTYPES)}.",
    ),
    opt(
        "--kv-dtype",
        click.Choice(("auto", *KV_DTYPES)),
        "auto",
        "KV-cache dtype; auto: what the engine stores for the weights (FP8 where the "
        "checkpoint declares an FP8 KV cache or TensorRT-LLM quantizes the weights, else 16-bit; "
        "bf16 for the static table). Each engine refuses a dtype it cannot store.",
    ),
    opt(
        "--engine",
        help=f"Serving engine under load: {', '.join(ENGINES)} (default vllm; atom "
        "aggregated only); for the "
        f"static-batch table any profile: {', '.join(profile_names())} (default generic).",
    ),
    flag("profile", type=str, help="Calibration profile YAML overlay."),
    opt(
        "--engine-options engine_options",
        str,
        help="Under load: scheduler settings of the launch, NAME=VALUE,... (repeatable): "
        + ", ".join(ENGINE_OPTIONS)
        + f" ({_engine_only()}).",
        multiple=True,
    ),
    CONCURRENCY,
    *[item for item in SERVING if item != "concurrency"],
    opt(
        "--speculative",
        default="none",
        help="Under load: speculative decoding with the model's draft module: none, mtp "
        "(multi-token prediction, DeepSeek-V3/R1, Qwen3.5); on the decode workers when "
        "disaggregated.",
    ),
    opt("--draft-tokens draft_tokens", int, help="With --speculative: draft tokens K per step."),
    opt(
        "--acceptance",
        float,
        help="With --speculative: per-token draft acceptance in [0, 1] (default: the published "
        "figure for the model and K).",
    ),
    SEARCH,
    "html",
    "json",
)
def command(model: str, as_json: bool, html_path: str | None, **o: Any) -> None:
    """Time to first token, time per output token and throughput of serving MODEL.

    Under load (--concurrency C or --request-rate R): a continuously batching engine
    (--engine tensorrt-llm|vllm|sglang|atom) with its scheduler, KV cache and queueing, aggregated
    (--tp/--pp/--ep/--attention-dp/--replicas) or disaggregated (--prefill-workers ...
    --decode-workers ...). With --search: the deployment on --gpus GPUs with the most goodput
    under --slo-ttft-ms/--slo-tpot-ms. Otherwise a static batch (--batch) per TP degree."""
    check_writable(html_path, "--html")
    ctx = click.get_current_context()
    typed_tp = ctx.get_parameter_source("tp") is not ParameterSource.DEFAULT
    tp, batch, engine, search = o.pop("tp"), o.pop("batch"), o.pop("engine"), o.pop("search")
    engine_options = _engine_options(o.pop("engine_options"))
    common = {k: o.pop(k) for k in ("gpu", "weights", "kv_dtype", "input_len", "output_len")}
    common |= {k: o.pop(k) for k in ("gpus_per_node", "inter")}  # every question takes these
    searched = {k: o.pop(k) for k in ("gpus", "slo_ttft_ms", "slo_tpot_ms", "price")}
    result: Any
    require(
        not engine_options or (not search and any(o[k] is not None for k in LOAD)),
        "--engine-options apply under load (--concurrency, --request-rate or workers), "
        "not to --search or the static-batch table",
        field="engine_options",
    )
    question = "search" if search else "load" if any(o[k] is not None for k in LOAD) else "static"
    # The engine under load and in the search (``--engine ''`` is refused by name, not served
    # as the default vllm).
    under_load = "vllm" if engine is None else engine
    refused, why = NOT_TAKEN[question]
    typed = typed_options(ctx)
    for name in (n for n in refused if n in typed):
        raise InputError(f"{typed[name]}: {why}", field=name)
    if search:
        require(
            searched["gpus"] is not None, "--search needs --gpus N (GPUs available)", field="gpus"
        )
        spread = {k: o[k] for k in SPREAD}
        result = api_search(model, engine=under_load, **common, **searched, **spread)
        render = print_search
    elif any(o[k] is not None for k in LOAD):
        o["engine_options"] = engine_options or None
        tp = _single(tp) if typed_tp else 1
        loads = _loads(o.pop("concurrency"))
        if loads is not None and len(loads) > 1:
            require(  # the rule infer states for one load, before the sweep's own checks
                o["request_rate"] is None,
                "give exactly one of --concurrency (closed loop) or --request-rate (open loop)",
                field="concurrency",
            )
            result = infer_sweep(model, concurrency=loads, engine=under_load, tp=tp, **common, **o)
            render = print_sweep
        else:
            load = loads[0] if loads else None
            result = api_infer(model, engine=under_load, tp=tp, concurrency=load, **common, **o)
            render = print_serving
    else:
        profile, tp = o["profile"], tp if typed_tp else None
        result = infer_static(model, tp=tp, batch=batch, engine=engine, profile=profile, **common)
        render = print_static
    doc = result.to_dict()
    title = f"gpuscale infer: {model} on {common['gpu']}"
    write_result_html(html_path, title, str(doc.get("verdict", "")), result)
    if as_json:
        emit_json(doc)
    else:
        render(console, doc)


def _engine_options(texts: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs (comma-separated, repeatable) as typed values (true/false, whole
    numbers, decimals, lists of whole numbers joined by ':'); the names and ranges are checked
    by ``gpuscale.api.infer``."""
    out: dict[str, Any] = {}
    for text in texts:
        # An option with no pair in it (``--engine-options ''``) launched the defaults silently.
        require(
            any(text.split(",")),
            f"--engine-options {quoted(text)} names no setting; give NAME=VALUE, e.g. "
            "max_num_batched_tokens=16384",
            field="engine_options",
        )
    for item in (part for text in texts for part in text.split(",") if part):
        name, eq, text = item.partition("=")
        require(
            bool(eq and name and text),
            f"--engine-options {quoted(item)}: give NAME=VALUE, e.g. max_num_batched_tokens=16384",
            field="engine_options",
        )
        value: Any
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        elif ":" in text:
            # A list (cuda_graph_batch_sizes=1:2:4:8): whole numbers joined by ':'.
            try:
                value = tuple(parse_int(part) for part in text.split(":"))
            except InputError:
                raise InputError(
                    f"--engine-options {quoted(item)}: a list takes whole numbers joined by ':' "
                    f"({PLAIN_DIGITS}), e.g. cuda_graph_batch_sizes=1:2:4:8",
                    field="engine_options",
                ) from None
        else:
            try:
                value = parse_int(text)
            except InputError:
                try:
                    value = parse_float(text)
                except InputError:
                    raise InputError(
                        f"--engine-options {quoted(item)}: VALUE must be true, false or a "
                        f"number ({PLAIN_DIGITS})",
                        field="engine_options",
                    ) from None
        key = name.strip().replace("-", "_")
        # A name given twice kept its last value without a word (max_num_seqs=4,max_num_seqs=8).
        require(
            key not in out,
            f"--engine-options {quoted(key)} is given twice; accepted: each NAME once",
            field="engine_options",
        )
        out[key] = value
    return out


def _loads(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [whole_number(part, "--concurrency", "concurrency") for part in text.split(",")]
    except InputError:
        raise InputError(
            f"--concurrency {quoted(text)}: give a whole number of requests, 1 to "
            f"{MAX_NUM_REQUESTS:,}, or several comma-separated (1,8,64), in {PLAIN_DIGITS}",
            field="concurrency",
        ) from None


def _single(tp_text: str) -> int:
    try:
        return whole_number(tp_text, "--tp", "tp")
    except InputError:
        if "," not in tp_text:
            raise
        raise InputError(
            f"--tp {quoted(tp_text)}: the serving model takes one degree, e.g. --tp 4", field="tp"
        ) from None
