"""The page's forms read into typed queries: every field checked against the catalog's ids or a
number range, every mistake one :class:`InputError` naming the field (shown on the page).

Nothing typed here is ever a path: a model is a catalog id or a pasted ``config.json`` parsed in
memory (:func:`gpuscale.api.page.model_from_config_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from gpuscale.api.catalog import catalog_listing
from gpuscale.api.page import DEFAULT_FABRIC, model_from_config_text, network_fabrics
from gpuscale.errors import InputError, parse_float, parse_int, require, unknown
from gpuscale.specs import ModelSpec

MAX_GPUS = 16384
"""Largest GPU count the page searches: the biggest published training runs (Llama 3 405B on
16,384 H100s, Dubey et al. 2024 §3.3); the CLI takes any count."""
MAX_SERVING_GPUS = 512
"""The serving search's own bound (:func:`gpuscale.api.serving_search.search`)."""

LABELS: dict[str, str] = {
    "model": "Model",
    "config": "config.json",
    "gpu": "GPU",
    "inter": "Fabric",
    "gpus": "GPU count",
    "seq": "Sequence length",
    "input_len": "Input tokens",
    "output_len": "Output tokens",
    "concurrency": "Concurrent requests",
    "slo_ttft_ms": "TTFT p99 target (ms)",
    "slo_tpot_ms": "TPOT p99 target (ms)",
    "tp": "TP",
}
"""Form field -> the label the page shows (and puts in front of an error about the field)."""


@cache
def model_ids() -> tuple[str, ...]:
    return tuple(r.id for r in catalog_listing("models").rows)


@cache
def gpu_ids() -> tuple[str, ...]:
    return tuple(r.id for r in catalog_listing("gpus").rows)


def _text(form: Mapping[str, str], name: str) -> str:
    return str(form.get(name, "")).strip()


def _choice(form: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = _text(form, name) or default
    if value not in choices:
        raise InputError(str(unknown(LABELS[name].lower(), value, choices)), field=name)
    return value


def _int(
    form: Mapping[str, str], name: str, *, low: int, high: int, default: int | None
) -> int | None:
    text = _text(form, name)
    if not text:
        return default
    try:
        value = parse_int(text)
    except InputError as exc:
        raise InputError(str(exc), field=name) from None
    require(low <= value <= high, f"must be {low} to {high:,}, got {value:,}", field=name)
    return value


def _float(form: Mapping[str, str], name: str) -> float | None:
    text = _text(form, name)
    if not text:
        return None
    try:
        value = parse_float(text)
    except InputError as exc:
        raise InputError(str(exc), field=name) from None
    require(0 < value < float("inf"), f"must be a positive number, got {text[:40]}", field=name)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    model: str
    """Catalog id picked in the list (kept for the form even when a config is pasted)."""
    config: str
    """Pasted ``config.json`` text; when not blank it is the model."""

    @property
    def pasted(self) -> bool:
        return bool(self.config.strip())

    def arg(self) -> str | ModelSpec:
        """What the API takes: the catalog id, or the pasted config read in memory."""
        return model_from_config_text(self.config) if self.pasted else self.model

    @property
    def title(self) -> str:
        return "pasted config.json" if self.pasted else self.model


def _model(form: Mapping[str, str]) -> ModelChoice:
    return ModelChoice(
        model=_choice(form, "model", model_ids(), "llama3.1-8b"),
        config=str(form.get("config", "")),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingQuery:
    model: ModelChoice
    gpu: str
    inter: str
    gpus: int
    seq: int | None


def training_query(form: Mapping[str, str]) -> TrainingQuery:
    gpus = _int(form, "gpus", low=1, high=MAX_GPUS, default=64)
    assert gpus is not None
    return TrainingQuery(
        model=_model(form),
        gpu=_choice(form, "gpu", gpu_ids(), "h100-sxm"),
        inter=_choice(form, "inter", network_fabrics(), DEFAULT_FABRIC),
        gpus=gpus,
        seq=_int(form, "seq", low=1, high=1 << 24, default=None),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingQuery:
    model: ModelChoice
    gpu: str
    gpus: int
    tp: int
    input_len: int
    output_len: int
    concurrency: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None


def serving_query(form: Mapping[str, str]) -> ServingQuery:
    def whole(name: str, default: int, high: int) -> int:
        value = _int(form, name, low=1, high=high, default=default)
        assert value is not None
        return value

    return ServingQuery(
        model=_model(form),
        gpu=_choice(form, "gpu", gpu_ids(), "h100-sxm"),
        gpus=whole("gpus", 8, MAX_SERVING_GPUS),
        tp=whole("tp", 1, MAX_SERVING_GPUS),
        input_len=whole("input_len", 1024, 1 << 24),
        output_len=whole("output_len", 1024, 1 << 24),
        concurrency=whole("concurrency", 16, 1 << 20),
        slo_ttft_ms=_float(form, "slo_ttft_ms"),
        slo_tpot_ms=_float(form, "slo_tpot_ms"),
    )


def message(exc: InputError) -> str:
    """The error's line for the page: the field's label in front when the text does not name it."""
    text = " ".join(str(exc).split())
    label = LABELS.get(exc.field or "")
    return f"{label}: {text}" if label and not text.lower().startswith(label.lower()) else text
