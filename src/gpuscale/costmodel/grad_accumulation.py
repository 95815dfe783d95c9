"""Gradient accumulation of FSDP2 under pipeline parallelism: one HBM pass over the stage's
unsharded gradients per micro-batch.

When the pipeline schedule turns FSDP2's gradient sync off for every micro-batch but the last
(torch/distributed/pipelining/stage.py, ``backward_maybe_with_nosync``, FSDPModule branch:
``set_requires_gradient_sync(False)``, ``set_reshard_after_backward(False)``; torch 2.5-2.6),
each parameter group's ``post_backward`` keeps the unsharded gradient instead of
reduce-scattering it (torch/distributed/_composable/fsdp/_fsdp_param_group.py,
``post_backward``; _fsdp_param.py, torch 2.4-2.6):

- after the first micro-batch, ``to_accumulated_grad_if_needed`` casts the gradient autograd
  wrote in the parameter dtype to the reduce dtype (``unsharded_grad.to(reduce_dtype)``): read
  the 16-bit gradient, write the fp32 accumulator;
- after each later micro-batch (the last included, before its reduce-scatter),
  ``accumulate_unsharded_grad_if_needed`` adds the new gradient to it
  (``unsharded_accumulated_grad += unsharded_param.grad``): read both, write the accumulator.

With the reduce dtype equal to the parameter dtype FSDP2 keeps no accumulator and autograd
accumulates in place into ``param.grad`` from the second micro-batch on (``AccumulateGrad``:
read both, write one). These passes run in the backward hooks on the compute stream, so every
stage pays them in every micro-batch slot. The regime is the one of
``fsdp_gather_once_under_pp`` (communication.py); ``fsdp_unsharded_grad_accumulation`` says
whether the framework accumulates this way.
"""

from __future__ import annotations

import numpy as np

from gpuscale.costmodel.communication import params_per_gpu, trainable_fraction
from gpuscale.costmodel.model_states import grad_reduce_bytes
from gpuscale.costmodel.profile import Profile
from gpuscale.specs import Device, ModelSpec, PlanBatch, Training


def accumulation_bytes_per_param(
    num_microbatches: np.ndarray, grad_bytes: float, reduce_bytes: float
) -> np.ndarray:
    """HBM bytes per parameter over one step's ``m`` micro-batches (module docstring): a cast
    after the first and an accumulation after each later one when the dtypes differ, else
    autograd's in-place accumulation from the second on."""
    m = np.asarray(num_microbatches, dtype=float)
    later = np.maximum(m - 1.0, 0.0)
    if reduce_bytes != grad_bytes:
        cast = grad_bytes + reduce_bytes
        add = grad_bytes + 2.0 * reduce_bytes
        return np.where(m > 1, cast + later * add, 0.0)
    return later * 3.0 * grad_bytes


def fsdp_accumulation_s(
    model: ModelSpec, device: Device, training: Training, plans: PlanBatch, profile: Profile
) -> np.ndarray:
    """Seconds per micro-batch (the step's passes spread over its ``m`` micro-batches) on the
    busiest stage; zero outside the regime (ZeRO-3 with pp > 1 under a framework that gathers
    once and accumulates unsharded gradients) or with one micro-batch."""
    n = len(plans)
    on = (
        profile.const("fsdp_unsharded_grad_accumulation") > 0
        and profile.const("fsdp_gather_once_under_pp") > 0
    )
    if not on:
        return np.zeros(n)
    regime = (plans.zero == 3) & (plans.pp > 1) & (plans.num_microbatches > 1)
    if not bool(np.any(regime)):
        return np.zeros(n)
    # Autograd writes the gradient in the parameter dtype (bf16 under FSDP2's
    # MixedPrecisionPolicy, fp32 in fp32 training); it is reduced in ``grad_reduce_bytes``.
    grad_bytes = 4.0 if training.precision == "fp32" else 2.0
    reduce_bytes = max(grad_reduce_bytes(training, profile), grad_bytes)
    m = plans.num_microbatches.astype(float)
    per_param = accumulation_bytes_per_param(m, grad_bytes, reduce_bytes)
    # The stage's parameters after TP/EP, before FSDP sharding: the gradients stay unsharded.
    params = params_per_gpu(model, plans) * trainable_fraction(model, training)
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    return np.where(regime, params * per_param / np.maximum(m, 1.0) / hbm, 0.0)
