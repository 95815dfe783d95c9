"""Two network namespaces joined by one veth pair: a two-"node" network on one machine, with
``tc tbf`` shaping the link between them. Shared by the gradient-hook benchmark
(``benchmarks/comm_hooks.py``) and the bandwidth-starved trace scenario of the tests.

Needs root. The namespaces and the veth pair carry the creating process's id, use only
10.77.0.0/30 inside them, and are removed by :meth:`Testbed.close` (which :func:`testbed_guard`
calls on any exit: normal, exception, SIGINT/SIGTERM/SIGHUP, interpreter exit).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADDRESSES = ("10.77.0.1", "10.77.0.2")
PREFIX = 30


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=30)


def tbf_args(rate: str) -> list[str]:
    """``tc tbf`` for ``rate``. The bucket must hold a whole 64 KiB GSO segment of veth (smaller
    buckets drop every large segment) and about 10 ms of traffic (tc-tbf(8): burst >= rate/HZ)."""
    bits = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    number = next(rate[: -len(unit)] for unit in bits if rate.endswith(unit))
    rate_bytes = float(number) * bits[rate[len(number) :]] / 8
    burst = max(128 * 1024, int(rate_bytes * 0.010))
    return ["rate", rate, "burst", str(burst), "latency", "100ms"]


@dataclass
class Testbed:
    """Two namespaces joined by a veth pair; removed by :meth:`close`, which is idempotent."""

    tag: str = field(default_factory=lambda: str(os.getpid()))
    up: bool = False
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def namespaces(self) -> tuple[str, str]:
        return (f"gsbench-a-{self.tag}", f"gsbench-b-{self.tag}")

    @property
    def interfaces(self) -> tuple[str, str]:
        return (f"gsa{self.tag}"[:15], f"gsb{self.tag}"[:15])

    def open(self) -> None:
        self.up = True
        ns, ifs = self.namespaces, self.interfaces
        for name in ns:
            _sh("ip", "netns", "add", name)
        _sh("ip", "link", "add", ifs[0], "type", "veth", "peer", "name", ifs[1])
        for name, dev, addr in zip(ns, ifs, ADDRESSES, strict=True):
            _sh("ip", "link", "set", dev, "netns", name)
            _sh("ip", "-n", name, "addr", "add", f"{addr}/{PREFIX}", "dev", dev)
            _sh("ip", "-n", name, "link", "set", dev, "up")
            _sh("ip", "-n", name, "link", "set", "lo", "up")

    def shape(self, rate: str) -> None:
        for name, dev in zip(self.namespaces, self.interfaces, strict=True):
            _sh("tc", "-n", name, "qdisc", "del", "dev", dev, "root", check=False)
            if rate != "unthrottled":
                _sh("tc", "-n", name, "qdisc", "add", "dev", dev, "root", "tbf", *tbf_args(rate))

    def spawn(
        self, node: int, command: list[str], log: Path, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` inside node ``node``'s namespace, in a session of its own (so
        :meth:`reap` can stop its whole tree), with gloo bound to the node's veth end and stdout
        and stderr in ``log``."""
        dev = self.interfaces[node]
        full_env = {**os.environ, "GLOO_SOCKET_IFNAME": dev, "OMP_NUM_THREADS": "1", **(env or {})}
        with log.open("wb") as sink:
            child = subprocess.Popen(
                ["ip", "netns", "exec", self.namespaces[node], *command],
                env=full_env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kw,
            )
        self.children.append(child)
        return child

    def reap(self) -> None:
        """Stop every process this testbed started. torchrun forwards SIGTERM to its workers;
        workers that outlive it (each runs in its own session) are found by namespace
        (``ip netns pids``) and killed. Every wait is bounded; nothing here raises."""
        for child in self.children:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=10)
        self.children.clear()
        if self.up:
            for name in self.namespaces:
                with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                    pids = _sh("ip", "netns", "pids", name, check=False).stdout.split()
                    for pid in pids:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)

    def close(self) -> None:
        try:
            self.reap()
        finally:
            if self.up:
                for name in self.namespaces:
                    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                        _sh("ip", "netns", "del", name, check=False)  # takes its veth end along
                # A veth end that never left the root namespace (open() failed half-way).
                with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                    _sh("ip", "link", "del", self.interfaces[0], check=False)
                self.up = False


def why_not(testbed: Testbed, tools: tuple[str, ...] = ("ip", "tc")) -> str | None:
    """Why the testbed cannot run here (with ``tools`` on PATH), or None; on None it is open."""
    if os.name != "posix" or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root for network namespaces and tc"
    for tool in tools:
        if shutil.which(tool) is None:
            return f"'{tool}' not found"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "needs torch (pip install 'gpuscale[torch]')"
    try:
        testbed.open()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        testbed.close()
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"cannot create network namespaces ({' '.join(str(detail).split())})"
    # Creating namespaces can work where entering them (it remounts /sys) or shaping does not,
    # e.g. in a container without CAP_SYS_ADMIN or the sch_tbf module: probe both.
    try:
        _sh("ip", "netns", "exec", testbed.namespaces[0], "true")
        testbed.shape("1gbit")
        testbed.shape("unthrottled")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        testbed.close()
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"cannot run in or shape the namespaces ({' '.join(str(detail).split())})"
    return None


@contextmanager
def testbed_guard() -> Iterator[Testbed]:
    """The testbed, torn down on any exit: normal, exception, signal or interpreter exit."""
    bed = Testbed()
    atexit.register(bed.close)
    previous = {}

    def on_signal(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, on_signal)
    try:
        yield bed
    finally:
        bed.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
