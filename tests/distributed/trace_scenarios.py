"""Real profiler traces of small DDP jobs in known conditions (ground truth for ``gpuscale trace``).

Two CPU ranks train with DistributedDataParallel over gloo on 127.0.0.1 (``file://`` rendezvous)
under ``torch.profiler``, one scenario after the other in the same process group:

``healthy``       compute-heavy MLP, small gradient, cheap input: nothing to diagnose.
``slow_data``     the same job with a dataset that decodes each batch on the CPU: input-bound.
``straggler``     rank 1 does extra matmuls every step: the other rank waits for it.
``slow_network``  a large gradient (32 MiB) for little compute, so the all-reduce dominates
                  even on loopback: the ratio of bytes to compute makes it network-bound.
``slow_link``     the healthy job, with each rank in its own network namespace and the link
                  between them shaped to 50 Mbit/s (``benchmarks/two_node_testbed.py``): the
                  bandwidth-starved fabric itself. Needs root; skipped elsewhere.

Each rank writes ``<out>/<scenario>/rank<r>.json``. Run by hand with
``python -m tests.distributed.trace_scenarios OUT_DIR`` (loopback scenarios) or, as root,
``python -m tests.distributed.trace_scenarios --link OUT_DIR`` (the shaped-link ones).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

WORLD = 2
ACTIVE_STEPS = 8
"""Profiled steps per scenario (after one skipped and one warm-up step)."""


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    widths: tuple[int, ...]
    """Linear layer sizes: input, hidden..., output."""
    batch: int
    decode_work: int = 0
    """Integers the data loader sums per batch: a CPU-bound decode (~25 ms per million)."""
    straggler_extra_matmuls: int = 0
    """Extra 256x256 matmuls on rank 1 per step (150 take about one step's forward+backward)."""
    link_rate: str | None = None
    """``tc`` rate of the link between the two ranks' namespaces; None: loopback."""
    expected: str | None = None
    """The diagnosis the analyzer must rank first (None: it must find nothing)."""
    tolerated: frozenset[str] = frozenset({"jitter"})
    """Ids it may give besides. gloo transfers on a shared CPU host are themselves noisy (a
    0.4 MiB all-reduce measured 0.3 to 20 ms, CV 0.5-1.0, with other jobs on the cores), so
    jitter is an honest finding in any scenario here; the jitter rule is pinned by unit tests.
    With a 32 MiB gradient, gloo's reduction runs on the same two cores as the next forward and
    lands unevenly on the ranks, so the trace can honestly show a (lesser) straggler as well."""


_MLP = (64, 256, 256, 64)
"""0.4 MiB of gradient for ~2.4 GFLOP per step at batch 4096: communication is a few percent."""

SCENARIOS = (
    Scenario(name="healthy", widths=_MLP, batch=4096),
    Scenario(
        name="slow_data", widths=_MLP, batch=4096, decode_work=1_500_000, expected="input_bound"
    ),
    Scenario(
        name="straggler", widths=_MLP, batch=4096, straggler_extra_matmuls=300, expected="straggler"
    ),
    Scenario(
        name="slow_network",
        widths=(4096, 2048, 8),
        batch=16,
        expected="network_bound",
        tolerated=frozenset({"jitter", "straggler"}),
    ),
    Scenario(
        name="slow_link", widths=_MLP, batch=4096, link_rate="50mbit", expected="network_bound"
    ),
)
"""At 50 Mbit/s the healthy job's 0.4 MiB all-reduce takes ~45 ms beyond tc's 128 KiB burst,
against ~30 ms of compute: about half the step waits on the link."""
LOOPBACK = tuple(s.name for s in SCENARIOS if s.link_rate is None)
SHAPED = tuple(s.name for s in SCENARIOS if s.link_rate is not None)


class HostClock:
    """Per profiled step, what the host's scheduler did to this rank, as the kernel counts it
    (``/proc/self/task/*/schedstat``: ns on a CPU, ns runnable but waiting for one, summed over
    the rank's threads). A trace's times are wall times; these say how much of that wall time
    the host took, so a failed check can tell a busy host from a wrong analyzer."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, float]] = []
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float]:
        run = wait = 0
        tasks = Path("/proc/self/task")
        for task in tasks.iterdir() if tasks.is_dir() else ():
            with contextlib.suppress(OSError, ValueError, IndexError):
                on_cpu, queued = (task / "schedstat").read_text().split()[:2]
                run, wait = run + int(on_cpu), wait + int(queued)
        return time.monotonic(), run / 1e9, wait / 1e9

    def tick(self) -> None:
        now = self._read()
        wall, cpu, wait = (b - a for a, b in zip(self._last, now, strict=True))
        self.rows.append((wall, cpu, wait))
        self._last = now

    def save(self, path: Path) -> None:
        wall, cpu, wait = zip(*self.rows, strict=True) if self.rows else ((), (), ())
        path.write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "wait_s": wait}))


def host_load(folder: Path) -> dict[str, dict[str, float]]:
    """Per rank of a scenario, the median over its steps of CPU time and of run-queue wait
    (all threads) per second of wall time: ~1 and ~0 on an idle host, while other processes
    take the cores the wait grows and the CPU share drops."""
    out = {}
    for f in sorted(folder.glob("rank*.schedstat")):
        doc = json.loads(f.read_text())
        rows = [
            (c / w, q / w)
            for w, c, q in zip(doc["wall_s"], doc["cpu_s"], doc["wait_s"], strict=True)
            if w > 0
        ]
        if rows:
            cpu, wait = (sorted(column)[len(column) // 2] for column in zip(*rows, strict=True))
            out[f.stem] = {"cpu_per_wall": round(cpu, 2), "queued_per_wall": round(wait, 2)}
    return out


def _run_scenario(rank: int, scenario: Scenario, out: Path) -> None:
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for a, b in zip(scenario.widths[:-1], scenario.widths[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = DistributedDataParallel(nn.Sequential(*layers[:-1]))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(scenario.batch, scenario.widths[0])
    y = torch.randn(scenario.batch, scenario.widths[-1])

    class Batches(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
        def __len__(self) -> int:
            return ACTIVE_STEPS + 2

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            # Work, not a sleep: a busy host stretches it as much as the step's compute, so the
            # share of the step spent waiting for data is the same on a loaded host.
            sum(range(scenario.decode_work))
            return x, y

    loader = torch.utils.data.DataLoader(Batches(), batch_size=None)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    folder = out / scenario.name
    folder.mkdir(parents=True, exist_ok=True)
    host = HostClock()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=1, warmup=1, active=ACTIVE_STEPS),
        on_trace_ready=lambda p: p.export_chrome_trace(str(folder / f"rank{rank}.json")),
    ) as prof:
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            if rank == 1:
                for _ in range(scenario.straggler_extra_matmuls):
                    torch.mm(a, b)
            optimizer.step()
            prof.step()
            host.tick()
    host.save(folder / f"rank{rank}.schedstat")


def _rank_main(rank: int, out: str, names: tuple[str, ...]) -> None:
    import warnings

    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    # A trace's time is wall time: other jobs on a shared host stretch one rank's ops and make
    # it look like a straggler. Ask for a larger CPU share where allowed (root, CAP_SYS_NICE);
    # threads started later (gloo's) inherit it.
    with contextlib.suppress(OSError):
        os.nice(-10)
    dist.init_process_group(
        "gloo", init_method=f"file://{out}/rendezvous", rank=rank, world_size=WORLD
    )
    try:
        for scenario in SCENARIOS:
            if scenario.name in names:
                _run_scenario(rank, scenario, Path(out))
                dist.barrier()
    finally:
        dist.destroy_process_group()


def generate(
    out: Path, names: tuple[str, ...] | None = None, timeout_s: float = 120
) -> dict[str, Path]:
    """Run loopback scenarios (all by default); return scenario name -> folder of rank traces."""
    names = names or LOOPBACK
    if set(names) - set(LOOPBACK):
        raise ValueError(f"{sorted(set(names) - set(LOOPBACK))} need generate_over_link")
    out.mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_rank_main, args=(r, str(out), names), daemon=True) for r in range(WORLD)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    codes = [p.exitcode for p in procs]
    if any(c != 0 for c in codes):
        raise RuntimeError(f"trace scenario ranks exited with {codes} (None: timed out)")
    return {name: out / name for name in names}


def generate_over_link(
    out: Path, names: tuple[str, ...] | None = None, timeout_s: float = 120
) -> dict[str, Path] | str:
    """Run shaped-link scenarios (all by default), one rank per namespace of the two-node
    testbed, one scenario at a time at its rate; return name -> folder, or why the testbed
    cannot run here. Rendezvous is a file both namespaces see; gloo's traffic goes over the
    veth pair (``GLOO_SOCKET_IFNAME``)."""
    from benchmarks.two_node_testbed import testbed_guard, why_not

    names = names or SHAPED
    out.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    with testbed_guard() as bed:
        reason = why_not(bed)
        if reason is not None:
            return reason
        for scenario in (s for s in SCENARIOS if s.name in names):
            assert scenario.link_rate is not None, scenario.name
            bed.shape(scenario.link_rate)
            folder = out / f"{scenario.name}-rendezvous"
            folder.mkdir()
            logs = [folder / f"rank{rank}.log" for rank in range(WORLD)]
            for rank, log in enumerate(logs):
                command = [sys.executable, "-m", "tests.distributed.trace_scenarios"]
                command += ["--rank", str(rank), "--names", scenario.name, str(folder)]
                bed.spawn(rank, command, log, cwd=root)
            deadline = time.monotonic() + timeout_s
            codes: list[int | None] = []
            try:
                for child in bed.children:
                    try:
                        codes.append(child.wait(max(0.1, deadline - time.monotonic())))
                    except subprocess.TimeoutExpired:
                        codes.append(None)
            finally:
                bed.reap()
            if any(c != 0 for c in codes):
                tails = [log.read_text(errors="replace")[-2000:] for log in logs]
                raise RuntimeError(
                    f"{scenario.name} ranks exited with {codes} (None: timed out): {tails}"
                )
            shutil.move(folder / scenario.name, out / scenario.name)
            shutil.rmtree(folder)
    return {name: out / name for name in names}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--link", action="store_true", help="the shaped-link scenarios (root)")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank is not None:
        _rank_main(args.rank, str(args.out), tuple(args.names.split(",")))
        return
    made = generate_over_link(args.out) if args.link else generate(args.out)
    if isinstance(made, str):
        print(f"skipped: {made}")
        return
    for name, folder in made.items():
        print(name, folder)


if __name__ == "__main__":
    main()
