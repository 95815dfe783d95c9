"""Read the measured serving rows (``data/validation/serving``) into the deployment each one ran.

One row of AIConfigurator's ``silicon_sample.csv`` is one benchmark of a real engine. An
aggregated row states its engine's parallelism; a disaggregated row must state its prefill and
decode worker counts as well, or the deployment it measured is unknown: AIConfigurator's own
replay of the file (``tools/accuracy_regression_testing/predict_silicon_sample.py`` at commit
095f58a5, ``REQUIRED_DISAGG_FIELDS``) refuses a disaggregated row without ``prefill_num_workers``
and ``decode_num_workers``, and its InferenceX adapter (``sdk/config_adapter/inferencex.py``)
derives them only from ``num_prefill_gpu`` / ``prefill_num_workers``, fields these rows do not
carry. Each row is read into one of three classes, with every assumption written next to it:

- ``stated``: the row names its workers (or is aggregated);
- ``twin``: the row leaves its workers empty, but the same measurement (same engine, system,
  lengths, concurrency and identical TTFT and TPOT) is also recorded in a row that names them
  (the file holds both the InferenceX CSV export and the AIConfigurator database dump of the
  same runs): the deployment is that row's;
- ``not expressible``: worker counts not stated and no twin, or no client concurrency stated
  (the id's ``_c_`` is empty and ``silicon_data_source`` has no ``silicon_concurrency``). These
  carry a ``guess`` reading (one worker of each kind; AIConfigurator's decode batch x workers x
  attention-DP as the concurrency) for comparison lines only. Aggregated rows are not
  expressible when their recorded concurrency is the benchmark client's cap rather than the load
  the engine ran (``client_cap_only``); their ``guess`` is the row as recorded.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
STATED, TWIN, NOT_EXPRESSIBLE = "stated", "twin", "not expressible"
TWIN_RTOL = 1e-9
"""Twins are the same measurement written twice, so their TTFT and TPOT agree to the digit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRow:
    """One measured row and the deployment it is read as."""

    id: str
    engine: str
    mode: str
    """``agg`` or ``disagg``."""
    kind: str
    """``stated``, ``twin`` or ``not expressible`` (module docstring)."""
    reason: str = ""
    """Why a row is not expressible."""
    ttft_ms: float
    tpot_ms: float
    concurrency: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The keyword arguments of ``gpuscale.api.infer`` that express the row (empty when not
    expressible)."""
    guess: dict[str, Any] = field(default_factory=dict)
    """For a row that is not expressible: the reading used before rows were classed, for
    comparison only (never counted with the expressible rows)."""
    assumptions: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict)

    @property
    def expressible(self) -> bool:
        return self.kind != NOT_EXPRESSIBLE


def _int(v: str | None, default: int = 1) -> int:
    return int(v) if v not in ("", None) and int(v) > 0 else default


def parallelism(r: dict[str, str], prefix: str = "") -> dict[str, int]:
    """GPUs per engine instance (``tp``: all GPUs of one stage), attention-DP ranks and EP of
    row ``r``'s aggregated engine (``prefix=""``) or its prefill/decode workers."""
    # aiconfigurator: GPUs per instance = tp * pp * attention_dp; moe_tp * moe_ep spans them.
    tp = _int(r[f"{prefix}tp_size"])
    dp = _int(r[f"{prefix}attention_dp_size"])
    ep = _int(r[f"{prefix}moe_ep_size"])
    moe = _int(r[f"{prefix}moe_tp_size"]) * ep
    launch = re.search(r"_tp(\d+)_ep(\d+)_", r["id"])
    if not prefix and launch and ep > 1:
        gpus, launch_ep = int(launch.group(1)), int(launch.group(2))
        if tp * dp == moe == gpus * launch_ep and launch_ep > 1:
            # The InferenceX export of 2026-04-06 writes a `--tp 8 --ep 8` launch (8 GPUs) as
            # 64 GPUs: tp_size x attention_dp = moe_tp x moe_ep = TP x EP. The 2026-03-25
            # export of the same measurements (identical TTFT and TPOT) writes 8 GPUs (tp 8,
            # or attention DP 8 with tp 1; moe 1 x 8), so the id's launch flags give the GPUs.
            # The recorded attention width tp_size stays: attention DP = GPUs / tp_size (1
            # where tp_size was written as TP x EP).
            tp_att = min(tp, gpus)
            tp, dp, ep = tp_att, gpus // tp_att, launch_ep
            moe = gpus
    if moe > tp * dp and moe % tp == 0:
        # vLLM rows leave attention_dp empty when --data-parallel-size runs attention DP under
        # an expert group wider than TP: the MoE group size gives the GPUs.
        dp = moe // tp
    return {"tp": tp * dp, "attention_dp": dp, "ep": ep}


