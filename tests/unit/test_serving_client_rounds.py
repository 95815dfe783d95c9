"""The benchmark length a fixed-length row states: AIConfigurator's client of the row's date
(``serving_clients.aic_client_rounds``), read by the one rule of the model
(``deployment.measured_requests`` / ``benchmark_rounds``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.cohort_sim import BENCHMARK_ROUNDS, simulate_ranks
from gpuscale.planner.serving.deployment import (
    DEFAULT_REQUESTS,
    Client,
    _iteration_model,
    benchmark_rounds,
    measured_requests,
)
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_clients import AIC_CLIENT_ERAS, aic_client_rounds, client_requests
from gpuscale.validation.serving_fields import AIC_GAP_SOURCE
from gpuscale.validation.serving_rows import load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
FIXED = Workload(input_len=1024, output_len=128)


def _gap(backend: str, version: str, measured: str = "") -> dict[str, str]:
    src = f"source_file=/x/{AIC_GAP_SOURCE}/data/h100_sxm/{backend}/{version}/m.csv"
    if measured:
        src += f"; gtl_job_id=1; measured={measured}"
    return {
        "backend": backend,
        "backend_version": version,
        "mode": "agg",
        "silicon_data_source": src,
        "isl": "1024",
        "osl": "128",
    }


@pytest.mark.parametrize(
    ("row", "rounds"),
    [
        # undated, engine versions of Aug-Sep 2025: the eval runner's 10*C
        (_gap("trtllm", "1.0.0rc3"), 10),
        (_gap("sglang", "0.5.1.post1"), 10),
        # undated at the Dynamo 0.8.0 versions, and the campaign's dated rows of them
        (_gap("vllm", "0.12.0"), 10),
        (_gap("sglang", "0.5.6.post2"), 10),
        (_gap("trtllm", "1.2.0rc6.post1", "2026-01-23"), 10),
        (_gap("vllm", "0.12.0", "2026-01-25T10:00:00"), 10),
        # Dynamo 0.9.0, 2026-03-18: the eval runner gone, the generator's template at 50*C
        (_gap("trtllm", "1.3.0rc1", "2026-03-18"), 50),
        # from 2026-04-01 the template's 20*C
        (_gap("trtllm", "1.3.0rc1", "2026-04-01"), 20),
        # both clients published (2026-02-11 .. 03-02), or an undated later version: unstated
        (_gap("trtllm", "1.3.0rc1", "2026-02-20"), None),
        (_gap("sglang", "0.5.8.post1"), None),
        # before any published client
        (_gap("trtllm", "1.0.0rc3", "2025-07-01"), None),
    ],
)
def test_each_era_states_its_count(row: dict[str, str], rounds: int | None) -> None:
    assert aic_client_rounds(row) == rounds
    assert client_requests(row, 16) == ({} if rounds is None else {"num_requests": rounds * 16})


def test_other_sources_state_no_aic_count() -> None:
    row = {**_gap("trtllm", "1.0.0rc3"), "silicon_data_source": "source_file=other.csv"}
    assert aic_client_rounds(row) is None and client_requests(row, 8) == {}


def test_eras_are_in_order_and_the_last_is_todays_default() -> None:
    days = [day for day, _ in AIC_CLIENT_ERAS]
    assert days == sorted(days)
    assert AIC_CLIENT_ERAS[-1][1] == BENCHMARK_ROUNDS


def test_the_rows_state_ten_rounds_where_the_eval_runner_ran() -> None:
    rows = [r for r in load(ROWS) if AIC_GAP_SOURCE in r.raw["silicon_data_source"]]
    by_version: dict[tuple[str, str], set[int | None]] = {}
    for r in rows:
        kw = r.kwargs or r.guess  # a not-expressible row's comparison reading
        n = kw.get("num_requests")
        per = None if n is None else n / kw["concurrency"]
        by_version.setdefault((r.raw["backend"], r.raw["backend_version"]), set()).add(per)
    assert by_version[("trtllm", "1.0.0rc3")] == {10}
    assert by_version[("sglang", "0.5.6.post2")] == {10}
    assert by_version[("vllm", "0.12.0")] == {10}
    assert by_version[("trtllm", "1.3.0rc1")] == {50}
    assert by_version[("sglang", "0.5.8.post1")] == {None}


def test_a_stated_count_sets_the_rounds_and_the_default_is_unchanged() -> None:
    assert benchmark_rounds(FIXED, Client(concurrency=16, num_requests=160)) == 10
    assert benchmark_rounds(FIXED, Client(concurrency=16)) == BENCHMARK_ROUNDS
    assert measured_requests(FIXED, Client(concurrency=16)) == BENCHMARK_ROUNDS * 16
    assert measured_requests(FIXED, Client(request_rate=2.0)) == DEFAULT_REQUESTS
    varied = Workload(input_len=1024, output_len=128, input_cv=0.1)
    assert measured_requests(varied, Client(concurrency=16)) == DEFAULT_REQUESTS


@given(conc=st.integers(1, 4096), n=st.integers(1, 10**6), cv=st.sampled_from([0.0, 0.2]))
def test_rounds_are_the_stated_requests_over_the_concurrency(conc: int, n: int, cv: float) -> None:
    work = Workload(input_len=512, output_len=64, input_cv=cv)
    rounds = benchmark_rounds(work, Client(concurrency=conc, num_requests=n))
    assert rounds == pytest.approx(max(n, conc) / conc)


@pytest.mark.parametrize("rounds", [1, 2, 3, 4, 10, 20, 50])
def test_the_simulation_weights_the_stated_rounds(rounds: int) -> None:
    # Every measured request counts once: the weights add up to rounds x C over the ranks, the
    # short runs (fewer rounds than the four simulated) simulated whole.
    eng = engine("vllm")
    it = _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h100-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    sim = simulate_ranks(it, eng, FIXED, 11, 2, max_running=1e9, rounds=rounds)
    assert sim is not None
    assert sim.weight.sum() == pytest.approx(rounds * 11)
