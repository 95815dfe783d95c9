"""The collective benchmark on real gloo processes, and what happens when a rank dies or hangs.

Every run here has a timeout; every test checks that no rank outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuscale.costmodel.collectives import OPS, bus_factor
from gpuscale.measure.collectives_bench import CollectiveConfig
from gpuscale.measure.launcher import RankFailure, launch
from gpuscale.measure.results import CollectiveRun

pytestmark = [pytest.mark.distributed, pytest.mark.torch, pytest.mark.timeout(90)]
torch = pytest.importorskip("torch")


def _alive(pid: int) -> bool:
    """Running and not a zombie (a reaped child is gone from /proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_every_op_on_two_ranks() -> None:
    cfg = CollectiveConfig(
        ops=OPS, sizes=(8, 1000, 65536), iters=3, warmup=1, backend="gloo", timeout_s=30
    )
    pids: list[int] = []
    out = launch(cfg.to_dict(), 2, timeout_s=30, on_start=pids.extend)
    run = CollectiveRun.from_dict(out.result, "rank 0")
    assert (run.backend, run.world_size, run.nodes, run.ranks_per_node) == ("gloo", 2, 1, 2)
    assert [(s.op, s.size_bytes) for s in run.samples][:3] == [
        ("all_reduce", 8),
        ("all_reduce", 1000),
        ("all_reduce", 65536),
    ]
    assert len(run.samples) == len(OPS) * 3
    for s in run.samples:
        assert s.level == "intra" and s.ranks == 2 and s.time_us > 0
        assert s.busbw_gb_per_s == pytest.approx(s.algbw_gb_per_s * float(bus_factor(s.op, 2)))
        assert s.algbw_gb_per_s == pytest.approx(s.size_bytes / s.time_us / 1e3)
        assert s.p50_us is not None and s.p99_us is not None and s.p99_us >= s.p50_us
        assert s.cv is not None and s.cv >= 0
    gathers = [s for s in run.samples if s.op == "all_gather"]
    assert [s.size_bytes for s in gathers] == [8, 1000, 65536]  # multiples of n * 4 bytes
    assert [s.count for s in gathers] == [1, 125, 8192]  # per rank, as nccl-tests counts
    assert not any(_alive(p) for p in pids)


def test_sizes_that_run_as_the_same_buffer_are_measured_once() -> None:
    """4 and 8 bytes of float32 are 1 and 2 elements for all_reduce, but both round up to one
    element per rank (8 B in all) for all_gather: one all_gather row, and a note (review J4)."""
    cfg = CollectiveConfig(
        ops=("all_reduce", "all_gather"), sizes=(4, 8), iters=2, warmup=1, backend="gloo"
    )
    run = CollectiveRun.from_dict(launch(cfg.to_dict(), 2, timeout_s=30).result, "rank 0")
    assert [(s.op, s.size_bytes) for s in run.samples] == [
        ("all_reduce", 4),
        ("all_reduce", 8),
        ("all_gather", 8),
    ]
    assert any("measured once: all_gather (1 repeats)" in n for n in run.notes)


def test_two_levels_on_four_ranks() -> None:
    cfg = CollectiveConfig(
        ops=("all_reduce", "all_gather"),
        sizes=(4096,),
        iters=2,
        warmup=1,
        backend="gloo",
        timeout_s=30,
        group_by_node=True,
        ranks_per_node=2,
    )
    run = CollectiveRun.from_dict(launch(cfg.to_dict(), 4, timeout_s=30).result, "rank 0")
    assert (run.nodes, run.ranks_per_node) == (2, 2)
    levels = [(s.level, s.op, s.ranks, s.ranks_per_node) for s in run.samples]
    assert levels == [
        ("intra", "all_reduce", 2, 2),
        ("intra", "all_gather", 2, 2),
        ("inter", "all_reduce", 2, 1),
        ("inter", "all_gather", 2, 1),
    ]
    assert any("simulated" in n for n in run.notes)


def _kill_later(sig: int, rank: int, delay_s: float, pids: list[int]) -> None:
    def go() -> None:
        os.kill(pids[rank], sig)

    pids_ready = threading.Timer(delay_s, go)
    pids_ready.daemon = True
    pids_ready.start()


@pytest.mark.parametrize(
    ("sig", "words"),
    [(signal.SIGKILL, "was killed by SIGKILL"), (signal.SIGSTOP, "stopped responding")],
)
def test_a_dead_or_frozen_rank_ends_the_run(sig: int, words: str) -> None:
    timeout = 8.0
    cfg = CollectiveConfig(
        ops=("all_reduce",),
        sizes=(65536,),
        iters=10**7,
        warmup=1,
        backend="gloo",
        timeout_s=timeout,
    )
    pids: list[int] = []

    def on_start(started: list[int]) -> None:
        pids.extend(started)
        _kill_later(sig, 1, 2.5, pids)

    t0 = time.monotonic()
    with pytest.raises(RankFailure) as err:
        launch(cfg.to_dict(), 3, timeout_s=timeout, on_start=on_start)
    elapsed = time.monotonic() - t0
    assert err.value.rank == 1
    assert str(err.value).startswith(f"rank 1 {words}")
    assert elapsed < 2.5 + timeout
    assert len(pids) == 3 and not any(_alive(p) for p in pids)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def test_cli_run_with_a_killed_rank_exits_nonzero_and_leaves_no_orphans() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscale.cli.main",
            "bench",
            "collectives",
            "--backend",
            "gloo",
            "--nproc",
            "3",
            "--ops",
            "all_reduce",
            "--sizes",
            "64K",
            "--iters",
            "10000000",
            "--timeout",
            "8",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ranks: list[int] = []
        deadline = time.monotonic() + 30
        while len(ranks) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            ranks = sorted(_children(proc.pid))
        assert len(ranks) == 3, "the ranks did not start"
        time.sleep(2.0)  # let them rendezvous and start the collective
        victim = ranks[-1]
        environ = Path(f"/proc/{victim}/environ").read_bytes().split(b"\0")
        rank = next(e for e in environ if e.startswith(b"RANK=")).decode().split("=")[1]
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpuscale: rank {rank} was killed by SIGKILL")
    assert "Traceback" not in err
    assert not any(_alive(p) for p in ranks)
