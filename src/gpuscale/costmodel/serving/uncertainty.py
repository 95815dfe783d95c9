"""How far the serving model's figures fell from measured runs like the one asked about.

Bands come from ``benchmarks/serving_bands.py`` (``catalog/data/serving_validation_bands.yaml``;
``gpuscale.validation.serving_bands``): the 10th-90th percentiles of measured / predicted mean
TTFT, TPOT and output tokens/s per engine and mode, first on runs the model never saw
(``held_out``: InferenceX's DeepSeek-R1 records on GPUs other than the H100/H200 it was built
against), else on the rows it was built against (``in_sample``). Every step away from what was
measured is said: an engine or mode without held-out runs, a dense model (the held-out runs are
all one mixture-of-experts model), a GPU generation no serving run was measured on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscale.catalog import serving_validation_bands

METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
_MODES = {"aggregated": "agg", "disaggregated": "disagg"}
"""The result's mode names (``Prediction.mode``) in the bands file's words."""


@dataclass(frozen=True, slots=True)
class ServingBand:
    """measured / predicted, 10th and 90th percentiles, per metric (absent: not measured in
    enough runs of the regime), and where they come from."""

    ratios: dict[str, tuple[float, float]]
    regime: str
    """The regime the band comes from, with its run count (``held-out sglang agg, 245 runs``)."""
    held_out: bool
    warnings: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "measured_over_predicted_p10_p90": {k: list(v) for k, v in self.ratios.items()},
            "regime": self.regime,
            "held_out": self.held_out,
            "warnings": list(self.warnings),
        }


_WORDS = {"agg": "aggregated", "disagg": "disaggregated", "all": "all engines"}


def _describe(key: str, rows: int) -> str:
    kind, *rest = key.split("/")
    words = " ".join(_WORDS.get(w, w) for w in rest)
    return f"{'held-out' if kind == 'held_out' else 'in-sample'} {words}, {rows} runs"


def serving_band(
    engine: str,
    mode: str,
    generation: str,
    moe: bool,
    data: Mapping[str, Any] | None = None,
) -> ServingBand:
    """The band of the closest measured regime for an ``engine`` deployment in ``mode``
    (``aggregated``/``disaggregated``, or ``agg``/``disagg``) of a model (``moe``: mixture of experts) on a GPU of ``generation``:
    held-out runs of the engine and mode, of the engine, then the rows the model was built
    against, then every held-out run; with a warning for each step away from what was measured.
    ``data``: a bands document (default: the shipped one)."""
    data = serving_validation_bands() if data is None else data
    mode = _MODES.get(mode, mode)
    regimes: Mapping[str, Mapping[str, Any]] = data["regimes"]
    warnings: list[str] = []
    generations = data["validated"]["generations"]
    if generation not in generations:
        warnings.append(
            f"no serving run on {generation} GPUs was measured (measured: "
            f"{', '.join(generations)}); extrapolating"
        )
    candidates = (
        f"held_out/{engine}/{mode}",
        f"held_out/{engine}",
        f"in_sample/{engine}/{mode}",
        f"in_sample/{engine}",
    )
    key = next((k for k in candidates if k in regimes), None)
    if key is None:
        key = "held_out/all"
        warnings.append(f"no measured run of {engine}: the band is every held-out engine's")
    elif key.startswith("in_sample"):
        warnings.append(
            f"no held-out run of {engine}: the band is from the runs the model was built against"
        )
    if key.count("/") == 1 and key != "held_out/all":
        other = "disaggregated" if mode == "agg" else "aggregated"
        warnings.append(f"no measured {_WORDS[mode]} run of {engine}: the band is {other}")
    if key.startswith("held_out") and not moe:
        warnings.append("the held-out runs are of one mixture-of-experts model (DeepSeek-R1)")
    r = regimes[key]
    ratios = {m: (float(r[m][0]), float(r[m][1])) for m in METRICS if m in r}
    return ServingBand(
        ratios, _describe(key, int(r["rows"])), key.startswith("held_out"), tuple(warnings)
    )
