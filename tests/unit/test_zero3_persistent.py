"""DeepSpeed 2021 ZeRO-3: the persistent tensors gathered again after every step through a
per-rank copy loop, and the re-gather count under the trace offset (deepspeed-2021.yaml)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.costmodel.zero3_persistent import layer_tensors, post_step_gather, shard_copies
from gpuscale.specs import ModelSpec, Plan, Training

GPT3 = ModelSpec(
    name="gpt3-175b",
    num_layers=96,
    hidden_size=12288,
    num_heads=96,
    num_kv_heads=96,
    ffn_hidden_size=49152,
    vocab_size=51200,
    max_seq_len=2048,
    mlp="plain",
    norm="layernorm",
    position="learned",
    qkv_bias=True,
    linear_bias=True,
)


def _persistent(m: ModelSpec, threshold: float, tp: int = 1, ep: int = 1) -> list[float]:
    """The sizes of one layer's persistent tensors on one rank, one entry per tensor."""
    one = np.array([float(tp)])
    out: list[float] = []
    for size, count in layer_tensors(m, one, np.array([float(ep)])):
        if size[0] < threshold:
            out += [float(size[0])] * int(count[0])
    return sorted(out)


def test_gpt_biases_and_layernorms_are_persistent_below_the_threshold() -> None:
    h = 12288
    # query_key_value, dense, dense_h_to_4h, dense_4h_to_h biases; two LayerNorms x (w, b)
    assert _persistent(GPT3, 1e5) == sorted([3 * h, h, 4 * h, h, h, h, h, h])
    assert _persistent(GPT3, 40_000) == sorted([3 * h] + [h] * 6)
    one = np.array([1.0])
    # 0: none modelled
    assert post_step_gather(GPT3, 0.0, 96 * one, one, one, 64 * one)[1].tolist() == [0.0]
    # the final norm's scale and shift count once, on top of the layers
    copies, elements = post_step_gather(GPT3, 1e5, 0 * one, one, one, one)
    assert elements.tolist() == [2.0 * h] and copies.tolist() == [2.0]


def test_the_threshold_is_strict_as_in_deepspeed() -> None:
    # stage3.py persistent_parameters: ``if param.ds_numel < self.persistence_threshold``
    h = 12288
    assert 4 * h not in _persistent(GPT3, 4 * h)
    assert 4 * h in _persistent(GPT3, 4 * h + 1)


def test_tensor_parallel_slices_are_what_deepspeed_compares() -> None:
    """A rank's ColumnParallelLinear biases hold 1/tp of their width: a GPT whose 4h bias is
    above the threshold whole is under it at TP 8 (regression: the whole width was compared,
    and the gathered bytes counted every bias whole)."""
    wide = dataclasses.replace(
        GPT3,
        hidden_size=32768,
        ffn_hidden_size=4 * 32768,
        num_heads=128,
        num_kv_heads=128,
        head_dim=256,
    )
    h = 32768
    # dense_h_to_4h (131,072) and query_key_value (98,304 < 1e5) whole; dense, 4h_to_h, norms
    assert _persistent(wide, 1e5) == sorted([3 * h] + [h] * 6)
    assert _persistent(wide, 1e5, tp=8) == sorted([3 * h / 8, 4 * h / 8] + [h] * 6)
    one = np.array([1.0])
    _, at_tp8 = post_step_gather(wide, 1e5, one, 8 * one, one, 64 * one)
    assert at_tp8.tolist() == [3 * h / 8 + 4 * h / 8 + 6 * h + 2 * h]


def test_a_rank_holds_its_share_of_the_experts() -> None:
    moe = dataclasses.replace(GPT3, num_experts=8, experts_per_token=2)
    h = 12288
    assert _persistent(moe, 1e5, ep=1).count(4 * h) == 8
    assert _persistent(moe, 1e5, ep=4).count(4 * h) == 2


def test_rmsnorm_model_without_biases_keeps_only_its_norms() -> None:
    llama = catalog.model("llama3.1-8b")
    assert _persistent(llama, 1e5) == [4096.0, 4096.0]
    one = np.array([1.0])
    assert post_step_gather(llama, 1e5, 0 * one, one, one, one)[1].tolist() == [4096.0]


