"""The cost of gradient sync under each hook: consistent with the step model, and with the
closed-form traffic of flat and two-level all-reduce."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from gpuscale.costmodel.collectives import LevelBandwidth
from gpuscale.costmodel.communication import exposed_comm_s
from gpuscale.costmodel.grad_sync import FIDELITY, HOOKS, HookOptions, sync_costs
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.errors import InputError
from gpuscale.specs import Plan, Training

PROFILE = load_profile("generic")
ENTRIES = 1.0e9


def _costs(gpus: int, inter: str = "ib-ndr400", nics: int | None = None, **options: float):
    cluster = catalog.cluster("h100-sxm", gpus, inter=inter, nics_per_node=nics)
    hbm = cluster.device.hbm_bandwidth_gb_per_s * 1e9 * PROFILE.hbm_efficiency
    return sync_costs(
        ENTRIES,
        4.0,
        gpus,
        cluster.gpus_per_node,
        LevelBandwidth.of(cluster, PROFILE),
        hbm,
        HookOptions(**options),
    )  # type: ignore[arg-type]


def test_default_hook_is_the_step_models_all_reduce() -> None:
    model = catalog.model("llama3.2-1b")
    cluster = catalog.cluster("h100-sxm", 32, inter="eth-25", nics_per_node=1)
    plan = Plan(dp=32, micro_batch=1, global_batch=32)
    est = estimate_plan(model, cluster, Training(seq_len=2048), plan, PROFILE)
    entries = float(est.gradient_bytes_per_gpu[0]) / 4.0
    costs = sync_costs(entries, 4.0, 32, 8, LevelBandwidth.of(cluster, PROFILE), 1e12)
    assert costs["default"].network_s == pytest.approx(float(est.dp_sync_unhidden_s[0]), rel=1e-12)
    assert costs["default"].codec_s == 0.0


def test_node_egress_matches_ring_and_two_level_traffic() -> None:
    costs = _costs(32)  # 4 nodes of 8
    size = ENTRIES * 4.0
    assert costs["default"].node_egress_bytes == pytest.approx(2 * 31 / 32 * size)
    assert costs["hierarchical"].node_egress_bytes == pytest.approx(2 * 3 / 4 * size)
    assert costs["hierarchical+bf16"].node_egress_bytes == pytest.approx(2 * 3 / 4 * size / 2)
    assert costs["bf16"].node_egress_bytes == pytest.approx(costs["default"].node_egress_bytes / 2)


def test_one_node_sends_nothing_out() -> None:
    assert all(c.node_egress_bytes == 0.0 for c in _costs(8).values())


def test_hierarchical_pays_only_when_nodes_are_short_of_nics() -> None:
    # one NIC per node: the flat ring's node boundary carries 2(n-1)/n of the buffer
    starved = _costs(16, inter="eth-25", nics=1)
    assert starved["hierarchical"].network_s < 0.6 * starved["default"].network_s
    # rail-optimized (a NIC per GPU): NCCL's rings already cross each node boundary in
    # parallel, and the extra node stages only add time
    rails = _costs(16)
    assert rails["hierarchical"].network_s > rails["default"].network_s


def test_qsgd_all_gather_grows_with_the_group() -> None:
    small, large = _costs(16, inter="eth-25", nics=1), _costs(128, inter="eth-25", nics=1)
    ratio_small = small["qsgd"].network_s / small["default"].network_s
    ratio_large = large["qsgd"].network_s / large["default"].network_s
    assert ratio_large > 4 * ratio_small


def test_codec_is_charged_beyond_the_default_divide() -> None:
    costs = _costs(16)
    assert all(costs[h].codec_s > 0 for h in HOOKS if h != "default")
    assert set(FIDELITY) == set(HOOKS)


def test_exposed_is_what_backward_cannot_hide_plus_the_slowdown_it_causes() -> None:
    assert exposed_comm_s(1.0, 0.25, 0.0) == pytest.approx(0.75)
    assert exposed_comm_s(0.2, 0.25, 0.0) == 0.0
    # Overlapped time is not free: the compute under it runs slower by the interference share.
    assert exposed_comm_s(1.0, 0.25, 0.2) == pytest.approx(0.75 + 0.2 * 0.25)
    assert exposed_comm_s(0.2, 0.25, 0.2) == pytest.approx(0.2 * 0.2)


@pytest.mark.parametrize("options", [{"topk_ratio": 0.0}, {"qsgd_levels": 0}, {"qsgd_chunk": 0}])
def test_bad_options_are_input_errors(options: dict[str, float]) -> None:
    with pytest.raises(InputError):
        HookOptions(**options)  # type: ignore[arg-type]
