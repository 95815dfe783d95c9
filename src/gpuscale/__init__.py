"""gpuscale: one GPU, one node, or a cluster? A validated cost model for large-model training.

The answers are functions of :mod:`gpuscale.api`, re-exported here and loaded on first use (so
that ``import gpuscale`` stays cheap)::

    import gpuscale
    gpuscale.estimate("llama3.1-70b", gpu="h100-sxm", gpus=64, tp=8, pp=2, gbs=256).to_dict()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Version of every machine-readable document gpuscale writes (``--json`` output, profiles).
SCHEMA_VERSION = 1

_API = frozenset(
    {
        "InputError",
        "Result",
        "TrainingRun",
        "fit",
        "estimate",
        "plan",
        "scale",
        "advise_comm",
        "infer",
        "infer_search",
        "infer_static",
        "infer_sweep",
        "catalog_listing",
        "calibrate",
        "import_nccl_tests",
        "analyze_trace",
        "calibrate_run",
        "cluster_simulate",
        "cluster_trace",
        "cluster_export",
        "cluster_adapt",
        "export_plan",
    }
)
"""Names of :mod:`gpuscale.api` reachable as ``gpuscale.<name>`` (the issue-12 entry points)."""

if TYPE_CHECKING:
    from gpuscale.api import InputError, Result, advise_comm, estimate, fit, plan, scale


def __getattr__(name: str) -> Any:
    if name in _API:
        from gpuscale import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpuscale' has no attribute {name!r}")


__all__ = [
    "SCHEMA_VERSION",
    "InputError",
    "Result",
    "__version__",
    "advise_comm",
    "estimate",
    "fit",
    "plan",
    "scale",
]
