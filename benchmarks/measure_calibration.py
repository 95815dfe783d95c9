"""How well does the collective cost model, calibrated per log, reproduce real nccl-tests runs?
And how fast does the benchmark launcher notice a dead or frozen rank?

    python benchmarks/measure_calibration.py            # fit quality on the shipped logs
    python benchmarks/measure_calibration.py --faults   # plus fault-detection latency (gloo)

Prints one row per log: the fitted per-step latency (alpha) and bandwidth (per NIC for inter),
the relative residuals of the fit, and the error of the prediction at the largest size (what a
data-parallel gradient all-reduce looks like).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from pathlib import Path

from gpuscale.measure.calibrate import calibrate
from gpuscale.measure.nccl_tests import parse_files

LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "nccl-tests"


def fit_quality() -> None:
    print(
        f"{'log':<46} {'level':<6} {'n':>3} {'alpha us':>8} {'bw GB/s':>8} {'rms':>6} "
        f"{'max':>6} {'err@max':>8}"
    )
    for path in sorted(LOGS.glob("*.log")):
        runs = parse_files([path])
        samples = [s for r in runs for s in r.samples()]
        if not samples:
            print(f"{path.name:<46} (no rows: {runs[0].aborted or 'empty'})")
            continue
        cal = calibrate(samples)
        for level, fit in cal.links.items():
            biggest = max(
                (c for c in cal.comparisons if c.level == level), key=lambda c: c.size_bytes
            )
            print(
                f"{path.name:<46} {level:<6} {max(s.ranks for s in samples):>3} "
                f"{fit.latency_us:>8.2f} {fit.bandwidth_gb_per_s:>8.2f} "
                f"{fit.rms_rel_residual:>6.1%} {fit.max_rel_residual:>6.1%} "
                f"{biggest.rel_error:>+8.1%}"
            )


def fault_latency(repeat: int = 3) -> None:
    from gpuscale.measure.collectives_bench import CollectiveConfig
    from gpuscale.measure.launcher import RankFailure, launch

    cfg = CollectiveConfig(
        ops=("all_reduce",), sizes=(65536,), iters=10**7, warmup=1, backend="gloo", timeout_s=8.0
    )
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        waits = []
        for _ in range(repeat):
            fired: list[float] = []

            def on_start(pids: list[int], sig: int = sig, fired: list[float] = fired) -> None:
                def kill() -> None:
                    fired.append(time.monotonic())
                    os.kill(pids[1], sig)

                threading.Timer(3.0, kill).start()

            try:
                launch(cfg.to_dict(), 3, timeout_s=8.0, on_start=on_start)
            except RankFailure as exc:
                waits.append(time.monotonic() - fired[0])
                message = str(exc)
        print(
            f"{signal.Signals(sig).name:<8} detected after {min(waits):.2f}-{max(waits):.2f} s "
            f"(3 gloo ranks, --timeout 8): {message}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", action="store_true", help="also time fault detection")
    args = parser.parse_args()
    fit_quality()
    if args.faults:
        fault_latency()


if __name__ == "__main__":
    main()
