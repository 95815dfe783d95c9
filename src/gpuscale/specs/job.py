"""The parts of a training job outside one step's math: data pipeline and checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.errors import require


@dataclass(frozen=True, kw_only=True, slots=True)
class JobOptions:
    """Amdahl terms users forget. Defaults describe a job whose input pipeline keeps up and
    which does not checkpoint (both terms then cost nothing)."""

    storage_gb_per_s_per_node: float = 0.0
    """Read bandwidth from the dataset store into one node, GB/s; 0 = data is local/prefetched."""
    bytes_per_token: float = 4.0
    """Stored size of one training token (uint32 token ids in packed datasets)."""
    checkpoint_every_steps: int = 0
    """Save a checkpoint every this many steps; 0 = never."""
    checkpoint_write_gb_per_s: float = 10.0
    """Aggregate write bandwidth of the checkpoint store, GB/s."""

    def __post_init__(self) -> None:
        require(self.storage_gb_per_s_per_node >= 0, "storage bandwidth must be >= 0")
        require(self.bytes_per_token > 0, "bytes per token must be > 0")
        require(self.checkpoint_every_steps >= 0, "checkpoint interval must be >= 0")
        require(self.checkpoint_write_gb_per_s > 0, "checkpoint write bandwidth must be > 0")
