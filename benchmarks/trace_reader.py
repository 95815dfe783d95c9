"""Memory and speed of ``gpuscale trace analyze`` on a large synthetic GPU trace.

Writes one Kineto-style trace of a DDP-like GPU job (CPU ops with launches, compute kernels,
NCCL all-reduce kernels, ProfilerStep markers) of about ``--mb`` megabytes, then measures, each in
a fresh subprocess so that peak RSS is the job's own:

- the streaming analysis (``gpuscale.measure.trace.analyze``),
- the nesting-depth check alone (part of that analysis: it reads every byte once more), and
- ``json.load`` of the same file, the first step of any load-it-all analysis.

    python benchmarks/trace_reader.py --mb 300
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD_ANALYZE = """
import sys, time
from gpuscale.measure.trace import analyze
t = time.perf_counter()
r = analyze([sys.argv[1]], workers=1)
b = r.ranks[0].breakdown
print(f"{time.perf_counter() - t:.2f} {r.ranks[0].events} {b.overlap_ratio:.4f}")
"""

_CHILD_DEPTH = """
import sys, time
from pathlib import Path
from gpuscale.measure.trace.reader import _READ_BYTES, MAX_DEPTH, _DepthLimited, _open
t = time.perf_counter()
with _open(Path(sys.argv[1])) as raw:
    stream = _DepthLimited(raw, MAX_DEPTH)
    while stream.read(_READ_BYTES):
        pass
print(f"{time.perf_counter() - t:.2f}")
"""

_CHILD_LOAD = """
import json, sys, time
t = time.perf_counter()
with open(sys.argv[1]) as f:
    d = json.load(f)
print(f"{time.perf_counter() - t:.2f} {len(d['traceEvents'])}")
"""


def write_trace(path: Path, target_bytes: int) -> int:
    """Stream a synthetic trace to ``path``; return the number of events."""
    n = 0
    with path.open("w") as f:
        f.write(
            '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, '
            '"world_size": 8}, "traceEvents": [\n'
        )
        t, step = 0.0, 0
        first = True
        while f.tell() < target_bytes:
            step += 1
            events = [
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{step}",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 100_000.0,
                    "args": {},
                }
            ]
            k = t
            for i in range(2000):
                events.append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "aten::mm",
                        "pid": 1,
                        "tid": 1,
                        "ts": k,
                        "dur": 8.0,
                        "args": {"External id": i, "Input Dims": [[64, 64], [64, 64]]},
                    }
                )
                events.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "sm90_xmma_gemm_bf16",
                        "pid": 0,
                        "tid": 7,
                        "ts": k + 5,
                        "dur": 30.0,
                        "args": {"stream": 7, "device": 0, "correlation": i},
                    }
                )
                if i % 100 == 99:
                    events.append(
                        {
                            "ph": "X",
                            "cat": "kernel",
                            "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)",
                            "pid": 0,
                            "tid": 20,
                            "ts": k,
                            "dur": 900.0,
                            "args": {"stream": 20, "In msg nelems": 1 << 22, "dtype": "BFloat16"},
                        }
                    )
                k += 45
            for e in events:
                f.write(("" if first else ",\n") + json.dumps(e))
                first = False
                n += 1
            t += 100_000.0
        f.write("\n]}\n")
    return n


def _child(code: str, path: Path) -> tuple[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the maximum over all children so far: run the larger one last.
    return out, max(peak_kib, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="trace size in MB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank0.json"
        t = time.perf_counter()
        events = write_trace(path, args.mb * 1_000_000)
        size_mb = path.stat().st_size / 1e6
        print(
            f"trace: {size_mb:.0f} MB, {events:,} events (written in "
            f"{time.perf_counter() - t:.0f} s)"
        )
        out, rss = _child(_CHILD_ANALYZE, path)
        seconds, seen, overlap = out.split()
        print(
            f"gpuscale streaming analyze: {float(seconds):.1f} s, "
            f"{int(seen) / float(seconds):,.0f} events/s, peak RSS {rss:.0f} MiB, "
            f"overlap ratio {overlap}"
        )
        depth_s = float(_child(_CHILD_DEPTH, path)[0])
        print(
            f"nesting-depth check alone:  {depth_s:.2f} s "
            f"({100 * depth_s / float(seconds):.0f}% of the streaming analyze)"
        )
        out, rss_load = _child(_CHILD_LOAD, path)
        seconds, _ = out.split()
        print(f"json.load alone:            {float(seconds):.1f} s, peak RSS {rss_load:.0f} MiB")


if __name__ == "__main__":
    main()
