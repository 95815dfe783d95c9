"""AMD SGLang decode, step by step: where the serving model's MI300X/MI325X TPOT falls short.

InferenceX's held-out DeepSeek-R1 FP8 records on MI300X and MI325X (SGLang v0.5.9-rocm700-mi30x,
2026-02-27) measure a TPOT about twice the model's, while the MI355X on the same SGLang release
(v0.5.9-rocm700-mi35x) is within 5-10% (docs/benchmarks.md, "Held-out serving runs"). For each
aggregated AMD SGLang record this prints the measured mean TPOT, the model's (``infer``, as
``validate_serving_unseen.py`` prices it), the model's decode step term by term
(``IterationModel.parts_s`` at the record's concurrency, every request decoding, at the mean
context of a request halfway through its output: mean input + half the mean output, the
client's lengths being uniform in [0.8 L, L]) and the residual (measured - model). Per deployment it fits
the residual to a line in the batch and the context (least squares): an intercept that
dwarfs both slopes is a per-step cost that follows neither the batch nor the KV bytes.

Second table: the dense block-FP8 GEMMs of one DeepSeek-R1 TP8 decode step (shapes from the
catalog model) against the Triton ``gemm_a8w8_blockscale`` tuning that AITER v0.1.10.post3
ships (the v0.5.9 ROCm images' AITER: InferenceX perf-changelog.yaml, PR #816). For gfx950
(MI355X) AITER has a shape-specific config for each of them; for gfx942 (MI300X/MI325X) only
the generic ``gfx942-GEMM-A8W8_BLOCKSCALE.json`` (128 x 128 tiles, NUM_KSPLIT 1), whose grid
at decode batch sizes is one row of N / 128 workgroups on a 304-CU GPU. The shape-specific
gfx942 configs came after the tag (ROCm/aiter PR #2024, 2026-02-12: N=2112-K=7168,
N=3072-K=1536, N=7168-K=2048 with NUM_KSPLIT 14 at M <= 8).

It changes nothing in the model: the per-kernel time of the untuned gfx942 kernels is not
published, so the gap is diagnosed, not priced (docs/investigations/serving-moe-kernels.md,
"MI300X/MI325X decode").

    PYTHONPATH=src python benchmarks/amd_decode_gap.py [--hardware mi300x,mi325x,mi355x]
        [--limit N]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import infer, served_format, served_kv_dtype
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.specs.model import ModelSpec
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import ApiRow, load_records, read_record
from gpuscale.validation.inferencex_tables import load_tables

RECORDS = DATA_DIR / "serving" / "inferencex_api_dsr1.csv"
AMD = ("mi300x", "mi325x", "mi355x")
# The parts of ``IterationModel.parts_s`` shown on their own (ms per step).
SHOWN = ("projections", "attention", "experts", "moe_other", "communication", "kernel_gaps")

# AITER v0.1.10.post3 (tag 6a0e7b26cc, 2026-02-12), aiter/ops/triton/configs/gemm/: the (N, K)
# of each shape-specific GEMM-A8W8_BLOCKSCALE config per architecture (plain and PRESHUFFLED
# files together). gfx942 has none: only the generic gfx942-GEMM-A8W8_BLOCKSCALE.json.
_GFX950_TUNED = """1024x8192 2112x7168 3072x1536 32768x8192 4096x7168 4608x7168 512x7168
7168x2048 7168x256 8192x1024 8192x32768 4096x512 7168x2304"""
AITER_TUNED_SHAPES: dict[str, frozenset[tuple[int, int]]] = {
    "gfx950": frozenset(
        (int(n), int(k)) for n, k in (nk.split("x") for nk in _GFX950_TUNED.split())
    ),
    "gfx942": frozenset(),
}
# gfx942-GEMM-A8W8_BLOCKSCALE.json at the same tag: BLOCK_SIZE_M 128, BLOCK_SIZE_N 128,
# NUM_KSPLIT 1 for any shape.
GFX942_GENERIC_TILE = (128, 128)
GFX942_GENERIC_KSPLIT = 1
ARCH = {"mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950"}
# Compute units: AMD Instinct MI300X/MI325X data sheets (304 CUs), MI355X (256 CUs).
COMPUTE_UNITS = {"gfx942": 304, "gfx950": 256}


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One record: measured and modelled TPOT and the model's step term by term (ms)."""

    row: ApiRow
    batch: int
    context: float
    measured_ms: float
    model_ms: float
    parts_ms: dict[str, float]

    @property
    def residual_ms(self) -> float:
        return self.measured_ms - self.model_ms


