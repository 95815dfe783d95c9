"""Start ``nproc`` benchmark ranks on this machine, watch them, and always reap them.

Each rank is ``python -m gpuscale.measure.worker SPEC`` in its own session (process group), so a
kill reaches anything it started. Ranks talk to the parent over their stdout in one-line JSON
messages (:mod:`gpuscale.measure.worker`): a heartbeat every ``HEARTBEAT_S``, progress after
each measurement, an error kind when they fail, and rank 0's result.

The parent ends the run, kills every rank and names the culprit when:

- a rank exits non-zero or by a signal (the others then fail with a peer error, which is not
  blamed on them);
- a rank stops sending heartbeats (stopped, frozen, swapped out): ``heartbeat_timeout_s``;
- nobody makes progress for ``timeout_s`` (a collective hung on every rank).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuscale.errors import RunFailure

MESSAGE_PREFIX = "@gpuscale "
HEARTBEAT_S = 0.5
HEARTBEAT_LIMIT_S = 5.0
"""A rank silent this long (ten missed heartbeats) is declared stopped."""
PEER_FAILURE_EXIT = 3
"""Exit code of a rank whose collective failed because another rank went away."""
_GRACE_S = 3.0
"""After a first failure, how long to wait for the other ranks' own reports before diagnosing."""


class RankFailure(RunFailure):
    """The run failed; ``rank`` is the rank to blame (``None`` when no single rank is)."""

    def __init__(self, message: str, rank: int | None) -> None:
        super().__init__(message)
        self.rank = rank


@dataclass(kw_only=True)
class _Rank:
    rank: int
    proc: subprocess.Popen[str]
    stderr_path: Path
    last_beat: float
    progress: int = 0
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    reader: threading.Thread | None = None

    def stderr_tail(self) -> str:
        try:
            lines = [ln.strip() for ln in self.stderr_path.read_text(errors="replace").splitlines()]
        except OSError:
            return ""
        lines = [ln for ln in lines if ln and not ln.startswith(("warnings.warn", "W1", "I1"))]
        return lines[-1][:200] if lines else ""


@dataclass(kw_only=True)
class LaunchResult:
    result: dict[str, Any]
    wall_s: float
    notes: list[str] = field(default_factory=list)


