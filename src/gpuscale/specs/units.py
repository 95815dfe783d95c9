"""Unit constants every layer shares (one definition each)."""

from __future__ import annotations

GIB = float(2**30)
"""Bytes in a GiB: memory is reported in GiB, as ``torch.cuda.memory_allocated()`` / 2**30 and
``nvidia-smi`` (MiB) count it."""
