"""The benchmark client each measured serving row ran: the prompt and output lengths it sent,
the requests it measured (rounds of ``C`` after its warm-up), and the rows whose recorded
concurrency is the client's cap rather than the engine's load. Read from the row's source,
engine, system and day."""

from __future__ import annotations

from typing import Any

from gpuscale.validation.serving_fields import (
    AIC_GAP_SOURCE,
    INFERENCEX_EXPORTS,
    INFERENCEX_SOURCES,
    concurrency,
    measured_day,
    sa_bench,
)
from gpuscale.validation.serving_launches import (
    AIC_GENERATOR_VERSIONS,
)

INFERENCEX_RANGE_RATIO = 0.8
"""InferenceX's client draws each request's input and output length uniformly from the integers
[int(L x ratio), L] (``utils/bench_serving/benchmark_serving.py`` ``sample_uniform``) with
``RANDOM_RANGE_RATIO: 0.8`` (``.github/workflows/benchmark-tmpl.yml``, env and input default)."""


INFERENCEX_ROUNDS = 10
"""InferenceX measures ``--num-prompts $((CONC * 10))`` requests after ``--num-warmups
$((2 * CONC))`` (``benchmarks/benchmark_lib.sh`` ``run_benchmark_serving``)."""


SA_BENCH_ROUNDS = 5
"""InferenceX's multi-node disaggregated runs launch srt-slurm recipes whose ``benchmark.type``
is ``sa-bench`` (e.g. ``recipes/trtllm/h200/1k1k/stp/c64_ctx1_gen9_tep8_batch256_eplb0_mtp0
.yaml``, ishandhanani/srt-slurm branch ``sa-submission-q1-2026``, named by InferenceX
``nvidia-master.yaml`` at 49f8ceee0 and launched as ``srtctl apply -f "$CONFIG_FILE"`` by
``runners/launch_h200-dgxc-slurm.sh``). sa-bench (``src/srtctl/benchmarks/scripts/sa-bench/
bench.sh``) runs a separate warm-up of ``5*C`` prompts first, then measures ``--num-prompts
$((concurrency * 5))`` with ``--request-rate inf --max-concurrency C --random-range-ratio
0.8 --ignore-eos``: five rounds of C requests, lengths uniform over [0.8 L, L]."""


DYNAMO_TRTLLM_SWEEP_ROUNDS = 8
"""InferenceX's GB200 Dynamo-TensorRT-LLM runs before srt-slurm launched ai-dynamo/dynamo
``release/0.5.1-rc0.20251105`` ``components/backends/trtllm/performance_sweeps/
benchmark_disagg.slurm`` (SemiAnalysisAI/InferenceX ``runners/launch_gb200-nv.sh`` at 175fe5364,
then ``benchmarks/dsr1_fp4_gb200_dynamo-trt_slurm.sh`` from 93e1b3ca1), which runs
``scripts/bench.sh`` with ``MULTI_ROUND="${MULTI_ROUND:-8}"`` (InferenceX sets none; the
default is 8 in every version of the file on Dynamo's ``main``, 86a4a58e4 2025-08-19 to
cf433e682 2026-01-02, read in zinuga/dynamo). ``bench.sh`` (read at 0857f8c63) warms up with
``multi_round`` prompts at ``--max-concurrency 1``, then measures ``--num-prompts
$((concurrency * multi_round))`` at ``--max-concurrency $concurrency``, ``concurrency`` the
``conc-list`` value x decode servers: eight rounds of C."""


DYNAMO_TRTLLM_SWEEP_LAST_DAY = "2026-01-30"
"""InferenceX 4e9a376bf (#510, merged 2026-01-31T04:24Z) moved GB200 Dynamo-TensorRT-LLM to
``srtctl apply`` of srt-slurm recipes (sa-bench); the runs of earlier days used Dynamo's
``bench.sh`` (:data:`DYNAMO_TRTLLM_SWEEP_ROUNDS`)."""


