"""One benchmark rank: ``python -m gpuscale.measure.worker SPEC.json``.

Started by :mod:`gpuscale.measure.launcher` with ``RANK``/``WORLD_SIZE`` in the environment.
Messages to the parent are single lines ``@gpuscale {json}`` on the original stdout, written
under a lock so that the heartbeat thread never splits a result; anything libraries print goes
to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any, TextIO

from gpuscale.measure.launcher import HEARTBEAT_S, MESSAGE_PREFIX, PEER_FAILURE_EXIT

# Substrings of the errors torch.distributed raises when *another* rank went away or timed out
# (gloo: "Connection closed by peer", "Timed out waiting"; NCCL: "remote process exited",
# watchdog timeouts). The launcher blames the rank that caused them, not this one.
_PEER_SIGNS = (
    "connection closed",
    "connection reset",
    "timed out",
    "timeout",
    "broken pipe",
    "peer",
    "remote process",
    "socket",
    "connection refused",
    "closed by",
)


class Channel:
    """Thread-safe line writer to the parent."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, event: str, **body: Any) -> None:
        line = MESSAGE_PREFIX + json.dumps({"event": event, **body}) + "\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


def _heartbeat(channel: Channel, parent: int) -> None:
    while True:
        time.sleep(HEARTBEAT_S)
        if parent and os.getppid() != parent:
            # the launcher died without reaping us: never outlive it
            os._exit(PEER_FAILURE_EXIT)
        channel.send("beat")


def _is_peer_failure(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "distbackenderror" in text or any(sign in text for sign in _PEER_SIGNS)


def main(argv: list[str]) -> int:
    channel = Channel(sys.stdout)
    sys.stdout = sys.stderr
    parent = int(os.environ.get("GPUSCALE_PARENT_PID", "0"))
    threading.Thread(target=_heartbeat, args=(channel, parent), daemon=True).start()
    with open(argv[0]) as fh:
        spec = json.load(fh)
    rank = int(os.environ["RANK"])
    try:
        if spec["kind"] == "collectives":
            from gpuscale.measure.collectives_bench import CollectiveConfig, run_rank

            run = run_rank(CollectiveConfig.from_dict(spec), channel=channel)
            if run is not None:
                channel.send("result", data=run.to_dict())
        else:
            raise ValueError(f"unknown benchmark kind {spec['kind']!r}")
    except Exception as exc:
        peer = _is_peer_failure(exc)
        channel.send(
            "error",
            kind="peer" if peer else "own",
            rank=rank,
            message=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300],
        )
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(PEER_FAILURE_EXIT if peer else 1)
    sys.stderr.flush()
    # skip interpreter teardown: torch's process-group destructors can block on dead peers
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
