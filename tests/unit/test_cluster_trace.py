"""Traces: the real Philly file loads as published; the synthetic one matches its statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cluster.trace import (
    philly_statistics,
    read_trace,
    synthetic_philly,
    trace_statistics,
    write_trace,
)
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR

PHILLY = Path(DATA_DIR) / "cluster" / "philly_pollux.csv"


def test_real_philly_loads_as_published() -> None:
    trace = read_trace(PHILLY)
    assert len(trace) == 82_247
    assert (np.diff(trace.submit_s) >= 0).all()  # the file is not sorted; the trace is
    stats = trace_statistics(trace)
    targets = philly_statistics()["targets"]
    assert stats["one_gpu_job_share"] == pytest.approx(targets["one_gpu_job_share"], abs=1e-3)
    assert stats["median_duration_s"] == pytest.approx(targets["median_duration_s"])
    assert stats["gpu_time_share_8_or_more"] == pytest.approx(
        targets["gpu_time_share_8_or_more"], abs=1e-3
    )


def test_synthetic_matches_published_statistics() -> None:
    targets = philly_statistics()["targets"]
    stats = trace_statistics(synthetic_philly(50_000, seed=7))
    assert stats["one_gpu_job_share"] == pytest.approx(targets["one_gpu_job_share"], abs=0.005)
    assert stats["median_duration_s"] == pytest.approx(targets["median_duration_s"], rel=0.1)
    assert stats["p90_duration_s"] == pytest.approx(targets["p90_duration_s"], rel=0.2)
    assert stats["gpu_time_share_8_or_more"] == pytest.approx(
        targets["gpu_time_share_8_or_more"], abs=0.08
    )
    # bursty: far above the 0.15 a Poisson process at the same rate gives
    assert 1.2 < stats["hourly_count_cv"] < 2.8


def test_load_scaling_and_roundtrip(tmp_path: Path) -> None:
    light = synthetic_philly(2000, seed=1)
    heavy = synthetic_philly(2000, seed=1, load_gpus=3000)
    assert heavy.submit_s[-1] < light.submit_s[-1] / 4
    path = tmp_path / "t.csv"
    write_trace(heavy, path)
    back = read_trace(path)
    assert back.gpus.tolist() == heavy.gpus.tolist()
    assert np.allclose(back.work_s, heavy.work_s, atol=1e-3)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a,b\n1,2\n", "no column"),
        ("submit_s,gpus,duration_s\n0,0,10\n", "GPUs must be an integer from 1"),
        ("submit_s,gpus,duration_s\n0,1e310,10\n", "GPUs must be an integer from 1"),
        # found by hypothesis in CI: a finite float too large for int64
        ("submit_s,gpus,duration_s\n0,1e100,1\n", "GPUs must be an integer from 1"),
        ("submit_s,gpus,duration_s\n0,1,-1\n", "duration must be > 0"),
        ("submit_s,gpus,duration_s\n0,1,1e300\n", "at most 1e\\+09 seconds"),
        ("submit_s,gpus,duration_s\ninf,1,5\n", "finite number of seconds"),
        ("submit_s,gpus,duration_s\nnan,1,5\n", "finite number of seconds"),
        ("submit_s,gpus,duration_s\nyesterday,1,5\n", "neither seconds"),
        ("submit_s,gpus,duration_s\n", "no jobs"),
    ],
)
def test_bad_csv_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=words):
        read_trace(path)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.text(alphabet="0123456789.-e, x", max_size=6), min_size=3, max_size=3),
        max_size=5,
    )
)
def test_csv_parser_only_raises_input_error(
    tmp_path_factory: pytest.TempPathFactory, rows: list[list[str]]
) -> None:
    path = tmp_path_factory.mktemp("h") / "t.csv"
    path.write_text(
        "submit_s,gpus,duration_s\n" + "".join(";".join(r).replace(";", ",") + "\n" for r in rows)
    )
    try:
        trace = read_trace(path)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert (trace.gpus >= 1).all() and (trace.work_s > 0).all()