MORI_BENCH_ROUNDS = 10
"""InferenceX's MI355X MoRI-SGLang disaggregated runs (the only MI355X SGLang disaggregated
framework, ``amd-master.yaml``): from 8d81e0bf4 (#666, 2026-02-19) InferenceX's own
``benchmarks/multi_node/amd_utils/bench.sh`` measures ``--num-prompts $(( $max_concurrency *
$num_prompts_multiplier ))`` with ``submit.sh``'s ``export BENCH_NUM_PROMPTS_MULTIPLIER=10``
(same at 4706e7009 and 4230b97ca), after ``run_benchmark_serving``'s ``--num-warmups
$((2 * max_concurrency))`` (``benchmarks/benchmark_lib.sh``). Before, the launch scripts cloned
billishyahao/sglang_disagg, whose ``bench.sh`` has the same line (every public version,
a309434 2025-12-19 to be693a3 2026-01-08), ``sglang_disagg_server.sh`` at the pinned
14606ff7c passes ``BENCH_NUM_PROMPTS_MULTIPLIER`` (default 10), and ``submit_disagg.sh`` exports
10 in every public version but two intermediate commits of 2026-01-06 (61d3ac2, fef2265: 1,
back to 10 the same day). The pinned commits' ``submit_disagg.sh`` is not public."""