def _source_fields(r: dict[str, str]) -> dict[str, str]:
    out = {}
    for part in r["silicon_data_source"].split(";"):
        key, _, value = part.strip().partition("=")
        out[key] = value
    return out


def concurrency(r: dict[str, str]) -> int | None:
    """The client's concurrency, or None when the row does not state it.

    ``silicon_concurrency`` (the benchmark client's setting) first. ``batch_size`` is
    AIConfigurator's per-attention-DP-rank batch, not the client's concurrency: its estimator
    reads concurrency = batch_size x attention_dp_size (``aic-core/.../sdk/backends/
    base_backend.py`` line 712, ``global_bs = bs * model.config.attention_dp_size``), and the
    rows agree (e.g. DeepSeek-R1 TP8 attention-DP 8 at silicon_concurrency 256: batch 32)."""
    src = _source_fields(r)
    if "silicon_concurrency" in src:
        return int(src["silicon_concurrency"])
    if r["batch_size"]:
        return int(r["batch_size"]) * _int(r["attention_dp_size"])
    return None


def decode_slots(r: dict[str, str]) -> int:
    """AIConfigurator's reading of a disaggregated row's decode batch: its InferenceX adapter
    (``_worker``) sets decode batch = concurrency / (decode workers x attention-DP ranks)."""
    dp = parallelism(r, "decode_")["attention_dp"]
    return _int(r["decode_batch_size"]) * _int(r["decode_num_workers"]) * dp


def _named(r: dict[str, str]) -> bool:
    return bool(r["prefill_num_workers"] and r["decode_num_workers"])


INFERENCEX_EXPORTS = ("source_file=2026-03-25.csv", "source_file=2026-04-06.csv")
"""The InferenceX CSV exports in the file (SOURCES.md)."""
INFERENCEX_RANGE_RATIO = 0.8
"""InferenceX's client draws each request's input and output length uniformly from the integers
[int(L x ratio), L] (``utils/bench_serving/benchmark_serving.py`` ``sample_uniform``) with
``RANDOM_RANGE_RATIO: 0.8`` (``.github/workflows/benchmark-tmpl.yml``, env and input default)."""
INFERENCEX_ROUNDS = 10
"""InferenceX measures ``--num-prompts $((CONC * 10))`` requests after ``--num-warmups
$((2 * CONC))`` (``benchmarks/benchmark_lib.sh`` ``run_benchmark_serving``)."""


CLIENT_CAP_RUNS = (("vllm", "h100_sxm", "openai/gpt-oss-120b"),)
"""Engine, system and model of the InferenceX runs whose client ran at a fixed cap: the H100
docker runner (``runners/launch_h100-cr.sh`` runs ``benchmarks/*_h100_docker.sh``) ran
``gptoss_fp4_h100_docker.sh``, the only script with the cap hard-coded."""
CLIENT_CAP = 512
"""``gptoss_fp4_h100_docker.sh`` passed ``--max-concurrency 512`` to the client whatever the
sweep's ``$CONC``, while the engine ran ``vllm serve --max-num-seqs=$CONC`` on ``--num-prompts
$((CONC * 10))`` (SemiAnalysisAI/InferenceX, from d22bf9ca9 of 2025-11-21 until 4e135fd3f "fix h100
docker error" of 2025-12-08, which passes ``"$CONC"``). The sweep was ``conc-start: 4, conc-end:
64`` for every TP and length (``.github/configs/nvidia-master.yaml`` ``gptoss-fp4-h100-vllm``), so
a row of that run recorded at 512 is the client's cap: the engine held at most ``$CONC`` <= 64
requests, and for ``$CONC`` <= 51 the client sent all ``10 x $CONC`` prompts at once (an open
burst, not a closed loop). ``$CONC`` is not recorded."""
CLIENT_CAP_WINDOW = ("2025-11-21", "2025-12-08")
"""First and last day (inclusive; ``measured=`` in ``silicon_data_source``) the cap was in the
script (``CLIENT_CAP``)."""


