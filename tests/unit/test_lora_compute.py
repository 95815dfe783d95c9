"""LoRA adapters cost memory traffic the frozen base GEMMs do not: more targets cost more, and
the share is larger on a GPU with more FLOPs per byte of HBM (H100 against A100)."""

from __future__ import annotations

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.lora_compute import lora_adapter_s
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import Plan, PlanBatch, Training

MODEL = catalog.model("llama3.1-8b")
PLANS = PlanBatch.from_plans([Plan(micro_batch=4, global_batch=4)])
TOKENS = np.asarray([4 * 2048.0])


def _adapters(gpu: str, **training: object) -> float:
    tr = Training(seq_len=2048, finetune="lora", **training)  # type: ignore[arg-type]
    fwd, bwd = lora_adapter_s(MODEL, catalog.gpu(gpu), tr, PLANS, load_profile("generic"), TOKENS)
    return float(fwd[0] + bwd[0])


def test_full_fine_tuning_has_no_adapters() -> None:
    fwd, bwd = lora_adapter_s(
        MODEL,
        catalog.gpu("h100-sxm"),
        Training(seq_len=2048),
        PLANS,
        load_profile("generic"),
        TOKENS,
    )
    assert float(fwd[0]) == 0.0 and float(bwd[0]) == 0.0


def test_more_targets_cost_more() -> None:
    assert _adapters("h100-sxm", lora_targets=("q", "v")) < _adapters("h100-sxm")


def test_adapter_share_of_the_layer_is_larger_where_flops_outpace_bandwidth() -> None:
    def share(gpu: str) -> float:
        tr = Training(seq_len=2048, finetune="lora")
        lc = layer_compute(MODEL, catalog.gpu(gpu), tr, PLANS, load_profile("generic"))
        layer = float(lc.layer_forward_s[0] + lc.layer_backward_s[0])
        return _adapters(gpu) / layer

    assert share("h100-sxm") > share("a100-sxm-80gb") > 0.05