def disagg_client_rounds(r: dict[str, str]) -> int:
    """Rounds of C requests the client of a disaggregated InferenceX row measured, by the
    client its launch ran: Dynamo's TensorRT-LLM ``bench.sh`` (GB200 to
    :data:`DYNAMO_TRTLLM_SWEEP_LAST_DAY`), the MoRI launchers' ``bench.sh`` (MI355X SGLang) or
    sa-bench (the srt-slurm recipes, :data:`SA_BENCH_ROUNDS`; Dynamo's SGLang ``slurm_jobs``
    client of the GB200 Dynamo-SGLang runs of 2025-12, ``scripts/vllm/bench.sh``, also
    measures ``num_prompts=$((concurrency * 5))`` in every version of the file, 4b3a2c1a5
    2025-09-10 to b7107d008, the commit ``dsr1_fp{4,8}_gb200_dynamo-sglang_slurm.sh`` pin
    from c040b5cf2)."""
    system, backend, day = r["system"], r["backend"], measured_day(r)
    if system == "gb200" and backend == "trtllm" and "" < day <= DYNAMO_TRTLLM_SWEEP_LAST_DAY:
        return DYNAMO_TRTLLM_SWEEP_ROUNDS
    if system == "mi355x" and backend == "sglang":
        return MORI_BENCH_ROUNDS
    return SA_BENCH_ROUNDS


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
    day = measured_day(r)
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

    AIConfigurator's own clients send fixed lengths with ``ignore_eos``: its eval runner
    (``eval/benchmarks/genai_perf_runner.py``, 2025-08 to 2026-03) passes
    ``--synthetic-input-tokens-stddev 0 --output-tokens-stddev 0``, its generator's
    ``benchmark/bench_run.sh.j2`` ``--isl-stddev``/``--osl-stddev``, 0 by default
    (``generator/config/deployment_config.yaml``). The aggregated rows of the InferenceX exports ran InferenceX's client,
    whose lengths are uniform over [0.8 L, L] (``INFERENCEX_RANGE_RATIO``); their mean is below
    the row's ``isl``/``osl`` and they differ per request, so a closed loop's requests do not
    stay in lockstep cohorts."""
    isl, osl = int(r["isl"]), int(r["osl"])
    agg_ix = r["mode"] == "agg" and r["silicon_data_source"].startswith(INFERENCEX_SOURCES)
    if not (agg_ix or sa_bench(r)):
        return {"input_len": isl, "output_len": osl}
    (im, icv), (om, ocv) = (uniform_lengths(n, INFERENCEX_RANGE_RATIO) for n in (isl, osl))
    return {"input_len": round(im), "output_len": round(om), "input_cv": icv, "output_cv": ocv}


def client_requests(r: dict[str, str], conc: int) -> dict[str, Any]:
    """Requests the row's client measured after its warm-up (the first ``conc`` of them are the
    start burst), where its source states them: InferenceX's scripts pass ``--num-prompts
    $((CONC * 10))`` (e.g. ``benchmarks/*.sh`` ``run_benchmark_serving``), disaggregated runs
    the count of their launch's client (``disagg_client_rounds``: sa-bench ``5*C``);
    AIConfigurator's gap-analysis rows the count of the client of their date
    (``aic_client_rounds``). Otherwise none: the client's default
    (``deployment.measured_requests``)."""
    if "input_cv" in client_lengths(r):
        ix_rounds = disagg_client_rounds(r) if sa_bench(r) else INFERENCEX_ROUNDS
        return {"num_requests": ix_rounds * conc}
    rounds = aic_client_rounds(r)
    return {} if rounds is None else {"num_requests": rounds * conc}


AIC_CLIENT_ERAS: tuple[tuple[str, int | None], ...] = (
    ("2025-08-19", 10),
    ("2026-02-11", None),
    ("2026-03-03", 50),
    ("2026-04-01", 20),
)
"""Rounds of ``C`` requests AIConfigurator's published benchmark client measured, from each
first day (UTC author dates in ai-dynamo/aiconfigurator) to the next; every one after a warm-up
of ``2*C`` that drains first (``cohort_sim.BENCHMARK_ROUNDS``):

- 10: the eval pipeline's runner (``src/aiconfigurator/eval/benchmarks/genai_perf_runner.py``,
  f188ca45c 2025-08-19, in 961028348 "automation eval" 2025-08-22: genai-perf ``--concurrency C
  --request-count 10*C --warmup-request-count 2*C --num-dataset-entries 12*C``, fixed lengths;
  aiperf from 4361371a6, 2025-10-14, same counts; unchanged at c46a56b02, 2026-01-23);
- None: from f90534bc2 (2026-02-11) the generator's ``benchmark/bench_run.sh.j2`` (``aiperf
  --num-requests 50*C``) existed beside that runner: a run of those days is not tied to one;
- 50: the eval module removed (c0c44d911, 2026-03-03), the generator's template alone
  (``BENCH_MULTI_ROUND`` default 50 at 2fc13d121, 2026-03-17);
- 20: ``BENCH_MULTI_ROUND`` default 20 from 1cc3526b4 (2026-04-01) to 095f58a51."""


AIC_EVAL_ERA_VERSIONS = frozenset(
    {("trtllm", "1.0.0rc3"), ("sglang", "0.5.1.post1"), *AIC_GENERATOR_VERSIONS}
)
"""Engine versions whose gap-analysis rows record no ``measured=`` day but ran in the eval
runner's era (``AIC_CLIENT_ERAS``, 10 rounds). The Dynamo 0.8.0 versions
(``AIC_GENERATOR_VERSIONS``): the campaign's dated rows of exactly these versions ran on
2026-01-23/25, the day the launch of those rows is read at too (``aic_generator_launch``).
TensorRT-LLM 1.0.0rc3 and SGLang 0.5.1.post1: versions of August-September 2025, in
AIConfigurator's database from its first commit (efcae124c, 2025-08-11; TensorRT-LLM 1.0.0rc3
templates) and from dfbae5c66 (2025-09-18, SGLang 0.5.1.post1 data); older than the versions of
every Dynamo release in AIConfigurator's Dynamo matrix (``generator/facts/runtimes/dynamo.yaml``
at 095f58a51: from 0.6.0, TensorRT-LLM 1.1.0rc5 and SGLang 0.5.3.post2). SGLang 0.5.8.post1
(database from 2026-02-09) and later versions are not placed: their days may fall after the
generator's template appeared."""


def aic_client_rounds(r: dict[str, str]) -> int | None:
    """Rounds of ``C`` requests an AIConfigurator gap-analysis row's client measured: by its
    ``measured=`` day, else by its engine version's era (``AIC_CLIENT_ERAS``,
    ``AIC_EVAL_ERA_VERSIONS``); None when neither places it."""
    if AIC_GAP_SOURCE not in r["silicon_data_source"]:
        return None
    day = measured_day(r)
    if not day:
        era = (r["backend"], r["backend_version"]) in AIC_EVAL_ERA_VERSIONS
        return AIC_CLIENT_ERAS[0][1] if era else None
    rounds: int | None = None
    for first, count in AIC_CLIENT_ERAS:
        if day >= first:
            rounds = count
    return rounds