def _reader(rank: int, stream: IO[str], inbox: queue.Queue[tuple[int, dict[str, Any]]]) -> None:
    for line in stream:
        if not line.startswith(MESSAGE_PREFIX):
            continue
        try:
            inbox.put((rank, json.loads(line[len(MESSAGE_PREFIX) :])))
        except json.JSONDecodeError:
            continue


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def launch(
    spec: Mapping[str, Any],
    nproc: int,
    *,
    timeout_s: float,
    heartbeat_timeout_s: float | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_start: Callable[[list[int]], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> LaunchResult:
    """Run ``spec`` on ``nproc`` local ranks; return rank 0's result or raise RankFailure.

    ``on_progress(done, total)`` follows rank 0; ``on_start(pids)`` sees the rank pids (tests
    use it to kill a rank on purpose).
    """
    beat_limit = (
        heartbeat_timeout_s
        if heartbeat_timeout_s is not None
        else min(timeout_s / 2, HEARTBEAT_LIMIT_S)
    )
    start = time.monotonic()
    inbox: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    ranks: list[_Rank] = []
    with tempfile.TemporaryDirectory(prefix="gpuscale-launch-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(
            json.dumps({**spec, "init_method": f"file://{tmp}/rendezvous", "timeout_s": timeout_s})
        )
        try:
            for rank in range(nproc):
                ranks.append(_start(rank, nproc, spec_path, Path(tmp), env, inbox))
            if on_start is not None:
                on_start([r.proc.pid for r in ranks])
            result = _watch(ranks, inbox, timeout_s, beat_limit, on_progress)
        finally:
            _reap(ranks)
    return LaunchResult(result=result, wall_s=time.monotonic() - start)


def _start(
    rank: int,
    world: int,
    spec_path: Path,
    tmp: Path,
    env: Mapping[str, str] | None,
    inbox: queue.Queue[tuple[int, dict[str, Any]]],
) -> _Rank:
    child_env = {
        **os.environ,
        **(env or {}),
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "GPUSCALE_PARENT_PID": str(os.getpid()),
        "PYTHONUNBUFFERED": "1",
    }
    stderr_path = tmp / f"rank{rank}.stderr"
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuscale.measure.worker", str(spec_path)],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env=child_env,
            start_new_session=True,
        )
    r = _Rank(rank=rank, proc=proc, stderr_path=stderr_path, last_beat=time.monotonic())
    assert proc.stdout is not None  # stdout=PIPE always gives a stream
    r.reader = threading.Thread(target=_reader, args=(rank, proc.stdout, inbox), daemon=True)
    r.reader.start()
    return r


def _watch(
    ranks: list[_Rank],
    inbox: queue.Queue[tuple[int, dict[str, Any]]],
    timeout_s: float,
    beat_limit: float,
    on_progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    last_progress = time.monotonic()
    first_failure: float | None = None
    while True:
        now = time.monotonic()
        try:
            while True:
                rank, msg = inbox.get_nowait()
                r = ranks[rank]
                r.last_beat = now
                kind = msg.get("event")
                if kind == "progress":
                    r.progress = int(msg.get("done", 0))
                    last_progress = now
                    if rank == 0 and on_progress is not None:
                        on_progress(int(msg.get("done", 0)), int(msg.get("total", 0)))
                elif kind == "error":
                    r.error = msg
                elif kind == "result":
                    r.result = msg.get("data") or {}
        except queue.Empty:
            pass
        codes = [r.proc.poll() for r in ranks]
        if all(c == 0 for c in codes):
            for r in ranks:
                if r.reader is not None:
                    r.reader.join(timeout=5)
            _drain(ranks, inbox)
            if ranks[0].result is None:
                raise RankFailure("rank 0 finished without a result", 0)
            return ranks[0].result
        if any(c not in (None, 0) for c in codes):
            first_failure = first_failure or now
            settled = all(c is not None for c in codes) or any(
                c is not None and c < 0 for c in codes
            )
            if settled or now - first_failure >= _GRACE_S:
                raise _diagnose(ranks, reason="failed")
        else:
            silent = [r for r in ranks if now - r.last_beat > beat_limit]
            if silent:
                names = ", ".join(str(r.rank) for r in silent)
                raise RankFailure(
                    f"rank {names} stopped responding (no heartbeat for {beat_limit:g} s: "
                    "stopped, frozen or out of memory?); stopped all ranks",
                    silent[0].rank,
                )
            if now - last_progress > timeout_s:
                raise _diagnose(ranks, reason="hung")
        time.sleep(0.05)


def _drain(ranks: list[_Rank], inbox: queue.Queue[tuple[int, dict[str, Any]]]) -> None:
    while True:
        try:
            rank, msg = inbox.get_nowait()
        except queue.Empty:
            return
        if msg.get("event") == "result":
            ranks[rank].result = msg.get("data") or {}
        elif msg.get("event") == "error":
            ranks[rank].error = msg


def _diagnose(ranks: list[_Rank], reason: str) -> RankFailure:
    """Name the rank that caused the failure, not the ones that noticed it."""
    n = len(ranks)

    def tail(r: _Rank) -> str:
        text = (r.error or {}).get("message") or r.stderr_tail()
        return f": {text}" if text else ""

    codes = {r.rank: r.proc.poll() for r in ranks}
    for r in ranks:
        code = codes[r.rank]
        if code is not None and code < 0:
            return RankFailure(
                f"rank {r.rank} {_describe_exit(code)}; stopped the other {n - 1} ranks", r.rank
            )
    for r in ranks:
        if r.error and r.error.get("kind") == "own":
            return RankFailure(
                f"rank {r.rank} failed{tail(r)}; stopped the other {n - 1} ranks", r.rank
            )
    for r in ranks:
        code = codes[r.rank]
        if code not in (None, 0, PEER_FAILURE_EXIT) and not r.error:
            return RankFailure(
                f"rank {r.rank} {_describe_exit(code or 0)}{tail(r)}; stopped "
                f"the other {n - 1} ranks",
                r.rank,
            )
    alive = [r for r in ranks if codes[r.rank] is None]
    if not alive and all((r.error or {}).get("kind") == "peer" for r in ranks):
        return RankFailure(
            "every rank timed out waiting for the others (a network hang or "
            f"deadlock?){tail(ranks[0])}",
            None,
        )
    if alive and reason == "failed":
        names = ", ".join(str(r.rank) for r in alive)
        return RankFailure(
            f"rank {names} hung: the other ranks timed out waiting for it; stopped all ranks",
            alive[0].rank,
        )
    if reason == "hung":
        low = min(r.progress for r in ranks)
        behind = [r for r in ranks if r.progress == low]
        if len(behind) < n:
            names = ", ".join(str(r.rank) for r in behind)
            return RankFailure(
                f"rank {names} made no progress within the timeout; stopped all ranks",
                behind[0].rank,
            )
        return RankFailure(
            "every rank is stuck in the same collective (a network hang or "
            "deadlock); no progress within the timeout; stopped all ranks",
            None,
        )
    first = next((r for r in ranks if codes[r.rank] not in (None, 0)), ranks[0])
    return RankFailure(
        f"rank {first.rank} {_describe_exit(codes[first.rank] or 0)}{tail(first)}", first.rank
    )


def _reap(ranks: list[_Rank]) -> None:
    """Kill every rank's process group and wait for it, whatever happened."""
    for r in ranks:
        if r.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(r.proc.pid, signal.SIGKILL)
    for r in ranks:
        try:
            r.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait(timeout=10)
        if r.proc.stdout is not None:
            r.proc.stdout.close()
        if r.reader is not None:
            r.reader.join(timeout=1)
