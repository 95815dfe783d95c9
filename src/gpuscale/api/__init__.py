"""The public Python API: one function per question a user asks, each returning a typed result.

Conventions every entry point follows (the CLI, the HTML report and the web page are shells over
these functions, never the other way round):

- Plain keyword arguments named like the CLI's long flags (``gpus``, ``gpus_per_node``, ``tp``,
  ``mbs``, ``gbs``, ``seq``, ``recompute``, ``zero``, ``framework``, ...) with the CLI's
  defaults; the model comes first, as a catalog id, a ``config.json`` path or a spec object.
- Each returns a frozen dataclass implementing :class:`gpuscale.api.result.Result`:
  ``to_dict()`` is exactly the matching command's ``--json`` document, ``figures()`` the plots.
- Bad input raises :class:`gpuscale.errors.InputError` with ``field`` set to the argument at
  fault; the CLI prints the matching flag.
"""

from __future__ import annotations

from gpuscale.api.advise import AdviseCommResult, advise_comm
from gpuscale.api.calibrate_run import calibrate_run as calibrate_run
from gpuscale.api.catalog import CatalogListing, catalog_listing
from gpuscale.api.cluster import (
    ClusterSimulation,
    cluster_adapt,
    cluster_export,
    cluster_simulate,
    cluster_trace,
)
from gpuscale.api.export import export_plan as export_plan
from gpuscale.api.fitting import FitResult, fit
from gpuscale.api.measure import (
    analyze_trace,
    bench_collectives,
    bench_matmul,
    calibrate,
    doctor,
    import_nccl_tests,
)
from gpuscale.api.page import model_from_config_text as model_from_config_text
from gpuscale.api.planning import OBJECTIVES, PlanResult, ScaleResult, plan, scale
from gpuscale.api.result import Result
from gpuscale.api.serving import ServingResult, infer
from gpuscale.api.serving_static import StaticServingResult, infer_static
from gpuscale.api.serving_sweep import LoadSweepResult, infer_sweep
from gpuscale.api.training import EstimateResult, TrainingRun, estimate, profile_names
from gpuscale.errors import InputError

__all__ = [
    "OBJECTIVES",
    "AdviseCommResult",
    "CatalogListing",
    "ClusterSimulation",
    "EstimateResult",
    "FitResult",
    "InputError",
    "LoadSweepResult",
    "PlanResult",
    "Result",
    "ScaleResult",
    "ServingResult",
    "StaticServingResult",
    "TrainingRun",
    "advise_comm",
    "analyze_trace",
    "bench_collectives",
    "bench_matmul",
    "calibrate",
    "calibrate_run",
    "catalog_listing",
    "cluster_adapt",
    "cluster_export",
    "cluster_simulate",
    "cluster_trace",
    "doctor",
    "estimate",
    "export_plan",
    "fit",
    "import_nccl_tests",
    "infer",
    "infer_static",
    "infer_sweep",
    "plan",
    "profile_names",
    "scale",
]
