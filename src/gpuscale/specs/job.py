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
        # Named by the API's arguments (gpuscale.api.estimate), so the CLI shows the flag.
        require(
            self.storage_gb_per_s_per_node >= 0,
            f"--storage-gbps must be >= 0 (0: data is local), got {self.storage_gb_per_s_per_node}",
            field="storage_gbps",
        )
        require(self.bytes_per_token > 0, "bytes per token must be > 0")
        require(
            self.checkpoint_every_steps >= 0,
            f"--checkpoint-every must be >= 0 (0: never), got {self.checkpoint_every_steps}",
            field="checkpoint_every",
        )
        require(
            self.checkpoint_write_gb_per_s > 0,
            f"--checkpoint-gbps must be > 0, got {self.checkpoint_write_gb_per_s}",
            field="checkpoint_gbps",
        )