def client_cap_only(r: dict[str, str]) -> bool:
    """True when the row's concurrency is the client's cap, not the engine's load (``CLIENT_CAP``)."""
    src = _source_fields(r)
    day = src.get("measured", "")[:10]
    return (
        r["mode"] == "agg"
        and r["silicon_data_source"].startswith(INFERENCEX_EXPORTS)
        and (r["backend"], r["system"], r["model_path"]) in CLIENT_CAP_RUNS
        and concurrency(r) == CLIENT_CAP
        and CLIENT_CAP_WINDOW[0] <= day <= CLIENT_CAP_WINDOW[1]
    )


def uniform_lengths(length: int, ratio: float) -> tuple[float, float]:
    """Mean and coefficient of variation of a length drawn uniformly from the integers
    [int(length x ratio), length] (discrete uniform: variance (n^2 - 1) / 12 over n values)."""
    low = int(length * ratio)
    n = length - low + 1
    mean = (low + length) / 2
    return mean, ((n * n - 1) / 12) ** 0.5 / mean


def client_lengths(r: dict[str, str]) -> dict[str, Any]:
    """The prompt and output lengths the row's benchmark client sent.

    AIConfigurator's own runs (aiperf, ``benchmark/bench_run.sh.j2``) send fixed lengths:
    ``--isl-stddev``/``--osl-stddev`` default to 0 (``generator/config/deployment_config.yaml``)
    with ``ignore_eos``. The aggregated rows of the InferenceX exports ran InferenceX's client,
    whose lengths are uniform over [0.8 L, L] (``INFERENCEX_RANGE_RATIO``); their mean is below
    the row's ``isl``/``osl`` and they differ per request, so a closed loop's requests do not
    stay in lockstep cohorts."""
    isl, osl = int(r["isl"]), int(r["osl"])
    if r["mode"] != "agg" or not r["silicon_data_source"].startswith(INFERENCEX_EXPORTS):
        return {"input_len": isl, "output_len": osl}
    (im, icv), (om, ocv) = (uniform_lengths(n, INFERENCEX_RANGE_RATIO) for n in (isl, osl))
    return {"input_len": round(im), "output_len": round(om), "input_cv": icv, "output_cv": ocv}


def client_requests(r: dict[str, str], conc: int) -> dict[str, Any]:
    """Requests the row's client measured, for a closed loop whose lengths vary (the first
    ``conc`` of them are the start burst): InferenceX's scripts pass ``--num-prompts
    $((CONC * 10))`` (e.g. ``benchmarks/*.sh`` ``run_benchmark_serving``). AIConfigurator's
    fixed-length runs are simulated round by round (``cohort_sim.BENCHMARK_ROUNDS``)."""
    if "input_cv" not in client_lengths(r):
        return {}
    return {"num_requests": INFERENCEX_ROUNDS * conc}


def _base(r: dict[str, str], conc: int) -> dict[str, Any]:
    return {
        "gpu": SYSTEMS[r["system"]],
        "engine": ENGINES[r["backend"]],
        "weights": r["gemm_quant_mode"] or "bf16",
        **client_lengths(r),
        "concurrency": conc,
        **client_requests(r, conc),
    }


