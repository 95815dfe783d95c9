"""TensorRT-LLM's batch waiting (``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio``)
and the launch settings of InferenceX's aggregated runs (``serving_launches.launch_options``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale.api import InputError, infer
from gpuscale.planner.serving.steady_state import batch_wait
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import (
    AIC_GENERATOR_VERSIONS,
    INFERENCEX_DSR1_TRT_MEMORY_FRACTION,
    INFERENCEX_GPTOSS_TRT,
    INFERENCEX_LAUNCHES,
    INFERENCEX_LLAMA70B_TRT_BATCH_WAIT,
    INFERENCEX_LLAMA70B_TRT_MAX_NUM_TOKENS,
)
from gpuscale.validation.serving_rows import load, read_rows

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _held(arrivals: float, timeout: float, need: int) -> tuple[float, float]:
    held, batch = batch_wait(np.array([arrivals]), timeout, np.array([need]))
    return float(held[0]), float(batch[0])


def _simulated(arrivals: float, timeout: float, need: int, n: int = 200_000) -> float:
    """The executor's rule replayed on Poisson arrivals: the first held prompt opens a window
    that ends after ``timeout`` or at the arrival that makes ``need`` prompts."""
    t = np.cumsum(np.random.default_rng(7).exponential(1.0 / arrivals, n))
    waits, i = [], 0
    while i < n - need:
        j = int(min(np.searchsorted(t, t[i] + timeout), i + need))
        release = t[i] + timeout if j - i < need else t[j - 1]
        waits.append(release - t[i:j])
        i = j
    return float(np.concatenate(waits).mean())


@pytest.mark.parametrize(("arrivals", "need"), [(0.1, 16), (0.5, 4), (2.0, 16), (0.3, 3)])
def test_mean_hold_matches_the_executor_rule_on_poisson_arrivals(
    arrivals: float, need: int
) -> None:
    assert _held(arrivals, 20.0, need)[0] == pytest.approx(
        _simulated(arrivals, 20.0, need), rel=0.02
    )


def test_light_load_waits_the_whole_timeout_and_one_prompt_needs_no_wait() -> None:
    assert _held(1e-7, 20.0, 16) == pytest.approx((20.0, 1.0), rel=1e-5)
    assert _held(0.3, 20.0, 1) == (0.0, 1.0)
    # Never binding token threshold: (T + a T^2 / 2) / (1 + a T) by hand.
    assert _held(0.1, 20.0, 10_000)[0] == pytest.approx((20 + 0.1 * 400 / 2) / 3, rel=1e-9)


@given(a=st.floats(1e-4, 50.0), timeout=st.floats(1.0, 100.0), need=st.integers(1, 200))
def test_hold_is_within_the_timeout_and_falls_with_the_load(
    a: float, timeout: float, need: int
) -> None:
    held, batch = _held(a, timeout, need)
    assert 0.0 <= held <= timeout * (1 + 1e-9)
    assert 1.0 <= batch <= need + 1e-9
    assert _held(a * 2.0, timeout, need)[0] <= held * (1 + 1e-6) + 1e-9


KW = dict(
    gpu="h200-sxm",
    engine="tensorrt-llm",
    weights="fp8",
    input_len=922,
    output_len=922,
    input_cv=0.064,
    output_cv=0.064,
    concurrency=4,
    num_requests=40,
)
WAIT = {
    "max_num_batched_tokens": 16384,
    "batch_wait_timeout_iters": 20,
    "batch_wait_max_tokens_ratio": 0.9,
}


def test_batch_wait_adds_about_the_timeout_at_light_load() -> None:
    # Llama-3.1-70B on one H200 at C = 4: a prompt arrives every ~230 decode iterations, so the
    # 20-iteration timeout, not the token threshold (16 prompts), releases it.
    off = infer("llama3.1-70b", **KW, engine_options={"max_num_batched_tokens": 16384})
    on = infer("llama3.1-70b", **KW, engine_options=WAIT)
    o_off, o_on = off.to_dict()["options"][0], on.to_dict()["options"][0]
    added = (o_on["ttft_ms"] - o_off["ttft_ms"]) / o_on["tpot_ms"]
    assert 15.0 < added < 21.0
    assert o_on["tpot_ms"] == pytest.approx(o_off["tpot_ms"], rel=0.02)


def test_no_hold_with_attention_dp() -> None:
    kw = {**KW, "concurrency": 64, "num_requests": 640}
    adp = dict(tp=8, ep=8, attention_dp=8)
    a = infer("deepseek-r1", **kw, **adp).to_dict()["options"][0]["ttft_ms"]
    b = infer(
        "deepseek-r1", **kw, **adp, engine_options={k: v for k, v in WAIT.items() if "wait" in k}
    )
    assert b.to_dict()["options"][0]["ttft_ms"] == pytest.approx(a)


@pytest.mark.parametrize(
    "options",
    [
        {"max_batch": 8},
        {"max_num_seqs": 0},
        {"overlap_scheduler": 1},
        {"memory_fraction": 1.5},
        {"memory_fraction": 0.0},
        {"max_num_seqs": 10**400},
        {"max_num_batched_tokens": 1e30},
        {"max_num_seqs": 2.5},
        {"chunked_prefill": False, "max_num_batched_tokens": 16},
    ],
)
def test_bad_engine_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(InputError) as err:
        infer("llama3.1-70b", **KW, engine_options=options)
    assert err.value.field == "engine_options"


def _llama70b() -> list:
    return [
        r
        for r in load(ROWS)
        if r.raw["model_path"] == "meta-llama/Llama-3.1-70B" and r.mode == "agg"
    ]


def test_inferencex_llama70b_rows_carry_their_launch_scripts() -> None:
    rows = _llama70b()
    trt = [r for r in rows if r.engine == "trtllm"]
    vllm = [r for r in rows if r.engine == "vllm"]
    assert len(trt) == 72 and len(vllm) == 105
    for r in trt:
        opts = r.kwargs["engine_options"]
        assert r.kwargs["kv_dtype"] == "fp8"
        assert opts["max_num_batched_tokens"] == INFERENCEX_LLAMA70B_TRT_MAX_NUM_TOKENS
        waits = r.raw["isl"] == r.raw["osl"] == "1024" and r.kwargs["tp"] < 8
        assert ("batch_wait_timeout_iters" in opts) == waits
        if waits:
            assert {k: opts[k] for k in INFERENCEX_LLAMA70B_TRT_BATCH_WAIT} == (
                INFERENCEX_LLAMA70B_TRT_BATCH_WAIT
            )
    assert sum("batch_wait_timeout_iters" in r.kwargs["engine_options"] for r in trt) == 18
    for r in vllm:
        assert r.kwargs["kv_dtype"] == "fp8"
        assert r.kwargs["engine_options"] == {"overlap_scheduler": True}
    # Only rows whose launch was read get options: InferenceX rows of a launch script read, and
    # AIConfigurator gap-analysis rows at the Dynamo 0.8.0 engine versions its generator
    # templated (serving_launches.aic_generator_launch). Rounded copies of InferenceX rows are read
    # as their originals (serving_rows.rounded_copies).
    others = [
        r for r in load(ROWS) if r not in rows and "engine_options" in r.kwargs and not r.copy_of
    ]
    gap = [r for r in others if "aic-auto-gap-analysis" in r.raw["silicon_data_source"]]
    assert all(
        r.raw["silicon_data_source"].startswith(("source_file=2026-0", "db-dump/"))
        for r in others
        if r not in gap
    )
    assert gap and all(
        (r.raw["backend"], r.raw["backend_version"]) in AIC_GENERATOR_VERSIONS for r in gap
    )


def test_every_inferencex_launch_applies_to_its_rows_only() -> None:
    rows = [r for r in load(ROWS) if r.mode == "agg" and r.expressible]
    for launch in INFERENCEX_LAUNCHES:
        mine = [
            r
            for r in rows
            if (r.engine, r.raw["system"]) == (launch.engine, launch.system)
            and r.raw["model_path"] in launch.models
        ]
        # Rounded copies (no date of their own) carry their original's launch: checked there.
        # A launch that splits the experts (vLLM --enable-expert-parallel) is told from one with
        # the same options by the EP the row did not record.
        on = [
            r
            for r in mine
            if r.kwargs.get("engine_options") == launch.options
            and not r.copy_of
            and (r.kwargs["ep"] > int(r.raw["moe_ep_size"] or 1)) == launch.expert_parallel
        ]
        assert on, launch.source
        for r in on:
            day = r.raw["silicon_data_source"].split("measured=")[1][:10]
            assert launch.first <= day <= launch.last
            assert r.kwargs.get("kv_dtype") == launch.kv_dtype
    # SGLang --chunked-prefill-size 32768 on the DeepSeek-R1 H200 rows (exports and dump).
    dsr1 = [r for r in rows if r.engine == "sglang" and "DeepSeek" in r.raw["model_path"]]
    assert len(dsr1) == 45
    assert all(r.kwargs["engine_options"]["max_num_batched_tokens"] == 32768 for r in dsr1)
    # and --max-prefill-tokens 32768 (dsr1_fp8_h200.sh), not ServerArgs' 16384, which split a
    # burst of 1k prompts into prefill batches of 16 instead of 35.
    assert all(r.kwargs["engine_options"]["max_prefill_tokens"] == 32768 for r in dsr1)


def test_inferencex_tensorrt_llm_moe_rows_carry_their_launch_scripts() -> None:
    # Aggregated runs (the disaggregated ones carry their recipes' context-server settings,
    # tests/unit/test_trt_recipe_stages.py).
    rows = [
        r
        for r in load(ROWS)
        if r.engine == "trtllm" and r.mode == "agg" and "engine_options" in r.kwargs
    ]
    dsr1 = [r for r in rows if r.raw["model_path"].startswith("deepseek-ai/DeepSeek-")]
    gptoss = [r for r in rows if r.raw["model_path"] == "openai/gpt-oss-120b"]
    # 88 rows, of which 42 MTP runs of InferenceX's sweeps of 2026-01-14/28 (inferencex_sweeps),
    # which run the MTP script's budget (tests/unit/test_inferencex_sweeps.py)
    assert len(dsr1) == 88 and len(gptoss) == 97
    assert sum("speculative" in r.kwargs for r in dsr1) == 42
    dsr1 = [r for r in dsr1 if "speculative" not in r.kwargs]
    for r in dsr1:
        # max_num_tokens = (CONC + ISL + 64 + 63) / 64 * 64, at least 8192 from 2026-01-28.
        day = r.raw["silicon_data_source"].split("measured=")[1][:10]
        tokens = (r.concurrency + int(r.raw["isl"]) + 127) // 64 * 64
        expect = max(tokens, 8192) if day >= "2026-01-28" else tokens
        assert r.kwargs["engine_options"] == {
            "max_num_batched_tokens": expect,
            "memory_fraction": INFERENCEX_DSR1_TRT_MEMORY_FRACTION,
        }
        assert r.kwargs["kv_dtype"] == "fp8"
        # The attention-DP balance setting of the same script is kept.
        assert ("adp_balance_timeout_iters" in r.kwargs) == (r.kwargs["attention_dp"] > 1)
    assert {r.kwargs["engine_options"]["max_num_batched_tokens"] for r in dsr1} >= {1152, 8320}
    for r in gptoss:
        assert r.kwargs["engine_options"] == INFERENCEX_GPTOSS_TRT
        assert r.kwargs["kv_dtype"] == "bf16"


def test_launch_settings_do_not_depend_on_the_measured_latency() -> None:
    raw = [r.raw for r in load(ROWS) if "engine_options" in r.kwargs]
    moved = [
        {
            **r,
            "silicon_ttft_ms": str(float(r["silicon_ttft_ms"]) * 7.3),
            "silicon_tpot_ms": str(float(r["silicon_tpot_ms"]) / 3.1),
        }
        for r in raw
    ]
    a, b = read_rows(raw), read_rows(moved)
    # A rounded copy is known by its latency equalling its original's (like a disaggregated
    # twin), never by a model's: scaled apart, the 30 Kimi-K2.5 and Qwen3.5 copies read as their
    # own rows.
    assert sum(bool(r.copy_of) for r in a) == 30 and not any(r.copy_of for r in b)
    assert [r.kwargs for r in a if not r.copy_of] == [
        r.kwargs for r, x in zip(b, a, strict=True) if not x.copy_of
    ]
    assert [r.kind for r in a] == [r.kind for r in b]


def test_database_dump_twins_of_inferencex_rows_read_as_the_same_run() -> None:
    # AIConfigurator's db-dump repeats 63 InferenceX aggregated measurements to the digit: the
    # same run, so the same client (random lengths, 10 C prompts) and launch settings.
    rows = [r for r in load(ROWS) if r.mode == "agg" and r.expressible]

    def key(r):  # type: ignore[no-untyped-def]
        raw = r.raw
        return (
            r.engine,
            raw["system"],
            raw["isl"],
            raw["osl"],
            r.concurrency,
            r.ttft_ms,
            r.tpot_ms,
        )

    ix = {key(r): r for r in rows if r.raw["silicon_data_source"].startswith("source_file=2026")}
    dump = [r for r in rows if r.raw["silicon_data_source"].startswith("db-dump/")]
    twins = [(r, ix[key(r)]) for r in dump if key(r) in ix]
    assert len(twins) == 63
    for a, b in twins:
        assert a.kwargs == b.kwargs
        assert a.kwargs["input_cv"] > 0 and a.kwargs["num_requests"] == 10 * a.concurrency


def test_inferencex_llama70b_ttft_with_the_launch_settings() -> None:
    # 177 rows; before the launch settings: TensorRT-LLM 24% mean TTFT error (1k/1k TP < 8
    # about 2.5x short), vLLM H200 85% (KV read as 16-bit: TP1 rows 10-30x too long). Since
    # the H200 kernel readings (GEMMs at the measured sustained rate, docs/benchmarks.md
    # "Kernels measured on an H200") the prefill is faster: vLLM 11.2% -> 15.9%, TensorRT-LLM
    # 8.0% -> 10.5% (bias -10% -> -16% on vLLM H200): a prefill cost the isolated kernels do
    # not show, which the FLOP-indexed curve's pessimism had covered.
    errs: dict[str, list[float]] = {"trtllm": [], "vllm": []}
    for r in _llama70b():
        o = infer(r.raw["model_path"], **r.kwargs).to_dict()["options"][0]
        errs[r.engine].append(abs(o["ttft_ms"] - r.ttft_ms) / r.ttft_ms)
    for engine, e in errs.items():
        assert sum(e) / len(e) < 0.18, engine
        assert max(e) < 1.0, engine


@pytest.mark.parametrize("engine_name", ["vllm", "sglang"])
def test_tensorrt_llm_scheduler_settings_are_refused_for_other_engines(engine_name: str) -> None:
    # Batch waiting and attention-DP balancing exist only in TensorRT-LLM's PyExecutor: on
    # vLLM or SGLang they would change the answer for a feature the engine does not have.
    for name in ("batch_wait_timeout_iters", "adp_balance_timeout_iters"):
        with pytest.raises(InputError, match="tensorrt-llm setting") as err:
            infer("llama3.1-70b", **{**KW, "engine": engine_name}, engine_options={name: 20})
        assert err.value.field == "engine_options"
