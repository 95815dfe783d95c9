"""What each profiler event is: device compute, communication, data loading, optimizer, a step.

Names follow what PyTorch and Kineto emit (checked against torch 2.x traces):

- ``ProfilerStep#N``: one training step, emitted by ``torch.profiler.profile.step()``.
- ``enumerate(DataLoader)#...`` / ``DataLoader...``: fetching the next batch.
- ``Optimizer.step#SGD.step``: the optimizer update (``Optimizer.zero_grad`` is not the update).
- Communication on the host: ``c10d::allreduce_`` (the dispatcher op), ``record_param_comms``
  (NCCL ops with message metadata), ``gloo:all_reduce`` (gloo's worker thread, the actual
  transfer on CPU), ``nccl:all_reduce`` (ProcessGroupNCCL's host span).
- On the GPU: category ``kernel``; NCCL kernels match ``^nccl.*Kernel`` (HTA's ``is_comm_kernel``
  rule), ``gpu_memcpy``/``gpu_memset`` are device work that is not a kernel.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Kind(enum.Enum):
    STEP = "step"
    DATA = "data"
    OPTIMIZER = "optimizer"
    HOST_COMM = "host_comm"
    HOST_OP = "host_op"
    DEVICE_COMM = "device_comm"
    DEVICE_OP = "device_op"
    IGNORED = "ignored"


STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_NCCL_KERNEL_RE = re.compile(r"^nccl.*Kernel")
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"})
_HOST_CATS = frozenset({"cpu_op", "user_annotation", "operator", "python_function"})
_HOST_COMM_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms", "ProcessGroup")


def classify(name: str, cat: str) -> Kind:
    """The kind of one complete event, from its name and category alone."""
    if cat in _DEVICE_CATS:
        return Kind.DEVICE_COMM if _NCCL_KERNEL_RE.match(name) else Kind.DEVICE_OP
    if cat not in _HOST_CATS:
        return Kind.IGNORED
    if name.startswith("ProfilerStep#"):
        return Kind.STEP
    if name.startswith(("enumerate(DataLoader)", "DataLoader")):
        return Kind.DATA
    if name.startswith("Optimizer.step"):
        return Kind.OPTIMIZER
    if name.startswith(_HOST_COMM_PREFIXES):
        return Kind.HOST_COMM
    if cat == "python_function":
        # Python frames (with_stack=True) wrap everything; they are call stacks, not work.
        return Kind.IGNORED
    return Kind.HOST_OP


# Canonical collective names, keyed by the name with case and underscores removed. Sources:
# c10d op names (torch/csrc/distributed/c10d/Ops.cpp), gloo/nccl record_function names in
# ProcessGroupGloo.cpp / ProcessGroupNCCL.cpp, NCCL kernel names (ncclDevKernel_<Coll>_...).
_COLLECTIVES = {
    "allreduce": "all_reduce",
    "allreducecoalesced": "all_reduce",
    "allgather": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgatherintobase": "all_gather",
    "allgatherbase": "all_gather",
    "allgathercoalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensorbase": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "send": "send",
    "recv": "recv",
    "sendrecv": "send_recv",
    "barrier": "barrier",
    "gather": "gather",
    "scatter": "scatter",
}


def collective_name(name: str, args: Mapping[str, Any] | None = None) -> str | None:
    """``all_reduce``, ``all_gather``, ... for a communication event; None if not recognised."""
    if args and isinstance(args.get("Collective name"), str):
        key = args["Collective name"]
    elif name.startswith("nccl") and "Kernel_" in name:
        # ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclKernel_AllGather_RING_LL_Sum_int8_t
        key = name.split("Kernel_", 1)[1].split("_", 1)[0].split("(", 1)[0]
    else:
        key = re.split(r"::|:", name, maxsplit=1)[-1]
    return _COLLECTIVES.get(key.lower().replace("_", "").rstrip("_"))


# Bytes per element, keyed by the spellings in "Input type" (c10 scalar type names) and in the
# NCCL "dtype" arg (c10::ScalarType names).
_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "c10::half": 2,
    "half": 2,
    "float16": 2,
    "c10::bfloat16": 2,
    "bfloat16": 2,
    "long int": 8,
    "long": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short int": 2,
    "int16": 2,
    "signed char": 1,
    "int8": 1,
    "unsigned char": 1,
    "uint8": 1,
    "bool": 1,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "char": 1,
    "byte": 1,
}


def _numel(dims: Any) -> int | None:
    """Elements in a shape ``[a, b]`` or, summed, in a list of shapes ``[[a], [b, c]]``."""
    if isinstance(dims, list) and all(isinstance(d, (int, float)) for d in dims):
        return int(math.prod(int(d) for d in dims)) if dims else None
    if isinstance(dims, list):
        parts = [_numel(d) for d in dims]
        known = [p for p in parts if p is not None]
        return sum(known) if known else None
    return None


def message_bytes(args: Mapping[str, Any] | None) -> int | None:
    """Payload of a collective in bytes, from Kineto's NCCL metadata (``In msg nelems`` and
    ``dtype``) or the recorded input shape (``Input Dims`` and ``Input type``)."""
    if not args:
        return None
    nelems = args.get("In msg nelems")
    dtype = args.get("dtype")
    if isinstance(nelems, (int, float)) and isinstance(dtype, str):
        size = _DTYPE_BYTES.get(dtype.lower())
        if size is not None:
            return int(nelems) * size
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if isinstance(dims, list) and dims and isinstance(types, list) and types:
        numel = _numel(dims[0])
        first_type = types[0] if isinstance(types[0], str) else ""
        size = _DTYPE_BYTES.get(first_type.lower())
        if numel is not None and size is not None:
            return numel * size
    return None


@dataclass(frozen=True, slots=True)
class CommSource:
    """Where collective durations were taken from, best first: the GPU kernel is the transfer;
    gloo's worker-thread span is the transfer on CPU; a host dispatcher op is only the call."""

    rank: int
    label: str


DEVICE_KERNEL = CommSource(0, "NCCL kernels")
BACKEND_SPAN = CommSource(1, "backend spans (gloo:/nccl:)")
HOST_CALL = CommSource(2, "host calls (c10d::)")


def comm_source(kind: Kind, name: str) -> CommSource | None:
    if kind is Kind.DEVICE_COMM:
        return DEVICE_KERNEL
    if kind is not Kind.HOST_COMM:
        return None
    if name.startswith(("gloo:", "nccl:")):
        return BACKEND_SPAN
    return HOST_CALL
