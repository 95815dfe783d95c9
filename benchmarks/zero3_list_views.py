"""Host cost per rank of the Python loops DeepSpeed 0.3.13-0.5.x runs for every ZeRO-3
parameter all-gather and gradient reduce-scatter: a list of ``world_size`` views of one flat
buffer handed to ``torch.distributed`` as a tensor list.

    python benchmarks/zero3_list_views.py [--ranks 1536] [--repeat 100]

The two loops follow deepspeed/runtime/zero/partition_parameters.py (v0.3.13, 12a53b4):
``Init._allgather_param`` appends ``flat.narrow(...)`` and compares the index with
``torch.distributed.get_rank(group=...)`` for every rank; ``Init._reduce_scatter_gradient``
computes the rank's bounds and appends ``grad.view(-1).narrow(...)``. Prints microseconds per
rank (best of ``--repeat``; CPU tensors and a one-process gloo group: a view and a rank lookup
cost the same on any device) and their mean, which with one copy launch per list entry
(``kernel_launch_us``; ProcessGroupNCCL copies each entry out of or into its flat buffer) sets
``zero3_host_us_per_rank`` in the deepspeed-2021 profile. A newer Python and CPU than 2021's,
and the best of many repeats, make this a lower bound.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist


def _best_us_per_rank(loop: Callable[[], object], ranks: int, repeat: int) -> float:
    for _ in range(3):
        loop()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        loop()
        best = min(best, time.perf_counter() - start)
    return best / ranks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1536)
    parser.add_argument("--repeat", type=int, default=100)
    args = parser.parse_args()
    n, part = args.ranks, 1024
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group(
            "gloo", init_method=f"file://{Path(tmp) / 'store'}", rank=0, world_size=1
        )
        group = dist.new_group([0])
        flat = torch.zeros(n * part, dtype=torch.float16)
        grad = torch.zeros(n * part, dtype=torch.float16)
        numel = grad.numel()

        def gather_views() -> list[torch.Tensor]:
            views = []
            for i in range(n):
                views.append(flat.narrow(0, part * i, part))
                if i == dist.get_rank(group=group):
                    pass  # DeepSpeed copies its own shard into its view here
            return views

        def scatter_views() -> list[torch.Tensor]:
            views = []
            for i in range(n):
                start = i * part
                if start < numel and start + part <= numel:
                    views.append(grad.view(-1).narrow(0, start, part))
            return views

        gather = _best_us_per_rank(gather_views, n, args.repeat)
        scatter = _best_us_per_rank(scatter_views, n, args.repeat)
        dist.destroy_process_group()
    print(f"all-gather list ({n} ranks):     {gather:.2f} us per rank")
    print(f"reduce-scatter list ({n} ranks): {scatter:.2f} us per rank")
    print(f"mean:                            {(gather + scatter) / 2:.2f} us per rank")


if __name__ == "__main__":
    main()
