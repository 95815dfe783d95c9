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

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from gpuscale.errors import InputError

if TYPE_CHECKING:
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
    from gpuscale.api.serving_search import SearchResult, infer_search
    from gpuscale.api.serving_static import StaticServingResult, infer_static
    from gpuscale.api.serving_sweep import LoadSweepResult, infer_sweep
    from gpuscale.api.training import EstimateResult, TrainingRun, estimate, profile_names

_LAZY: dict[str, str] = {
    **dict.fromkeys(["AdviseCommResult", "advise_comm"], "advise"),
    **dict.fromkeys(["CatalogListing", "catalog_listing"], "catalog"),
    **dict.fromkeys(
        [
            "ClusterSimulation",
            "cluster_adapt",
            "cluster_export",
            "cluster_simulate",
            "cluster_trace",
        ],
        "cluster",
    ),
    "calibrate_run": "calibrate_run",
    "export_plan": "export",
    **dict.fromkeys(["FitResult", "fit"], "fitting"),
    **dict.fromkeys(
        [
            "analyze_trace",
            "bench_collectives",
            "bench_matmul",
            "calibrate",
            "doctor",
            "import_nccl_tests",
        ],
        "measure",
    ),
    "model_from_config_text": "page",
    **dict.fromkeys(["OBJECTIVES", "PlanResult", "ScaleResult", "plan", "scale"], "planning"),
    "Result": "result",
    **dict.fromkeys(["ServingResult", "infer"], "serving"),
    **dict.fromkeys(["SearchResult", "infer_search"], "serving_search"),
    **dict.fromkeys(["StaticServingResult", "infer_static"], "serving_static"),
    **dict.fromkeys(["LoadSweepResult", "infer_sweep"], "serving_sweep"),
    **dict.fromkeys(["EstimateResult", "TrainingRun", "estimate", "profile_names"], "training"),
}
"""Each exported name and the submodule defining it, imported on first use (PEP 562) so that a
command pays only for the answers it gives: ``gpuscale catalog`` never loads the planner."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


class _Package(types.ModuleType):
    """This package, except that importing a submodule never rebinds an exported name.

    ``calibrate_run`` is both a submodule and the function it defines; the import system sets
    each submodule as an attribute of its package once loaded, which would hide the function
    once anything imported ``gpuscale.api.calibrate_run``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _LAZY:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
    "SearchResult",
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
    "infer_search",
    "infer_static",
    "infer_sweep",
    "plan",
    "profile_names",
    "scale",
]
