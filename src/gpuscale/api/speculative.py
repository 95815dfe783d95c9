"""Speculative decoding options of ``gpuscale infer`` under load, checked in one place."""

from __future__ import annotations

from gpuscale.catalog.speculative import draft_module, methods
from gpuscale.costmodel.serving.speculative import (
    MAX_DRAFT_TOKENS,
    Speculation,
    acceptance_for_length,
)
from gpuscale.errors import InputError, require
from gpuscale.specs import ModelSpec

NONE = "none"


def speculation(
    spec: ModelSpec,
    speculative: str = NONE,
    draft_tokens: int | None = None,
    acceptance: float | None = None,
) -> Speculation | None:
    """The speculative decoding ``infer(speculative=, draft_tokens=, acceptance=)`` asks for,
    or None. ``speculative`` names the draft module the checkpoint ships (``mtp``:
    multi-token prediction, catalog ``speculative.yaml``); ``draft_tokens`` is ``k``;
    ``acceptance`` the per-token acceptance ``a`` (default: the one whose ``sum_{i<=k} a^i``
    is the published mean acceptance length at ``k`` for this model)."""
    accepted = ", ".join((NONE, *methods()))
    if speculative == NONE:
        require(
            draft_tokens is None and acceptance is None,
            "--draft-tokens and --acceptance apply to speculative decoding; give --speculative "
            f"mtp too (accepted: {accepted})",
            field="draft_tokens" if draft_tokens is not None else "acceptance",
        )
        return None
    if speculative not in methods():
        raise InputError(
            f"--speculative {speculative!r} unknown; accepted: {accepted}", field="speculative"
        )
    module = draft_module(speculative, spec.name)
    if module is None:
        raise InputError(
            f"--speculative {speculative}: {spec.name} ships no {speculative} draft module in the "
            "catalog; accepted for: deepseek-v3, deepseek-r1, qwen3.5-397b-a17b",
            field="speculative",
        )
    require(
        draft_tokens is not None,
        f"--speculative {speculative} needs --draft-tokens K (1 to {MAX_DRAFT_TOKENS})",
        field="draft_tokens",
    )
    assert draft_tokens is not None  # for mypy
    require(
        isinstance(draft_tokens, int) and 1 <= draft_tokens <= MAX_DRAFT_TOKENS,
        f"--draft-tokens must be 1 to {MAX_DRAFT_TOKENS}, got {draft_tokens}",
        field="draft_tokens",
    )
    if acceptance is not None:
        require(
            0.0 <= acceptance <= 1.0,
            f"--acceptance must be in [0, 1] (per-token acceptance), got {acceptance}",
            field="acceptance",
        )
        source = "--acceptance"
    else:
        length = module.acceptance_length.get(draft_tokens)
        published = ", ".join(str(k) for k in sorted(module.acceptance_length)) or "none"
        require(
            length is not None,
            f"no published acceptance for {spec.name} with {draft_tokens} draft tokens (published "
            f"for: {published}); give --acceptance A (per-token, 0 to 1)",
            field="acceptance",
        )
        assert length is not None  # for mypy
        acceptance = acceptance_for_length(length, draft_tokens)
        source = f"published mean acceptance length {length} at {draft_tokens} draft tokens"
    return Speculation(
        method=speculative,
        draft_tokens=draft_tokens,
        acceptance=float(acceptance),
        draft_layers=module.draft_layers,
        source=source,
    )
