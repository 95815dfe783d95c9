"""Plain typed data the cost model reads: model, hardware, plan, training job."""

from gpuscale.specs.hardware import Cluster, Device, Link
from gpuscale.specs.job import JobOptions
from gpuscale.specs.model import ModelSpec
from gpuscale.specs.plan import Plan, PlanBatch
from gpuscale.specs.training import Inference, Training

__all__ = [
    "Cluster",
    "Device",
    "Inference",
    "JobOptions",
    "Link",
    "ModelSpec",
    "Plan",
    "PlanBatch",
    "Training",
]
