"""Time the GPU waits for activation copies to and from host memory when the first layers'
saved activations are offloaded (``Training.activation_offload_layers``).

Transformer Engine's CPU offload (``transformer_engine/pytorch/cpu_offload.py``, as Megatron-Core
``--cpu-offloading-num-layers`` drives it) copies layer ``i``'s saved tensors to pinned host
memory on a side stream after its forward, and must finish before the forward of layer
``layers - N + i``; in backward it starts reloading layer ``i`` at the backward of layer
``layers - 1 - N + i`` (``OffloadSynchronizer._default_offload_sync_init``). The copies of the N
layers share one stream, so they overlap the forward (and the reloads the backward) of the
other ``layers - 1`` layers; the GPU waits only for what the host link cannot move in that time.
"""

from __future__ import annotations

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.activations import layers_on_stage, saved_layer_bytes
from gpuscale.costmodel.compute import LayerCompute
from gpuscale.costmodel.profile import Profile
from gpuscale.specs import Device, ModelSpec, PlanBatch, Training


def host_link_bytes_per_s(device: Device, profile: Profile) -> float:
    """One GPU's link to host memory, per direction (its PCIe slot, NVLink-C2C on Grace
    superchips), with the profile's calibration of that link."""
    link = catalog.link(device.host_link or device.pcie)
    return profile.link("pcie", link.kind, link.id).bandwidth(link.bandwidth_gb_per_s) * 1e9


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
    n = training.activation_offload_layers
    if n == 0:
        return np.zeros(len(plans))
    copy_s = n * saved_layer_bytes(model, training, plans) / host_link_bytes_per_s(device, profile)
    window = np.maximum(layers_on_stage(model, plans).astype(float) - 1.0, 0.0)
    out = np.maximum(copy_s - window * lc.layer_forward_s, 0.0)
    back = np.maximum(copy_s - window * lc.layer_backward_s, 0.0)
    return out + back