@pytest.mark.parametrize(
    ("size", "ranks", "copies"),
    [
        (10, 1, 1),
        (10, 4, 4),  # padded to 12, shards of 3 start at 0, 3, 6, 9
        (10, 8, 5),  # padded to 16, shards of 2: those starting at 0, 2, 4, 6, 8
        (10, 64, 10),  # shards of 1: only the first 10 start inside the tensor
        (12288, 1536, 1536),
    ],
)
def test_shard_copies_follow_deepspeed_padding(size: int, ranks: int, copies: int) -> None:
    # Brute force: the loop in Init._allgather_params copies shard i when i * shard < size.
    shard = -(-size // ranks)
    assert sum(1 for i in range(ranks) if i * shard < size) == copies
    got = shard_copies(np.array([float(size)]), np.array([ranks]))
    assert got.tolist() == [copies]


@given(st.integers(1, 200_000), st.integers(1, 4096))
def test_shard_copies_match_the_copy_loop(size: int, ranks: int) -> None:
    shard = -(-size // ranks)  # Init._aligned_size / world_size
    loop = sum(1 for i in range(ranks) if i * shard < size)
    assert shard_copies(np.array([float(size)]), np.array([ranks])).tolist() == [loop]


def test_post_step_gather_adds_one_copy_loop_per_step_on_the_host() -> None:
    # By hand: 8 tensors per layer + the final norm's 2, one copy per rank each (all are
    # larger than the group), at zero3_host_us_per_rank, plus one ring all-gather of their
    # fp16 bytes; nothing per micro-batch.
    ds = load_profile("deepspeed-2021")
    off = dataclasses.replace(
        ds, constants={**ds.constants, "zero3_param_persistence_threshold": 0.0}
    )
    n = 64
    cluster = catalog.cluster("a100-sxm-80gb", n, inter="ib-hdr200")
    training = Training(seq_len=2048, precision="fp16")
    plan = Plan(dp=n, micro_batch=1, global_batch=2 * n, zero=3, recompute="full")
    on = estimate_plan(GPT3, cluster, training, plan, ds)
    base = estimate_plan(GPT3, cluster, training, plan, off)
    copies = (8 * 96 + 2) * n
    h = 12288
    gathered = float((3 * h + h + 4 * h + h + 4 * h) * 96 + 2 * h) * 2.0
    ring = float(collective_time_s("all_gather", gathered, n, 8, LevelBandwidth.of(cluster, ds)))
    expected = copies * ds.const("zero3_host_us_per_rank") * 1e-6 + ring
    assert float(on.comm_dp_s[0] - base.comm_dp_s[0]) == pytest.approx(expected, rel=1e-9)
    assert float(on.comm_zero_s[0]) == float(base.comm_zero_s[0])  # per step, not per micro-batch
    assert float(on.step_time_s[0] - base.step_time_s[0]) == pytest.approx(expected, rel=1e-9)


def test_post_step_gather_only_under_zero3_and_only_where_the_profile_has_it() -> None:
    cluster = catalog.cluster("a100-sxm-80gb", 16, inter="ib-hdr200")
    training = Training(seq_len=2048, precision="fp16")
    ds = load_profile("deepspeed-2021")
    off = dataclasses.replace(
        ds, constants={**ds.constants, "zero3_param_persistence_threshold": 0.0}
    )
    zero1 = Plan(dp=16, micro_batch=1, global_batch=32, zero=1, recompute="full")
    assert float(estimate_plan(GPT3, cluster, training, zero1, ds).step_time_s[0]) == float(
        estimate_plan(GPT3, cluster, training, zero1, off).step_time_s[0]
    )
    # Profiles other than DeepSpeed 2021's keep no persistent tensors.
    for name in ("generic", "fsdp", "torchtitan", "deepspeed"):
        assert load_profile(name).const("zero3_param_persistence_threshold") == 0.0
    assert ds.const("zero3_param_persistence_threshold") == 1e5  # DeepSpeed's default


def test_trace_offset_regathers_every_weight_for_the_recompute() -> None:
    # get_reuse_distance_in_numel reports 'Tracing failed' (1e12) under the step offset of
    # v0.3.14-v0.5.x, so no weight is kept for its backward: 4 of 4 fetched a third time.
    ds = load_profile("deepspeed-2021")
    assert ds.const("zero3_regather_on_recompute") == 1.0
    assert ds.overlap_of("zero") == 0.0  # the prefetch is off under the same offset
