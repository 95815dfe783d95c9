"""Time the GPU waits for activation copies to and from host memory when the first layers'
saved activations are offloaded (``Training.activation_offload_layers``).

Transformer Engine's CPU offload (``transformer_engine/pytorch/cpu_offload.py``, as Megatron-Core
``--cpu-offloading-num-layers`` drives it; ``OffloadSynchronizer._default_offload_sync_init``)
copies layer ``i``'s saved tensors to pinned host memory on one side stream, starting when the
forward of layer ``i + 1`` starts, and the forward of layer ``L - N + i`` waits for that copy;
in backward the reload of layer ``i`` starts at the backward of layer ``L - 1 - N + i`` and the
backward of layer ``i`` waits for it. With one layer's copy taking ``c`` and its compute ``t``,
the copies queue on the stream and each hides behind at most ``L - N - 1`` layers, so the GPU
waits ``max(0, N c - (L - 2) t, N (c - (L - N - 1) t))`` each way (an event simulation of the
schedule gives the same to rounding, ``tests/unit/test_activation_offload_layers.py``).
"""

from __future__ import annotations

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.activations import layers_on_stage, saved_layer_bytes
from gpuscale.costmodel.compute import LayerCompute
from gpuscale.costmodel.memory import framework_allocation
from gpuscale.costmodel.profile import Profile
from gpuscale.specs import Device, ModelSpec, PlanBatch, Training


def host_link_bytes_per_s(device: Device, profile: Profile) -> float:
    """One GPU's link to host memory, per direction (its PCIe slot, NVLink-C2C on Grace
    superchips), with the profile's calibration of that link: a measured ``host`` entry, else
    the link's id, else its kind (NVLink-C2C is an NVLink, not a PCIe slot)."""
    link = catalog.link(device.host_link or device.pcie)
    return profile.link("host", link.kind, link.id).bandwidth(link.bandwidth_gb_per_s) * 1e9


def offload_wait_s(
    model: ModelSpec,
    device: Device,
    training: Training,
    plans: PlanBatch,
    profile: Profile,
    lc: LayerCompute,
) -> np.ndarray:
    """Seconds per micro-batch the GPU waits for the offloaded layers' copies: out in forward,
    back in backward, each beyond the other layers' compute it overlaps."""
    n = float(training.activation_offload_layers)
    if n == 0:
        return np.zeros(len(plans))
    # The bytes copied are the bytes the memory model keeps (TE's low-precision inputs too).
    saved = saved_layer_bytes(model, framework_allocation(training, profile), plans)
    copy_s = saved / host_link_bytes_per_s(device, profile)
    layers = layers_on_stage(model, plans).astype(float)

    def wait(compute_s: np.ndarray) -> np.ndarray:
        queued = n * copy_s - (layers - 2.0) * compute_s
        behind_few = n * (copy_s - (layers - n - 1.0) * compute_s)
        return np.maximum(np.maximum(queued, behind_few), 0.0)

    return wait(lc.layer_forward_s) + wait(lc.layer_backward_s)
