"""One default node for every command: the GPU's NVLink domain (catalog.default_gpus_per_node).

On a GB200/GB300 NVL72 rack 72 GPUs share one NVLink domain at 1.8 TB/s each (NVIDIA GB200 NVL72
datasheet), so a TP16 or EP32 group of infer, a serving search, advise-comm's data-parallel group
or fit's smallest set-up is priced on NVLink unless --gpus-per-node says otherwise."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import api, catalog
from gpuscale.api import cluster, serving, serving_search, serving_static
from gpuscale.errors import InputError
from gpuscale.export.job import job_from_document

TAKERS = [
    api.estimate,
    api.plan,
    api.scale,
    api.fit,
    api.advise_comm,
    serving.infer,
    serving_static.infer_static,
    serving_search.search,
    cluster.cluster_adapt,
]


@pytest.mark.parametrize("func", TAKERS, ids=lambda f: f.__name__)
def test_no_api_function_hard_codes_a_node_size(func: Callable[..., Any]) -> None:
    # None: the catalog's rule decides, so no function can keep its own 8.
    assert inspect.signature(func).parameters["gpus_per_node"].default is None


def test_the_default_node_is_the_nvlink_domain_and_within_the_node_bound() -> None:
    for gpu_id, device in catalog.gpus().items():
        default = catalog.default_gpus_per_node(gpu_id)
        assert default == device.nvlink_domain_gpus
        assert catalog.cluster(gpu_id, 2 * default).gpus_per_node == default
        catalog.check_node(device, default)  # the default is never refused
    assert catalog.default_gpus_per_node("gb200") == catalog.default_gpus_per_node("gb300") == 72
    assert catalog.default_gpus_per_node("h100-sxm") == 8
    assert catalog.default_gpus_per_node("h200-nvl") == 4  # 4-card NVLink bridge
    with pytest.raises(InputError, match="holds at most 72 GPUs"):
        catalog.check_node(catalog.gpu("gb200"), 73)
    assert catalog.node_size("gb200", None) == 72
    assert catalog.node_size("gb200", 8) == 8


def _infer(**kw: Any) -> tuple[float, float]:
    r = serving.infer(
        "llama3.1-405b",
        gpu="gb200",
        tp=16,
        concurrency=32,
        input_len=1024,
        output_len=512,
        **kw,
    )
    row = r.prediction.row()
    return row["ttft_ms"], row["tpot_ms"]


def test_infer_on_gb200_prices_tp16_on_nvlink_not_the_nic() -> None:
    default = _infer()
    assert default == _infer(gpus_per_node=72)
    # Inside the domain no byte crosses the NIC: the fabric between nodes changes nothing.
    assert default == _infer(inter="roce-100")
    # Eight a node, TP16 spans two nodes and its all-reduces ride the fabric.
    eight = _infer(gpus_per_node=8)
    assert default[0] < eight[0] and default[1] < 0.8 * eight[1]
    assert _infer(gpus_per_node=8, inter="roce-100")[1] > eight[1]


def test_infer_disaggregated_on_gb200_keeps_both_pools_in_the_domain() -> None:
    def tpot(**kw: Any) -> float:
        r = serving.infer(
            "llama3.1-405b",
            gpu="gb200",
            prefill_workers=1,
            prefill_tp=16,
            decode_workers=1,
            decode_tp=16,
            concurrency=16,
            input_len=1024,
            output_len=256,
            **kw,
        )
        return float(r.prediction.row()["tpot_ms"])

    assert tpot() == tpot(gpus_per_node=72) < tpot(gpus_per_node=8)


def test_static_infer_table_on_gb200_keeps_tp16_in_the_domain() -> None:
    def at16(**kw: Any) -> float:
        r = serving_static.infer_static("llama3.1-70b", gpu="gb200", tp="8,16", **kw)
        row = next(o for o in r.to_dict()["options"] if o["tp"] == 16)
        return float(row["tpot_ms"])

    assert at16() == at16(gpus_per_node=72) < at16(gpus_per_node=8)


def test_serving_search_on_72_gb200_places_tp_ep_groups_of_16_and_more_in_the_domain() -> None:
    def groups(**kw: Any) -> dict[str, float]:
        r = serving_search.search(
            "qwen3-235b-a22b",
            gpu="gb200",
            gpus=72,
            slo_ttft_ms=2000,
            slo_tpot_ms=50,
            disaggregated=False,
            resolved_places=3,
            **kw,
        )
        return {
            s.cand.label: s.goodput_tokens_per_s / s.cand.gpus
            for s in r.ranked
            if s.cand.par is not None and s.cand.par.tp >= 16
        }

    default, eight = groups(), groups(gpus_per_node=8)
    assert default == groups(gpus_per_node=72)
    wide = "4 x TP16-EP16-DP-attn16"
    assert wide in default and default[wide] > eight.get(wide, 0.0)
    # No pipeline stage is needed to reach 16+ GPUs inside one rack.
    assert all("PP" not in label for label in default)


def test_advise_comm_on_gb200_groups_by_the_nvlink_domain() -> None:
    doc = api.advise_comm("llama3.1-8b", gpu="gb200", gpus=64).to_dict()
    assert (doc["gpus_per_node"], doc["nodes"]) == (72, 1)
    eight = api.advise_comm("llama3.1-8b", gpu="gb200", gpus=64, gpus_per_node=8).to_dict()
    assert (eight["gpus_per_node"], eight["nodes"]) == (8, 8)
    assert doc["step_time_s"] < eight["step_time_s"]
    assert api.advise_comm("llama3.1-8b", gpu="h100-sxm", gpus=64).to_dict()["nodes"] == 8


def test_fit_searches_smallest_set_ups_on_the_domain() -> None:
    assert api.fit("llama3.1-405b", gpu="gb200").gpus_per_node == 72
    assert api.fit("llama3.1-405b", gpu="h100-sxm").gpus_per_node == 8
    assert api.fit("llama3.1-8b", gpu="gb200", mode="infer").gpus_per_node == 72


def test_an_exported_document_without_a_node_size_gets_the_domain() -> None:
    doc = {
        "model": "llama3.1-8b",
        "gpu": "gb200",
        "seq": 4096,
        "plan": {"tp": 16, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8},
    }
    assert job_from_document(doc).gpus_per_node == 72


def test_planner_hardware_and_fit_search_resolve_the_same_default() -> None:
    from gpuscale.costmodel.profile import load_profile_for
    from gpuscale.planner.fit import smallest_inference_setups
    from gpuscale.planner.search import Hardware
    from gpuscale.specs.training import Inference

    assert Hardware(gpu="gb200").gpus_per_node == 72
    assert Hardware(gpu="h100-sxm").gpus_per_node == 8
    assert Hardware(gpu="gb200", gpus_per_node=8).gpus_per_node == 8
    with pytest.raises(InputError, match="positive integer, got 0"):
        Hardware(gpu="gb200", gpus_per_node=0)
    spec, device = catalog.model("llama3.1-405b"), catalog.gpu("gb200")
    args = (spec, Inference(batch=64, context_len=32768), device, load_profile_for("generic"))
    assert smallest_inference_setups(*args) == smallest_inference_setups(*args, gpus_per_node=72)
