"""Run each bucket's chain of collectives off the autograd thread.

DDP hands a bucket to the hook as soon as its gradients are ready and keeps computing backward
until it needs the hook's future (Li et al. 2020, "PyTorch Distributed", VLDB, Sec. 3.2.3).
Gloo gives no future for reduce-scatter or all-gather, and a chain of blocking collectives on
the autograd thread would stall backward; so one FIFO thread per hook state runs the chains.
FIFO keeps every rank issuing each group's collectives in the same order, because DDP launches
buckets in index order on every rank (torch/csrc/distributed/c10d/reducer.cpp,
``mark_bucket_ready``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

import torch


class CommWorker:
    """A daemon thread that runs posted jobs one after another."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"gpuscale-{name}", daemon=True)
        self._thread.start()

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job posted before it; ``job`` handles its own errors."""
        self._jobs.put(job)

    def submit(self, chain: Callable[[], torch.Tensor]) -> torch.futures.Future[torch.Tensor]:
        """Run ``chain`` in turn; its result or exception completes the returned future."""
        future: torch.futures.Future[torch.Tensor] = torch.futures.Future()

        def job() -> None:
            try:
                result = chain()
            except BaseException as exc:
                # DDP's wait re-raises it on the training thread; torch's stub types the
                # argument as the result type
                future.set_exception(exc)  # type: ignore[arg-type]
            else:
                future.set_result(result)

        self.post(job)
        return future

    def _run(self) -> None:
        while True:
            self._jobs.get()()
