"""nccl-tests parser against real logs (tests/data/nccl-tests/SOURCES.md), its JSON report, and
bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.errors import InputError
from gpuscale.measure.nccl_tests import op_from_name, parse, parse_files, parse_json, parse_text

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def _log(name: str) -> Path:
    return LOGS / name


# file, op, ranks, nodes, ranks/node, dtype, rows, complete, first (size, time, busbw), last
REAL = [
    (
        "a100-2node-allreduce-oci-oke.log",
        "all_reduce",
        16,
        2,
        8,
        "float",
        31,
        True,
        (8, 36.47, 0.00),
        (8589934592, 67689.0, 237.94),
    ),
    (
        "h100-2node-allreduce-k8s-mpijob.log",
        "all_reduce",
        16,
        2,
        8,
        "float",
        5,
        True,
        (536870912, 5202.3, 193.50),
        (8589934592, 81958.0, 196.52),
    ),
    (
        "h100-2node-allreduce-aws-p5-tagged-debug.log",
        "all_reduce",
        16,
        2,
        8,
        "float",
        32,
        True,
        (8, 85.70, 0.00),
        (17179869184, 66023.0, 487.90),
    ),
    (
        "gh200-4node-allreduce-int8-wrong.log",
        "all_reduce",
        16,
        4,
        4,
        "int8",
        28,
        False,
        (1, 24.41, 0.00),
        (134217728, 2800.93, 89.85),
    ),
]


@pytest.mark.parametrize(
    ("name", "op", "ranks", "nodes", "per_node", "dtype", "rows", "complete", "first", "last"), REAL
)
def test_real_single_run_logs(
    name: str,
    op: str,
    ranks: int,
    nodes: int,
    per_node: int,
    dtype: str,
    rows: int,
    complete: bool,
    first: tuple[int, float, float],
    last: tuple[int, float, float],
) -> None:
    (run,) = parse_files([_log(name)])
    assert (run.op, run.ranks, run.nodes, run.ranks_per_node, run.dtype) == (
        op,
        ranks,
        nodes,
        per_node,
        dtype,
    )
    assert run.level == "inter"
    assert len(run.rows) == rows
    assert run.complete is complete
    for row, (size, time_us, busbw) in ((run.rows[0], first), (run.rows[-1], last)):
        assert row.size_bytes == size
        assert row.out_of_place is not None
        assert row.out_of_place.time_us == pytest.approx(time_us)
        assert row.out_of_place.busbw_gb_per_s == pytest.approx(busbw)
    sizes = [r.size_bytes for r in run.rows]
    assert sizes == sorted(sizes)


def test_mpirun_tag_output_is_stripped_inside_rows() -> None:
    (run,) = parse_files([_log("h100-2node-allreduce-aws-p5-tagged-debug.log")])
    row = run.rows[0]
    assert (row.size_bytes, row.count, row.dtype, row.redop, row.root) == (8, 2, "float", "sum", -1)
    assert row.in_place is not None and row.in_place.time_us == pytest.approx(74.97)
    assert run.nccl_version == "2.22.3+cuda12.2"
    assert run.iters == 100 and run.warmup_iters == 5
    assert run.avg_busbw_gb_per_s == pytest.approx(124.584)
    assert run.hosts[0] == "test-nccl-worker-0" and run.hosts[-1] == "test-nccl-worker-1"


def test_old_format_five_runs_and_error_column() -> None:
    runs = parse_files([_log("v100-dgx2-5collectives-oldformat.log")])
    assert [r.op for r in runs] == [
        "all_gather",
        "all_reduce",
        "broadcast",
        "reduce",
        "reduce_scatter",
    ]
    assert all(r.op_source == "program name" for r in runs)
    assert all((r.ranks, r.nodes, r.level) == (12, 1, "intra") for r in runs)
    gather = runs[0]
    # nccl-tests flagged the two largest all_gather sizes (error 1e+00; "4 FAILED")
    assert [r.size_bytes for r in gather.wrong_rows] == [4294967280, 8589934560]
    assert gather.out_of_bounds == 4
    assert not runs[1].wrong_rows  # 2e-07 is within float's bound
    assert gather.rows[0].size_bytes == 0  # the three size-0 rows are kept in the parse ...
    assert all(s.size_bytes > 0 for s in gather.samples())  # ... but not used as samples
    broadcast = runs[2]
    assert broadcast.rows[0].redop is None and broadcast.rows[0].root == 0


def test_wrong_values_are_flagged_and_kept_out_of_samples() -> None:
    (run,) = parse_files([_log("gh200-4node-allreduce-int8-wrong.log")])
    assert run.tests_version == "2.17.9"
    bad = [r.size_bytes for r in run.wrong_rows]
    assert bad == [2**21, 2**22, 2**23, 2**24, 2**25, 2**26]
    samples = run.samples()
    assert sum(not s.valid for s in samples) == 6
    warnings = " ".join(run.warnings())
    assert "no footer" in warnings and "wrong values at 6 sizes" in warnings


def test_aborted_run_keeps_its_failure() -> None:
    (run,) = parse_files([_log("h800-2node-alltoall-cuda-failure.log")])
    assert run.op == "all_to_all" and run.rows == ()
    assert run.aborted is not None and "illegal memory access" in run.aborted
    assert run.nccl_version == "2.28.7+cuda13.0"
    assert any("aborted" in w for w in run.warnings())


def test_op_from_bus_factor_when_nothing_names_it() -> None:
    text = _log("a100-2node-allreduce-oci-oke.log").read_text()
    (run,) = parse_text(text, "anonymous.log")
    assert (run.op, run.op_source) == ("all_reduce", "bus-bandwidth factor")
    (forced,) = parse_text(text, "anonymous.log", op="all_reduce")
    assert forced.op_source == "--op"


def test_ambiguous_factor_asks_for_op() -> None:
    text = "\n".join(
        line
        for line in _log("v100-dgx2-5collectives-oldformat.log").read_text().splitlines()
        if not line.startswith("Running")
    )
    with pytest.raises(InputError, match="--op"):
        parse_text(text, "anonymous.log")


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("all_reduce_perf", "all_reduce"),
        ("reduce_scatter_perf", "reduce_scatter"),
        ("alltoall_perf", "all_to_all"),
        ("h100-allgather.log", "all_gather"),
        ("reduce_perf", "reduce"),
        ("sendrecv_perf", "send_recv"),
        ("notes.txt", None),
    ],
)
def test_op_from_name(name: str, op: str | None) -> None:
    assert op_from_name(name) == op


# --------------------------------------------------------------------------------------------
# JSON report (-J): the layout nccl-tests src/util.cu writes (JSON_FILE_VERSION 2)


def _util_cu_json(rows: int = 3, nwrong: float = 0.0) -> dict:
    devices = [
        {
            "rank": r,
            "group": 0,
            "pid": 100 + r,
            "hostname": f"node{r // 4}",
            "device": r % 4,
            "device_hex": f"0000:{r:02x}:00",
            "device_info": "NVIDIA H100 80GB HBM3",
        }
        for r in range(8)
    ]
    results = []
    for i in range(rows):
        size = 1024 * 4**i
        t = 20.0 + size / 50e3
        results.append(
            {
                "size": size,
                "count": size // 4,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": {
                    "time": t,
                    "alg_bw": size / t / 1e3,
                    "bus_bw": size / t / 1e3 * 1.75,
                    "nwrong": nwrong,
                },
                "in_place": {
                    "time": t,
                    "alg_bw": size / t / 1e3,
                    "bus_bw": size / t / 1e3 * 1.75,
                    "nwrong": 0.0,
                },
                "actual_iterations": 20,
                "experiment_name": "",
            }
        )
    return {
        "version": 2,
        "start_time": "2025-01-01 00:00:00",
        "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "1K", "-J", "out.json"],
        "env": [],
        "nccl_version": 22703,
        "config": {
            "nthreads": 1,
            "ngpus": 1,
            "minimum_bytes": 1024,
            "maximum_bytes": 16384,
            "step_factor": 4,
            "warmup_iters": 5,
            "iterations": 20,
            "aggregated_iterations": 1,
            "validation": 1,
            "graph": 0,
            "blocking_collectives": "false",
            "per_iter_timing": "false",
            "parallel_init": "false",
            "devices": devices,
        },
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 1.0, "okay": "unchecked"},
        "errors": [],
        "end_time": "2025-01-01 00:00:09",
    }


def test_json_report() -> None:
    (run,) = parse_json(json.dumps(_util_cu_json()), "out.json")
    assert (run.op, run.op_source, run.ranks, run.nodes, run.ranks_per_node) == (
        "all_reduce",
        "program name",
        8,
        2,
        4,
    )
    assert run.nccl_version == "2.27.3"
    assert [r.size_bytes for r in run.rows] == [1024, 4096, 16384]
    assert run.rows[0].root == -1 and run.complete
    assert run.samples()[1].busbw_gb_per_s == pytest.approx(run.samples()[1].algbw_gb_per_s * 1.75)


def test_json_wrong_counts_and_dispatch() -> None:
    text = json.dumps(_util_cu_json(nwrong=3.0), indent=1)
    (run,) = parse(text, "out.json")  # told apart from text by its first character
    assert len(run.wrong_rows) == 3


def test_truncated_json_names_the_line() -> None:
    text = json.dumps(_util_cu_json(), indent=1)
    cut = text[: len(text) // 2]
    with pytest.raises(InputError, match=r"out\.json:\d+: not valid JSON"):
        parse(cut, "out.json")
