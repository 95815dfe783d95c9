"""``gpuscale infer --help`` names, for each engine option that only some engines have, those
engines: from :data:`gpuscale.api.serving.ENGINE_OPTIONS`, the one table the API check reads
(it named the TensorRT-LLM ones alone, so ``deepgemm_moe_worst_case`` and SGLang's two read as
settings of every engine)."""

from __future__ import annotations

import re

import click

from gpuscale.api.serving import ENGINE_OPTIONS, ENGINES
from gpuscale.cli.infer import command

EVERY_ENGINE = ENGINES


def _engine_options_help() -> str:
    (option,) = [p for p in command.params if p.name == "engine_options"]
    assert isinstance(option, click.Option) and option.help
    return " ".join(option.help.split())


def test_each_engine_only_option_is_named_with_its_engines() -> None:
    text = _engine_options_help()
    restricted = {n: o.engines for n, o in ENGINE_OPTIONS.items() if o.engines != EVERY_ENGINE}
    assert {"deepgemm_moe_worst_case", "mixed_chunk", "batch_wait_timeout_iters"} <= set(restricted)
    notes = text.rsplit("(", 1)[1]  # the last parenthesis: the engine-only ones
    for name, engines in restricted.items():
        assert name in text
        clause = next(part for part in notes.split(";") if re.search(rf"(?<!\w){name}(?!\w)", part))
        assert clause.strip().rstrip(").").endswith(f"{' / '.join(engines)} only"), (name, clause)
    for name, o in ENGINE_OPTIONS.items():
        if o.engines == EVERY_ENGINE:
            # As a whole name: prefill_max_num_batched_tokens (SGLang's) holds
            # max_num_batched_tokens (every engine's).
            assert not re.search(rf"(?<!\w){name}(?!\w)", notes), name
