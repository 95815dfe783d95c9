"""Hook arithmetic on one process: topology, padding and chunking, top-k and QSGD codecs,
error feedback and input validation. The multi-process behaviour is in tests/distributed."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from gpuscale.errors import InputError  # noqa: E402
from gpuscale.runtime import NodeTopology  # noqa: E402
from gpuscale.runtime.hooks import make_hook  # noqa: E402
from gpuscale.runtime.hooks._feedback import ErrorFeedback  # noqa: E402
from gpuscale.runtime.hooks.compress import CastState  # noqa: E402
from gpuscale.runtime.hooks.hierarchical import chunk_bounds, padded_length  # noqa: E402
from gpuscale.runtime.hooks.qsgd import (  # noqa: E402
    QSGDState,
    dequantize,
    pack,
    quantize,
    unpack,
    variance_bound,
)
from gpuscale.runtime.hooks.topk import (  # noqa: E402
    TopKState,
    decode_sum,
    encode,
    keep_count,
    select_topk,
)

# --------------------------------------------------------------------------- topology


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 8), local=st.integers(1, 8))
def test_contiguous_topology_partitions_ranks(nodes: int, local: int) -> None:
    topo = NodeTopology.contiguous(nodes * local, local)
    assert topo.num_nodes == nodes and topo.local_world_size == local
    assert sorted(r for rail in topo.rails for r in rail) == list(range(nodes * local))
    for rank in range(nodes * local):
        node, local_rank = topo.node_of(rank), topo.local_rank_of(rank)
        assert rank == node * local + local_rank  # torchrun's node-major numbering
        assert topo.rails[local_rank][node] == rank


def test_explicit_topology_keeps_its_order() -> None:
    topo = NodeTopology.from_nodes([[0, 2], [1, 3]])
    assert topo.rails == ((0, 1), (2, 3))
    assert topo.local_rank_of(2) == 1


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ([[0, 1], [2]], "same number of ranks"),
        ([[0, 1], [1, 2]], "exactly one node"),
        ([[1, 2]], "0..1"),
        ([[]], "at least one rank"),
    ],
)
def test_bad_explicit_topology_is_an_input_error(nodes: list[list[int]], message: str) -> None:
    with pytest.raises(InputError, match=message):
        NodeTopology.from_nodes(nodes)


def test_topology_from_torchrun_environment() -> None:
    env = {
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "4",
        "RANK": "5",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
    }
    assert NodeTopology.from_env(env).nodes == ((0, 1, 2, 3), (4, 5, 6, 7))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE is not set"),
        ({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "x"}, "must be integers"),
        ({"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "4"}, "not a multiple"),
        (
            {
                "WORLD_SIZE": "8",
                "LOCAL_WORLD_SIZE": "4",
                "RANK": "1",
                "LOCAL_RANK": "0",
                "GROUP_RANK": "1",
            },
            "not node-major",
        ),
    ],
)
def test_bad_environment_is_an_input_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        NodeTopology.from_env(env)


# --------------------------------------------------------------------------- padding, chunks


@settings(max_examples=100, deadline=None)
@given(numel=st.integers(0, 10_000), parts=st.integers(1, 16), chunk=st.integers(1, 4096))
def test_chunks_cover_the_padded_bucket_in_node_sized_pieces(
    numel: int, parts: int, chunk: int
) -> None:
    padded = padded_length(numel, parts)
    assert padded >= max(numel, parts) and padded % parts == 0 and padded - max(numel, 1) < parts
    bounds = chunk_bounds(padded, parts, chunk)
    assert bounds[0][0] == 0 and bounds[-1][1] == padded
    for (_, stop), (start, _) in itertools.pairwise(bounds):
        assert stop == start
    assert all((b - a) % parts == 0 and b > a for a, b in bounds)


# --------------------------------------------------------------------------- top-k


def test_topk_keeps_the_largest_magnitudes_and_decodes_exactly() -> None:
    acc = torch.tensor([0.1, -5.0, 0.2, 3.0, -0.3, 0.0])
    values, indices = select_topk(acc, 2)
    assert sorted(indices.tolist()) == [1, 3]
    one_rank = decode_sum(encode(values, indices), world=1, k=2, out=torch.empty(6))
    assert torch.equal(one_rank, torch.tensor([0.0, -5.0, 0.0, 3.0, 0.0, 0.0]))


def test_topk_sums_ranks_in_order() -> None:
    a = encode(torch.tensor([1.0, 2.0]), torch.tensor([0, 2]))
    b = encode(torch.tensor([10.0, 20.0]), torch.tensor([2, 3]))
    summed = decode_sum(torch.cat([a, b]), world=2, k=2, out=torch.full((4,), 7.0))
    assert torch.equal(summed, torch.tensor([1.0, 0.0, 12.0, 20.0]))


@pytest.mark.parametrize(
    ("numel", "ratio", "kept"), [(1, 0.01, 1), (3, 0.5, 2), (1000, 0.01, 10), (7, 1.0, 7)]
)
def test_keep_count(numel: int, ratio: float, kept: int) -> None:
    assert keep_count(numel, ratio) == kept


# --------------------------------------------------------------------------- QSGD


def test_qsgd_is_unbiased_and_within_its_variance_bound() -> None:
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(300, generator=gen)
    levels, chunk, draws = 4, 64, 4000
    total = torch.zeros_like(v)
    sq_err = 0.0
    for _ in range(draws):
        q = dequantize(quantize(v, levels, chunk, gen), levels)
        total += q
        sq_err += float((q - v).pow(2).sum())
    mean = total / draws
    # the sample mean of an unbiased estimator: error ~ sqrt(variance / draws)
    assert float((mean - v).norm()) < 4 * math.sqrt(variance_bound(levels, chunk) / draws) * float(
        v.norm()
    )
    assert sq_err / draws <= variance_bound(levels, chunk) * float(v.pow(2).sum())


@pytest.mark.parametrize("numel", [1, 3, 64, 65, 1000])
@pytest.mark.parametrize("levels", [1, 127, 128])
def test_qsgd_codes_stay_in_range_and_pack_roundtrips(numel: int, levels: int) -> None:
    gen = torch.Generator().manual_seed(numel)
    v = torch.randn(numel, generator=gen) * 100
    msg = quantize(v, levels, 64, gen)
    assert int(msg.codes.abs().max()) <= levels
    assert msg.codes.dtype == (torch.int8 if levels <= 127 else torch.int16)
    back = unpack(pack(msg), levels, 64, numel)
    assert torch.equal(back.codes, msg.codes) and torch.equal(back.norms, msg.norms)
    assert dequantize(back, levels).shape == (numel,)


def test_qsgd_of_zero_is_zero_and_shrink_scales_the_message() -> None:
    gen = torch.Generator().manual_seed(1)
    assert torch.equal(dequantize(quantize(torch.zeros(10), 2, 4, gen), 2), torch.zeros(10))
    v = torch.randn(32, generator=torch.Generator().manual_seed(2))
    full = dequantize(quantize(v, 8, 16, torch.Generator().manual_seed(3)), 8)
    half = dequantize(quantize(v, 8, 16, torch.Generator().manual_seed(3), shrink=0.5), 8)
    assert torch.allclose(half, full * 0.5)


# --------------------------------------------------------------------------- error feedback


def test_error_feedback_adds_the_residual_and_resets_on_rebuilt_buckets() -> None:
    fb = ErrorFeedback()
    assert torch.equal(fb.accumulate(0, torch.ones(3)), torch.ones(3))
    fb.keep(0, torch.tensor([0.5, 0.0, -1.0]))
    assert torch.equal(fb.accumulate(0, torch.ones(3)), torch.tensor([1.5, 1.0, 0.0]))
    assert torch.equal(fb.accumulate(0, torch.ones(4)), torch.ones(4))  # bucket 0 was rebuilt
    off = ErrorFeedback(enabled=False)
    off.keep(0, torch.ones(3))
    assert off.residuals == {}


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: CastState(torch.float32), "float16 or torch.bfloat16"),
        (lambda: TopKState(ratio=0.0), "ratio must be in"),
        (lambda: QSGDState(levels=0), "levels must be in"),
        (lambda: QSGDState(chunk=0), "chunk must be"),
        (lambda: make_hook("hierarchcal"), "did you mean hierarchical"),
        (lambda: make_hook("hierarchical"), "needs groups"),
    ],
)
def test_bad_hook_options_are_input_errors(build: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        build()  # type: ignore[operator]