def _disagg_kwargs(d: dict[str, str]) -> dict[str, Any]:
    """Worker pools of a row that names them. Neither batch size is passed as an engine cap:
    both are AIConfigurator's modelling inputs, not settings the run used. Its InferenceX
    adapter (``_worker``) sets the prefill batch to 1 ("defaults to 1 unless explicitly
    overridden") and the decode batch to concurrency / (decode workers x attention-DP ranks);
    the rows agree (config 303 keeps one deployment while its decode batch follows the
    concurrency: 4, 8, 16, 32, 64 at 36-576)."""
    p, q = parallelism(d, "prefill_"), parallelism(d, "decode_")
    return {
        "prefill_workers": _int(d["prefill_num_workers"]),
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": _int(d["decode_num_workers"]),
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _one_each(r: dict[str, str]) -> dict[str, Any]:
    """One prefill and one decode worker of the row's per-worker parallelism."""
    p, q = parallelism(r, "prefill_"), parallelism(r, "decode_")
    return {
        "prefill_workers": 1,
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": 1,
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _key(r: dict[str, str], conc: int) -> tuple[str, ...]:
    return (r["backend"], r["system"], r["isl"], r["osl"], str(conc))


def _same(a: dict[str, str], b: dict[str, str]) -> bool:
    return all(
        abs(float(a[k]) - float(b[k])) <= TWIN_RTOL * abs(float(b[k]))
        for k in ("silicon_ttft_ms", "silicon_tpot_ms")
    )


def read_rows(raw: list[dict[str, str]]) -> list[ServingRow]:
    """Every raw row read as the deployment it ran, or marked not expressible."""
    named: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in raw:
        c = concurrency(r)
        if r["mode"] == "disagg" and _named(r) and c is not None:
            named[_key(r, c)].append(r)
    out = []
    for r in raw:
        stated = concurrency(r)
        conc = stated if stated is not None else decode_slots(r)
        notes: list[str] = []
        kind, reason = STATED, ""
        kw = _base(r, conc)
        guess: dict[str, Any] = {}
        if stated is None:
            kind, kw = NOT_EXPRESSIBLE, {}
            reason = (
                "not expressible: concurrency not stated (empty in the id and in "
                "silicon_data_source; the decode batch is AIConfigurator's modelling input)"
            )
            guess = {**_base(r, conc), **_disagg_kwargs(r)}
        elif r["mode"] != "disagg":
            kw.update(parallelism(r), pp=_int(r["pp_size"]))
            if client_cap_only(r):
                kind, kw, guess = NOT_EXPRESSIBLE, {}, kw
                reason = (
                    f"not expressible: concurrency {CLIENT_CAP} is the client's cap, not the "
                    "engine's load: InferenceX's gptoss_fp4_h100_docker.sh ran vllm "
                    "--max-num-seqs=$CONC (sweep 4-64) on 10 x $CONC prompts with the client at "
                    f"--max-concurrency {CLIENT_CAP} (d22bf9ca9 to 4e135fd3f); $CONC is not "
                    "recorded"
                )
        elif _named(r):
            kw.update(_disagg_kwargs(r))
        else:
            twins = [n for n in named[_key(r, conc)] if _same(n, r)]
            if len(twins) == 1:
                kind = TWIN
                kw.update(_disagg_kwargs(twins[0]))
                notes.append(
                    f"worker counts empty; deployment from {twins[0]['id']}, the same "
                    "measurement (identical TTFT and TPOT) with its workers named"
                )
            else:
                kind, kw = NOT_EXPRESSIBLE, {}
                guess = {**_base(r, conc), **_one_each(r)}
                reason = (
                    "not expressible: worker counts not stated (prefill/decode_num_workers "
                    "empty, no GPU total in the row or its source; AIConfigurator's own "
                    "replay refuses such rows)"
                )
        out.append(
            ServingRow(
                id=r["id"],
                engine=r["backend"],
                mode=r["mode"],
                kind=kind,
                reason=reason,
                ttft_ms=float(r["silicon_ttft_ms"]),
                tpot_ms=float(r["silicon_tpot_ms"]),
                concurrency=conc,
                kwargs=kw,
                guess=guess,
                assumptions=tuple(notes),
                raw=r,
            )
        )
    return out


def load(path: Path) -> list[ServingRow]:
    with path.open() as f:
        return read_rows(list(csv.DictReader(f)))
