"""What is being run: sequence length, precision, optimizer and fine-tuning method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscale.errors import require

TrainPrecision = Literal["fp32", "bf16", "fp16", "fp8"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8")


@dataclass(frozen=True, kw_only=True, slots=True)
class Training:
    """The training job apart from its parallel plan."""

    seq_len: int = 4096
    """Tokens per sequence."""
    precision: TrainPrecision = "bf16"
    """Compute precision of the matmuls: ``fp8`` speeds up the linear layers only (attention and
    the rest stay in BF16, as in Transformer Engine recipes)."""
    flash_attention: bool = True
    """Fused attention that never materialises the ``s x s`` score matrix."""

    def __post_init__(self) -> None:
        require(isinstance(self.seq_len, int) and self.seq_len >= 1,
                f"--seq must be a positive integer, got {self.seq_len!r}")
        require(self.precision in PRECISIONS,
                f"--precision must be one of {', '.join(PRECISIONS)}, got '{self.precision}'")
