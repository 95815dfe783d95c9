"""The PLAN_ARGS array of an exported Megatron-LM launch script, as Megatron's argparse sees it."""

from __future__ import annotations

import shlex


def script_args(script: str) -> dict[str, str | bool]:
    """``--flag value`` pairs of the script's PLAN_ARGS (dashes to underscores, as argparse
    stores them); a flag without a value is ``True``."""
    body = script.split("PLAN_ARGS=(", 1)[1].split(")", 1)[0]
    tokens = shlex.split(body)
    out: dict[str, str | bool] = {}
    for i, token in enumerate(tokens):
        if token.startswith("--"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else "--"
            out[token[2:].replace("-", "_")] = True if nxt.startswith("--") else nxt
    return out
