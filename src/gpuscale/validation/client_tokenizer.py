"""Prompt lengths the server saw where InferenceX's benchmark client tokenized differently.

InferenceX's client draws random token ids, decodes them to text and trims the text until its
own tokenizer counts the target length (``utils/bench_serving/benchmark_serving.py``
``sample_random_requests``); the server counts the text again with its tokenizer. On
transformers 5 the two differ for DeepSeek-R1: transformers 5 loads its ``LlamaTokenizerFast``
over a ByteLevel BPE with a Metaspace pre-tokenizer and a Llama decoder, which SGLang's server
repairs at start-up (``hf_transformers_utils._fix_v5_tokenizer_components``) and the client did
not: the client's repair (InferenceX ef01c2205, 2026-03-27, "~5x token count inflation (e.g.
7000 tokens -> 35000 tokens)") looked only in a local model directory, and the scripts pass a
Hub id, until 5fe6d56ee (2026-05-15, "~5x client/server tokenizer mismatch and a false
throughput regression (DeepSeek-R1 FP4 on B200: 1970 -> 425 tok/s)").

A single-node record is affected when its client ran on transformers 5: the scripts run the
client in the server's container (``benchmarks/benchmark_lib.sh`` ``run_benchmark_serving``
after ``sglang.launch_server`` in the same script). The images' transformers, from the sglang
wheels' ``Requires-Dist``: 4.57.1 for 0.5.5.post2, 0.5.6, 0.5.7, 0.5.8, 0.5.8.post1 and 0.5.9;
5.0.0rc0 for 0.5.6.post1 (the MI355X MoRI-SGLang image of 2026-01-13), which still loads the
``tokenizer.json`` pre-tokenizer (``benchmarks/client_tokenizer_mismatch.py`` on 5.0.0rc0:
client and server agree to a token); 5.3.0 for 0.5.10.post1. TensorRT-LLM pins 4.57.1
(``requirements.txt`` at 000867d9b, the 1.2 release candidates). So only
``lmsysorg/sglang:v0.5.10.post1-cu130`` is affected. Such a record is predicted at the prompt
lengths the server counted, from ``inferencex_client_tokens.csv``
(``benchmarks/client_tokenizer_mismatch.py`` replays the client on transformers 5.3.0 with the
DeepSeek-R1 tokenizer: about 5.1 times the stated ISL). The record's ``isl`` stays the client's
label. Read from the record's image, model, deployment and date only, never its latency."""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any

CLIENT_TOKENS_FILE = "inferencex_client_tokens.csv"

V5_CLIENT_IMAGES = {"lmsysorg/sglang:v0.5.10.post1-cu130": "5.3.0"}
"""Images on record whose Python has transformers 5, with its version (the SGLang wheel's pin)."""

HUB_ID_FIX_DAY = "2026-05-15"
"""InferenceX 5fe6d56ee: the client repairs the tokenizer for a Hub id from this day."""

MISMATCHED_MODELS = ("dsr1",)
"""Models whose tokenizer transformers 5 loads broken (DeepSeek-R1: ``LlamaTokenizerFast`` over
a ByteLevel BPE, ef01c2205)."""

ServerPrompts = list[dict[str, str]]


def load_server_prompts(path: Path) -> ServerPrompts:
    with path.open() as f:
        return list(csv.DictReader(f))


@functools.cache
def default_server_prompts() -> tuple[dict[str, str], ...]:
    """:data:`CLIENT_TOKENS_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_server_prompts(DATA_DIR / "serving" / CLIENT_TOKENS_FILE))


def mismatched(rec: dict[str, str]) -> bool:
    """Whether record ``rec``'s client tokenized its prompts unlike its server (module
    docstring): a single-node DeepSeek-R1 run in an image with transformers 5, before the
    client's repair reached Hub ids."""
    return (
        rec["disagg"] != "true"
        and rec["is_multinode"] != "true"
        and rec["model"] in MISMATCHED_MODELS
        and rec["image"] in V5_CLIENT_IMAGES
        and rec["date"] < HUB_ID_FIX_DAY
    )


def server_prompt_lengths(
    rec: dict[str, str], table: ServerPrompts | tuple[dict[str, str], ...]
) -> tuple[dict[str, Any], str, str]:
    """The prompt lengths record ``rec``'s server counted, as ``infer`` arguments: (``input_len``
    and ``input_cv``, note, reason they are unknown). Empty where the client and server agreed.
    The MTP scripts pass ``--use-chat-template`` (``dsr1_fp8_b300_mtp.sh`` f8543f9d1), the others
    do not."""
    if not mismatched(rec):
        return {}, "", ""
    chat = "true" if rec["spec_method"] == "mtp" else "false"
    version = V5_CLIENT_IMAGES[rec["image"]]
    hits = [
        t
        for t in table
        if (t["image"], t["transformers"], t["isl"], t["chat_template"])
        == (rec["image"], version, rec["isl"], chat)
    ]
    if len(hits) != 1:
        return (
            {},
            "",
            f"not expressible: the client on transformers {version} sent prompts its server "
            f"counted differently, and {CLIENT_TOKENS_FILE} has no line for ISL {rec['isl']}"
            f"{' with the chat template' if chat == 'true' else ''}",
        )
    hit = hits[0]
    mean, std = float(hit["server_mean"]), float(hit["server_std"])
    note = (
        f"prompts of {mean:,.0f} +- {std:,.0f} server tokens: the client's transformers "
        f"{version} tokenizer counted {hit['client_mean']} ({CLIENT_TOKENS_FILE})"
    )
    return {"input_len": round(mean), "input_cv": std / mean}, note, ""
