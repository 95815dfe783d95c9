"""How far the serving model's figures fell from measured runs like the one asked about.

Bands come from ``benchmarks/serving_bands.py`` (``catalog/data/serving_validation_bands.yaml``;
``gpuscale.validation.serving_bands``): per metric, the 10th, 50th and 90th percentiles of
measured / predicted mean TTFT, TPOT and output tokens/s over a regime's runs. A regime is runs
the model never saw (``held_out``: InferenceX's DeepSeek-R1 records on GPUs other than the
H100/H200 it was built against; some of their launch readings were added after looking at their
errors, docs/benchmarks.md "Held-out serving runs") or the rows it was built against
(``in_sample``), of one engine, mode, speculative setting and GPU generation, or coarser. The
closest regime on the deployment's GPU generation answers. The differences between the
deployment and the band's runs that the file records (GPU generation, model, mode, speculative
decoding) and an open-loop client are said; others (attention DP, prefix hits, length spread, a
profile overlay) are not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale.catalog import serving_validation_bands

METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
"""What a band covers: the means ``infer`` reports (``options[0]``)."""

_MODES = {"aggregated": "agg", "disaggregated": "disagg"}
"""The result's mode names (``Prediction.mode``) in the bands file's words."""
_WORDS = {v: k for k, v in _MODES.items()}


def regime_keys(kind: str, engine: str, mode: str, speculative: bool, generation: str) -> list[str]:
    """The regimes a run belongs to, narrowest first:
    ``{kind}/{engine}/{mode}/{mtp|plain}/{generation}``, then without the generation, the
    speculative setting, the mode, the engine (``{kind}/all``)."""
    spec = "mtp" if speculative else "plain"
    return [
        f"{kind}/{engine}/{mode}/{spec}/{generation}",
        f"{kind}/{engine}/{mode}/{spec}",
        f"{kind}/{engine}/{mode}",
        f"{kind}/{engine}",
        f"{kind}/all",
    ]


@dataclass(frozen=True, slots=True)
class ServingBand:
    """Per metric, measured / predicted at the 10th, 50th and 90th percentiles of a regime's
    runs (a metric absent: not measured in enough of them), and where they come from."""

    ratios: tuple[tuple[str, tuple[float, float, float]], ...]
    regime: str
    """The regime the band comes from, with its run count (``held-out sglang aggregated, 245
    runs``)."""
    held_out: bool
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "measured_over_predicted_p10_p50_p90": {k: list(v) for k, v in self.ratios},
            "regime": self.regime,
            "held_out": self.held_out,
            "warnings": list(self.warnings),
        }


def _describe(key: str, rows: int) -> str:
    kind, *rest = key.split("/")
    words = {**_WORDS, "all": "all engines", "mtp": "with MTP", "plain": "without MTP"}
    named = [words.get(w, w) for w in rest[:3]] + [f"on {g} GPUs" for g in rest[3:]]
    return f"{'held-out' if kind == 'held_out' else 'in-sample'} {' '.join(named)}, {rows} runs"


def _listed(names: Sequence[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def serving_band(
    *,
    engine: str,
    mode: str,
    generation: str,
    model: str,
    speculative: bool,
    open_loop: bool,
    data: Mapping[str, Any] | None = None,
) -> ServingBand:
    """The band of the closest measured regime for a deployment: ``engine``, ``mode``
    (``aggregated``/``disaggregated``, or ``agg``/``disagg``), the GPU ``generation``, the
    catalog ``model`` served, ``speculative`` decoding, an ``open_loop`` client (Poisson
    arrivals). Held-out runs of the engine and mode (with the same speculative setting first)
    on the deployment's GPU generation, else in-sample ones on it, else the same on any
    generation, else every held-out run; each difference the module docstring lists is a
    warning. ``data``: a bands document (default: the shipped one)."""
    data = serving_validation_bands() if data is None else data
    regimes: Mapping[str, Mapping[str, Any]] = data["regimes"]
    mode = _MODES.get(mode, mode)
    held, sample = (
        regime_keys(k, engine, mode, speculative, generation)[:4] for k in ("held_out", "in_sample")
    )
    own_mode = [*held[:3], *sample[:3]]
    on_generation = [
        k for k in own_mode if k in regimes and generation in regimes[k]["generations"]
    ]
    anywhere = [k for k in (*held, *sample) if k in regimes]
    key = (on_generation or anywhere or ["held_out/all"])[0]
    r = regimes[key]
    warnings = []
    if key == "held_out/all":
        warnings.append(f"no measured run of {engine}: the band is of every engine's held-out runs")
    elif key.startswith("in_sample"):
        warnings.append(
            f"the band is of runs the model was built against (no held-out {engine} "
            f"{_WORDS[mode]} run on {generation} GPUs)"
        )
    if generation not in r["generations"]:
        warnings.append(
            f"the band's runs are on {_listed(r['generations'])} GPUs, not {generation}"
        )
    if model not in r["models"]:
        warnings.append(f"the band's runs served {_listed(r['models'])}, not {model}")
    if mode not in r["modes"]:
        warnings.append(
            f"the band's runs are {' and '.join(_WORDS[m] for m in r['modes'])}, not {_WORDS[mode]}"
        )
    if speculative not in r["speculative"]:
        warnings.append(
            f"the band's runs decoded {'without' if speculative else 'with'} speculative decoding"
        )
    if open_loop:
        warnings.append(
            "the band's runs are closed-loop benchmarks (a fixed number of clients), not "
            "Poisson arrivals"
        )
    ratios = tuple((m, (float(r[m][0]), float(r[m][1]), float(r[m][2]))) for m in METRICS if m in r)
    return ServingBand(
        ratios, _describe(key, int(r["rows"])), key.startswith("held_out"), tuple(warnings)
    )
