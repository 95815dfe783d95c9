"""benchmarks/sglang_aic_queue.py: Little's law on a row's means, SGLang 0.5.x's KV admission
rule replayed request by request, and which gap rows the generator's launch cannot produce."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sglang_aic_queue.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "sglang_aic_queue_benchmark")


def test_littles_law_on_a_rows_means(bench: ModuleType) -> None:
    # C = 100, TTFT 1 s, TPOT 10 ms, OSL 101: E2E = 2 s, X = 50/s, 50 wait, 50 decode,
    # W/S = 1 (a running cap of 50 under C = 100 gives (C - R) / R = 1), 0.5 prompts/iteration.
    m = bench.Measured(concurrency=100.0, ttft_s=1.0, tpot_s=0.01, osl=101.0)
    assert m.e2e_s == pytest.approx(2.0)
    assert m.requests_per_s == pytest.approx(50.0)
    assert m.waiting == pytest.approx(50.0)
    assert m.running == pytest.approx(50.0)
    assert m.wait_share == pytest.approx(1.0)
    assert m.prompts_per_iteration == pytest.approx(0.5)
    assert m.tokens_per_s == pytest.approx(10000.0)


def _replay(pool: float, isl: int, osl: int, ratio: float, mixed: bool) -> int:
    """SGLang 0.5.x PrefillAdder.add_one_req's rem_total_tokens test, request by request, on a
    staggered running set (request i has generated i * osl / R tokens): the largest R whose
    next request is still admitted."""
    best = 0
    for r in range(1, 4000):
        gen = [i * osl / r for i in range(r)]
        held = sum(isl + g for g in gen)
        reserved = sum(min(osl - g, 4096) * ratio for g in gen) + (r if mixed else 0)
        if isl + min(osl, 4096) < pool - held - reserved:
            best = r
        else:
            break
    return best


@pytest.mark.parametrize(
    ("pool", "isl", "osl", "mixed"),
    [(100_000, 1000, 1000, False), (929_321, 1000, 2000, True), (27_652, 2048, 512, False)],
)
def test_kv_admission_matches_a_replay_of_the_rule(
    bench: ModuleType, pool: float, isl: int, osl: int, mixed: bool
) -> None:
    formula = bench.kv_admitted_requests(pool, isl, osl, mixed=mixed)
    replay = _replay(pool, isl, osl, bench.INIT_NEW_TOKEN_RATIO, mixed)
    # The formula is the staggered average; the replay's evenly spread outputs differ by a
    # request at most.
    assert abs(formula - (replay + 1)) <= 1.0


def test_the_reserve_shrinks_the_running_set(bench: ModuleType) -> None:
    # new_token_ratio 0.7 at the start, 0.098 after its decay: fewer requests at the start.
    start = bench.kv_admitted_requests(100_000, 1000, 1000, ratio=0.7)
    decayed = bench.kv_admitted_requests(100_000, 1000, 1000, ratio=0.098)
    assert start < decayed
    # Outputs past 4096 tokens reserve 4096 (CLIP_MAX_NEW_TOKENS).
    long = bench.kv_admitted_requests(1e7, 100, 10_000, ratio=1.0)
    assert long == pytest.approx(bench.np.ceil((1e7 - 100 - 4096) / (100 + 5000 + 2048)))


def test_the_generator_launch_is_refuted_exactly_on_the_short_output_rows(
    bench: ModuleType,
) -> None:
    # --max-prefill-tokens isl+1500 with --enable-mixed-chunk starts at most 2 prompts of 1000
    # tokens and 1 of 2000 per iteration; the 100-token-output rows at TP2-8 ran more (Little's
    # law on their own means), every other SGLang 0.5.6.post2 Llama-3.1-8B row ran fewer.
    rows = [
        r
        for r in bench.gap_rows(bench.load(bench.ROWS))
        if r.raw["backend_version"] == "0.5.6.post2" and "Llama" in r.raw["model_path"]
    ]
    assert len(rows) == 46
    refuted = {
        (r.raw["tp_size"], r.raw["isl"], r.raw["osl"])
        for r in rows
        if bench.verdict(r).launch_refuted
    }
    assert refuted == {
        ("4", "1000", "100"),
        ("8", "1000", "100"),
        ("2", "2000", "100"),
        ("4", "2000", "100"),
        ("8", "2000", "100"),
    }


def test_no_slot_queue_on_the_gap_rows(bench: ModuleType) -> None:
    # Every SGLang gap row's batch_size equals its concurrency: the generator's running cap
    # (--max-running-requests batch_size) never holds a request of a closed loop of C back.
    for row in bench.gap_rows(bench.load(bench.ROWS)):
        assert int(row.raw["batch_size"]) == row.concurrency
        assert "max_num_seqs" not in row.kwargs.get("engine_options", {})


def test_rank_correlation(bench: ModuleType) -> None:
    assert bench.spearman([1.0, 2.0, 3.0], [10.0, 40.0, 90.0]) == pytest.approx(1.0)
    assert bench.spearman([1.0, 2.0, 3.0], [9.0, 4.0, 1.0]) == pytest.approx(-1.0)
