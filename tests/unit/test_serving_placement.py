"""Deployments whose workers are smaller than a node (planner/serving/placement.py).

Each worker sits inside one node when it is no larger than a node, small workers share nodes,
a larger one spans whole nodes; the deployment occupies the nodes that hold them. What a
worker's collectives, pipeline hops and KV hand-off see follows from that placement. Before,
``infer`` refused any deployment that spanned nodes without filling them (12 GPUs on 8-GPU
nodes: 1 x TP4 prefill + 1 x TP8 decode), then ran it on its GPU count rounded up to whole
nodes and priced every hand-off over the NIC once the pools did not fit one node."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism, crossing_hops, kv_bytes_per_token
from gpuscale.errors import InputError
from gpuscale.planner.serving import search as ps
from gpuscale.planner.serving.deployment import (
    Pool,
    _iteration_model,
    kv_transfer_s,
    pools_placement,
)
from gpuscale.planner.serving.placement import Group, place

PROFILE = load_profile_for("tensorrt-llm")
R1 = catalog.model("deepseek-ai/DeepSeek-R1")
TOKENS = 1024.0


def _pool(workers: int, tp: int, adp: int = 1, ep: int | None = None, pp: int = 1) -> Pool:
    par = Parallelism(tp=tp, pp=pp, ep=tp if ep is None else ep, attention_dp=adp)
    return Pool(workers=workers, par=par)


def test_small_workers_share_nodes_and_large_ones_hold_whole_nodes() -> None:
    # InferenceX's DeepSeek-R1 recipes: 2 x TP4 prefill + 1 x TP8 decode on 8-GPU nodes
    two = pools_placement(_pool(2, 4), _pool(1, 8, 8), 8)
    assert (two.gpus, two.nodes, two.nodes_of("prefill"), two.nodes_of("decode")) == (16, 2, 1, 1)
    assert two.same_node_share("prefill", "decode") == 0.0
    # three TP4 prefill workers: a third node, half of it used
    three = pools_placement(_pool(3, 4), _pool(1, 8, 8), 8)
    assert (three.gpus, three.nodes, three.nodes_of("prefill")) == (20, 3, 2)
    # a TP16 decode pool spans two whole nodes; the prefill workers sit on a third
    wide = pools_placement(_pool(1, 4), _pool(1, 16, 16), 8)
    assert (wide.gpus, wide.nodes, wide.nodes_of("decode")) == (20, 3, 2)
    # one TP4 prefill worker beside three TP4 decode workers shares a node with one of them
    mixed = pools_placement(_pool(1, 4), _pool(3, 4), 8)
    assert mixed.nodes == 2
    assert mixed.same_node_share("prefill", "decode") == pytest.approx(1 / 3)
    # all in one node
    one = pools_placement(_pool(2, 2), _pool(1, 4), 8)
    assert (one.nodes, one.same_node_share("prefill", "decode")) == (1, 1.0)
    # aggregated replicas smaller than a node: three TP2 replicas in one node, three TP4 in two
    assert place([Group(pool="replica", workers=3, tp=2)], 8).nodes == 1
    four = place([Group(pool="replica", workers=3, tp=4)], 8)
    assert (four.gpus, four.nodes) == (12, 2)


def test_first_fit_by_decreasing_size_fills_nodes_for_power_of_two_workers() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        groups = [
            Group(pool=name, workers=int(rng.integers(1, 9)), tp=int(2 ** rng.integers(0, 5)))
            for name in ("prefill", "decode")
        ]
        p = place(groups, 8)
        assert p.gpus == sum(g.workers * g.tp for g in groups)
        assert p.nodes == -(-p.gpus // 8)  # no node left part-empty but the last


def test_a_million_workers_place_in_a_few_runs() -> None:
    p = place(
        [Group(pool="prefill", workers=10**6, tp=1), Group(pool="decode", workers=3, tp=2)], 8
    )
    assert (p.gpus, p.nodes) == (10**6 + 6, -(-(10**6 + 6) // 8))
    assert len(p.runs) <= 4


def test_workers_that_cannot_be_placed_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match=r"decode worker of 12 GPUs .* 8-GPU nodes") as e:
        pools_placement(_pool(1, 4), _pool(1, 12, 12), 8)
    assert e.value.field == "decode_tp"
    cases = [
        ({"tp": 8, "gpus_per_node": 6}, "tp", r"a replica of 8 GPUs \(TP8\) cannot be placed"),
        ({"tp": 4, "pp": 3}, "tp", r"TP4 x PP3\) cannot be placed on 8-GPU nodes"),
        (
            {"prefill_workers": 1, "prefill_tp": 12, "prefill_attention_dp": 12,
             "decode_workers": 1, "decode_tp": 8},
            "prefill_tp",
            r"a prefill worker of 12 GPUs",
        ),
    ]  # fmt: skip
    for kw, field, message in cases:
        with pytest.raises(InputError, match=message) as e:
            infer(R1, gpu="h200-sxm", engine="sglang", concurrency=8, **kw)  # type: ignore[arg-type]
        assert e.value.field == field
        assert "\n" not in str(e.value)
    # a worker of whole nodes whose stages fill nodes is placed: TP4 x PP4 on two 8-GPU nodes
    r = infer(R1, gpu="h200-sxm", engine="sglang", concurrency=8, tp=4, pp=4).to_dict()
    assert (r["options"][0]["gpus"], r["options"][0]["nodes"]) == (16, 2)


def test_kv_hand_off_link_follows_the_placement() -> None:
    levels = LevelBandwidth.of(catalog.cluster("b200", 16), PROFILE)
    whole = kv_bytes_per_token(R1, Parallelism(tp=1, pp=1), "fp8") * TOKENS
    near = levels.intra_latency_us * 1e-6 + whole / (levels.intra_gb_per_s * 1e9)
    nic = levels.nic_gb_per_s * 1e9 * levels.nics_per_gpu
    far = levels.inter_latency_us * 1e-6 + whole / nic
    b200 = catalog.cluster("b200", 16)

    def t(p: Pool, d: Pool, cluster: object = b200) -> float:
        return kv_transfer_s(R1, cluster, p, d, "fp8", PROFILE, TOKENS)  # type: ignore[arg-type]

    # TP4 prefill ranks to TP4 decode ranks: each sends one latent copy
    assert t(_pool(2, 4), _pool(2, 4)) == pytest.approx(far)  # two nodes, one per pool
    assert t(_pool(1, 4), _pool(1, 4)) == pytest.approx(near)  # one node
    assert t(_pool(1, 4), _pool(3, 4)) == pytest.approx(near / 3 + 2 * far / 3)
    # the same pools in a GB200 NVL72 rack (one NVLink domain, the catalog's node) never
    # leave NVLink
    rack = catalog.cluster("gb200", 16)
    lv = LevelBandwidth.of(rack, PROFILE)
    t_rack = t(_pool(2, 4), _pool(2, 4), rack)
    assert t_rack == pytest.approx(lv.intra_latency_us * 1e-6 + whole / (lv.intra_gb_per_s * 1e9))


def test_a_workers_collectives_follow_its_own_placement() -> None:
    fmt = weight_format("fp8_block")
    eng = engine("sglang")
    tokens = np.array([1024.0])
    z = np.zeros(1)

    def comm(par: Parallelism, gpus: int, gpu: str = "b200") -> float:
        it = _iteration_model(R1, catalog.cluster(gpu, gpus), par, fmt, "fp8", PROFILE, eng)
        return float(it.parts_s(z, z, tokens, z)["communication"][0])

    tp4 = Parallelism(tp=4, pp=1, ep=4, attention_dp=1)
    # a TP4 prefill worker inside a node of a three-node deployment: NVLink only, as alone
    assert comm(tp4, 24) == comm(tp4, 4)
    # a TP16/EP16 attention-DP decode pool spans two 8-GPU nodes: the NIC sets its all-to-all;
    # inside a GB200 NVL72 rack it stays on NVLink
    dp16 = Parallelism(tp=16, pp=1, ep=16, attention_dp=16)
    dp8 = Parallelism(tp=8, pp=1, ep=8, attention_dp=8)
    assert comm(dp16, 16) > 2 * comm(dp8, 16)
    rack = catalog.cluster("gb200", 16)
    lv = LevelBandwidth.of(rack, PROFILE)
    assert comm(dp16, 16, "gb200") < comm(dp16, 16)
    assert lv.intra_gb_per_s > LevelBandwidth.of(catalog.cluster("b200", 16), PROFILE).nic_gb_per_s


def test_pipeline_hops_cross_nodes_only_between_nodes() -> None:
    assert crossing_hops(4, 2, 8) == 0  # TP4 x PP2: one node
    assert crossing_hops(8, 2, 8) == 1
    assert crossing_hops(4, 4, 8) == 1  # stages on nodes 0, 0, 1, 1
    assert crossing_hops(16, 3, 8) == 2
    fmt = weight_format("fp8_block")
    eng = engine("sglang")
    one = np.array([1.0])
    z = np.zeros(1)
    cluster = catalog.cluster("h200-sxm", 16)
    levels = LevelBandwidth.of(cluster, PROFILE)
    act = np.array([R1.hidden_size * 2.0])
    near = float(collective_time_s("send_recv", act, 2, 2, levels)[0])
    far = float(collective_time_s("send_recv", act, 2, 1, levels)[0])
    for par, want in (
        (Parallelism(tp=4, pp=2, ep=4), near),
        (Parallelism(tp=8, pp=2, ep=8), far),
        (Parallelism(tp=4, pp=4, ep=4), far + 2 * near),
    ):
        it = _iteration_model(R1, cluster, par, fmt, "fp8", PROFILE, eng)
        hops = float(it.parts_s(one, one * 512, z, z)["pipeline_hops"][0])
        assert hops == pytest.approx(want), par


@pytest.mark.parametrize(("gpu", "gpus", "per_node"), [("h200-sxm", 16, 8), ("gb200", 144, 72),
                                                       ("h200-sxm", 12, 6)])  # fmt: skip
def test_search_candidates_fit_the_searched_nodes(gpu: str, gpus: int, per_node: int) -> None:
    nodes = -(-gpus // per_node)
    cands = ps.candidates(R1, gpus, per_node)
    assert cands
    for c in cands:
        if c.prefill is not None and c.decode is not None:
            assert pools_placement(c.prefill, c.decode, per_node).nodes <= nodes, c.label
        else:
            p = place(
                [Group(pool="replica", workers=c.replicas, tp=c.par.tp, pp=c.par.pp)], per_node
            )
            assert p.nodes <= nodes, c.label
    # On two GB200 NVL72 racks (the catalog's 72-GPU node) a rack holds four TP16 workers, not
    # 4.5: 1 x TP16 prefill + 8 x TP16 decode is 144 GPUs but needs three racks (the search
    # proposes 7 decode workers beside it), and nine TP16 replicas do not fit either
    if gpu == "gb200":
        labels = {c.label for c in cands}
        assert "1 x TP16 prefill + 8 x TP16 decode" not in labels
        assert "1 x TP16 prefill + 7 x TP16 decode" in labels
        assert "8 x TP16" in labels and "9 x TP16" not in labels
        assert "1 x TP8 prefill + 2 x TP64 decode" in labels  # TP8 beside a TP64 in one rack