def dense_fp8_gemms(m: ModelSpec, tp: int) -> list[tuple[str, int, int, int]]:
    """(name, N, K, calls per step) of the dense block-FP8 GEMMs of one TP decode step of an
    MLA MoE model, as SGLang's DeepSeek-V2 model lays them out: the fused q_a + kv_a projection
    (replicated: ``fused_qkv_a_proj_with_mqa``), q_b and o_proj column/row split over TP, the
    shared expert's gate_up and down (unless the engine fuses the shared expert into the MoE)
    and the dense layers' MLP, each split over TP."""
    heads = m.num_heads // tp
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    moe_layers = m.num_layers - m.dense_layers
    out = [
        ("q_a+kv_a", m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim, m.hidden_size, m.num_layers),
        ("q_b", heads * qk, m.q_lora_rank, m.num_layers),
        ("o_proj", m.hidden_size, heads * m.v_head_dim, m.num_layers),
    ]  # fmt: skip
    if m.shared_experts:
        f = m.shared_experts * m.ffn_hidden_size // tp
        out += [
            ("shared gate_up", 2 * f, m.hidden_size, moe_layers),
            ("shared down", m.hidden_size, f, moe_layers),
        ]
    if m.dense_layers and m.dense_ffn_hidden_size:
        f = m.dense_ffn_hidden_size // tp
        out += [
            ("dense gate_up", 2 * f, m.hidden_size, m.dense_layers),
            ("dense down", m.hidden_size, f, m.dense_layers),
        ]
    return out


def generic_workgroups(batch: int, n: int) -> int:
    """Workgroups of the generic gfx942 Triton A8W8 blockscale GEMM for ``batch`` rows: one per
    128 x 128 output tile, no split over K (``GFX942_GENERIC_*``)."""
    bm, bn = GFX942_GENERIC_TILE
    return math.ceil(batch / bm) * math.ceil(n / bn) * GFX942_GENERIC_KSPLIT


def generic_tile_floor_s(n: int, k: int, batch: int, arch: str, fp8_peak_flops: float) -> float:
    """Lower bound on one call of the generic gfx942 Triton A8W8 blockscale GEMM: each
    workgroup multiplies a whole 128 x 128 x 128 tile per K step (``tl.dot`` on the BLOCK_M
    rows whatever the rows loaded: a decode batch of 4 still computes 128), K / 128 steps in
    sequence, at its CU's share of the FP8 matrix peak (peak / CUs), one wave of workgroups per
    ``COMPUTE_UNITS``. Memory, scale loads and the epilogue only add to it."""
    bm, bn = GFX942_GENERIC_TILE
    waves = math.ceil(generic_workgroups(batch, n) / COMPUTE_UNITS[arch])
    per_cu = fp8_peak_flops / COMPUTE_UNITS[arch]
    return waves * math.ceil(k / 128) * 2.0 * bm * bn * 128 / per_cu


def line_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of y on the columns of x with an intercept first."""
    a = np.column_stack([np.ones(len(y)), x])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return coef


def iteration_model(row: ApiRow) -> IterationModel:
    """The per-iteration model ``infer`` builds for an aggregated record's deployment."""
    kw = row.kwargs
    spec = catalog.model(row.model)
    gpu = catalog.gpu(kw["gpu"])
    eng = engine_profile(kw["engine"]).for_device(gpu)
    weights = kw.get("weights", "auto")
    fmt = served_format(row.model, weights, spec)
    kv = served_kv_dtype(row.model, weights, fmt, eng, kw.get("kv_dtype", "auto"), spec)
    par = Parallelism(
        tp=kw.get("tp", 1), pp=1, ep=kw.get("ep", 1), attention_dp=kw.get("attention_dp", 1)
    )
    cluster = catalog.cluster(kw["gpu"], par.gpus)
    return _iteration_model(spec, cluster, par, fmt, kv, load_profile(eng.cost_profile), eng)


def amd_rows(hardware: tuple[str, ...]) -> list[ApiRow]:
    """The expressible aggregated SGLang records without speculation on ``hardware``."""
    out = []
    # The launches' tables (the memory fraction each script states), as the held-out reading
    # has them: SGLang's own fraction rule leaves no KV room beside the scripts' 131072-196608
    # token chunk (inferencex_sglang_launch.amd_sglang_budget).
    tables = load_tables(DATA_DIR / "serving")
    for rec in load_records(RECORDS):
        if rec["hardware"] not in hardware or rec["framework"] != "sglang":
            continue
        if rec["disagg"] != "false" or rec["spec_method"] != "none":
            continue
        row = read_record(rec, tables)
        if row.expressible:
            out.append(row)
    return out


def step(row: ApiRow) -> Step:
    kw = row.kwargs
    batch = int(kw["concurrency"])
    # ``input_len``/``output_len`` are the client's mean lengths (0.9 L for [0.8 L, L]).
    context = float(kw["input_len"]) + 0.5 * float(kw["output_len"])
    model = float(infer(row.model, **kw).to_dict()["options"][0]["tpot_ms"])
    parts = iteration_model(row).parts_s(
        np.array([float(batch)]), np.array([context]), np.zeros(1), np.zeros(1)
    )
    return Step(
        row=row,
        batch=batch,
        context=context,
        measured_ms=row.measured["tpot_ms"],
        model_ms=model,
        parts_ms={k: float(v[0]) * 1e3 for k, v in parts.items()},
    )


def deployment(s: Step) -> tuple[str, ...]:
    r = s.row.record
    return (r["hardware"], r["precision"], f"tp{r['decode_tp']}", r["image"] or "-", r["date"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default=",".join(AMD), help="comma-separated: " + ", ".join(AMD))
    ap.add_argument("--limit", type=int, default=0, help="first N records only (0: all)")
    args = ap.parse_args(argv)
    hardware = tuple(h.strip() for h in args.hardware.split(",") if h.strip())
    bad = [h for h in hardware if h not in AMD]
    if bad:
        ap.error(f"--hardware {','.join(bad)}: accepted {', '.join(AMD)}")
    rows = amd_rows(hardware)
    if args.limit:
        rows = rows[: args.limit]
    groups: dict[tuple[str, ...], list[Step]] = defaultdict(list)
    for row in rows:
        s = step(row)
        groups[deployment(s)].append(s)

    head = "   C  isl/osl    meas  model  resid | " + " ".join(f"{k[:11]:>11}" for k in SHOWN)
    for dep, steps in sorted(groups.items()):
        print(" ".join(dep))
        print(head)
        for s in sorted(steps, key=lambda s: (s.row.kwargs["input_len"], s.batch)):
            r = s.row.record
            parts = " ".join(f"{s.parts_ms[k]:11.2f}" for k in SHOWN)
            print(
                f"{s.batch:4d} {r['isl']:>4}/{r['osl']:<4} {s.measured_ms:6.1f} {s.model_ms:6.1f}"
                f" {s.residual_ms:6.1f} | {parts}"
            )
        if len(steps) >= 4:
            # The KV a step reads grows with batch x context; the weights it reads with the
            # batch (more experts touched); neither with nothing.
            x = np.array([[s.batch, s.batch * s.context / 1e4] for s in steps])
            y = np.array([s.residual_ms for s in steps])
            a, b, c = line_fit(x, y)
            print(
                f"  residual ~ {a:.1f} ms + {b:.3f} ms per request + {c:.2f} ms per 10k KV tokens"
                f" (median residual {float(np.median(y)):.1f} ms,"
                f" median model/measured {float(np.median([s.model_ms / s.measured_ms for s in steps])):.2f})"
            )
        print()

    spec = catalog.model("deepseek-ai/DeepSeek-R1")
    mi300x = catalog.gpu("mi300x")
    fp8 = mi300x.peak("fp8") * 1e12
    hbm = mi300x.hbm_bandwidth_gb_per_s * 1e9
    print("DeepSeek-R1 TP8 dense block-FP8 GEMMs of one decode step (M <= 128) vs AITER")
    print("v0.1.10.post3's Triton gemm_a8w8_blockscale tuning; MI300X: generic-tile floor per call")
    print("(whole 128x128x128 tiles at the CU's share of the FP8 peak) and the weight read at HBM")
    print("  name               N      K calls gfx950 gfx942  workgroups  floor us  weights us")
    floor = weights = shared = 0.0
    for name, n, k, calls in dense_fp8_gemms(spec, 8):
        t950 = "tuned" if (n, k) in AITER_TUNED_SHAPES["gfx950"] else "-"
        t942 = "tuned" if (n, k) in AITER_TUNED_SHAPES["gfx942"] else "-"
        f = generic_tile_floor_s(n, k, 64, "gfx942", fp8)
        w = n * k / hbm  # one byte per FP8 weight
        floor += calls * f
        weights += calls * w
        if name.startswith("shared"):
            shared += calls * f
        print(
            f"  {name:15s} {n:6d} {k:6d} {calls:5d} {t950:>6} {t942:>6}"
            f"  {generic_workgroups(64, n):5d}/{COMPUTE_UNITS['gfx942']}"
            f"  {f * 1e6:8.1f}  {w * 1e6:10.1f}"
        )
    print(
        f"  per step: generic-tile floor {floor * 1e3:.1f} ms against {weights * 1e3:.1f} ms of"
        " weight reads at the full HBM rate;"
    )
    print(
        f"  {(floor - shared) * 1e3:.1f} ms without the shared expert's two GEMMs (SGLang can"
        " fuse the shared expert into the MoE kernel; not read for this build)"
    )


if __name__ == "__main__":
    main()
