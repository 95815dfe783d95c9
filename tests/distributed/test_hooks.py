"""The hooks on real gloo processes: 4 ranks as 2 "nodes" x 2.

Hierarchical all-reduce equals the exact sum to float32 rounding (and the flat all-reduce), on
every bucket size including ones smaller than the world; 16-bit hooks stay within their
precision; every hook leaves all replicas bit-identical under real DDP training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.distributed.hooks_harness import WORLD, run_ranks  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(180)]

SIZES = (1, 3, 4, 5, 257, 4099)
"""Bucket lengths: one element, fewer than the ranks, exactly the ranks, odd, large and odd."""

LAYOUTS = ("2x2", "2x2-emulated", "4x1", "1x4")
"""Nodes x ranks per node; ``emulated`` stands in an all-reduce for the node reduce-scatter."""


def _input(rank: int, n: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 * rank + n)
    return torch.randn(n, generator=gen) * (1 + rank)


def _collectives(rank: int, world: int, out: Path) -> None:
    import torch.distributed as dist

    from gpuscale.runtime import NodeTopology, build_groups
    from gpuscale.runtime.hooks.hierarchical import hierarchical_all_reduce

    two_by_two = build_groups()
    groups = {
        "2x2": two_by_two,
        "2x2-emulated": dataclasses.replace(two_by_two, node_reduce_scatter=False),
        "4x1": build_groups(NodeTopology.contiguous(world, 1)),
        "1x4": build_groups(NodeTopology.contiguous(world, world)),
    }
    results: dict[str, torch.Tensor] = {
        "native_reduce_scatter": torch.tensor(two_by_two.node_reduce_scatter)
    }
    for n in SIZES:
        x = _input(rank, n)
        flat = x.clone()
        dist.all_reduce(flat)
        results[f"flat/{n}"] = flat
        for name, g in groups.items():
            results[f"{name}/{n}"] = hierarchical_all_reduce(x.clone(), g)
        for dtype in (torch.bfloat16, torch.float16):
            results[f"2x2+{dtype}/{n}"] = hierarchical_all_reduce(x.clone(), two_by_two, dtype)
    torch.save(results, out / f"rank{rank}.pt")


@pytest.fixture(scope="module")
def collectives(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("collectives")
    run_ranks(_collectives, folder)
    return [torch.load(folder / f"rank{r}.pt") for r in range(WORLD)]


def _exact(n: int) -> torch.Tensor:
    return sum(_input(r, n).double() for r in range(WORLD))


def test_gloo_reduce_scatter_is_native_in_this_torch(
    collectives: list[dict[str, torch.Tensor]],
) -> None:
    assert all(bool(r["native_reduce_scatter"]) for r in collectives)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", SIZES)
def test_hierarchical_equals_flat_all_reduce(
    collectives: list[dict[str, torch.Tensor]], layout: str, n: int
) -> None:
    exact = _exact(n)
    # each output entry is a sum of 4 float32 terms: at most 3 roundings of the running sum
    bound = (
        3 * torch.finfo(torch.float32).eps * sum(_input(r, n).abs().double() for r in range(WORLD))
    )
    for rank, result in enumerate(collectives):
        got = result[f"{layout}/{n}"]
        assert got.shape == (n,)
        assert torch.all((got.double() - exact).abs() <= bound), f"rank {rank}"
        assert torch.allclose(got, result[f"flat/{n}"], rtol=1e-6, atol=1e-6)
        assert torch.equal(got, collectives[0][f"{layout}/{n}"]), f"rank {rank} differs from rank 0"


@pytest.mark.parametrize("dtype", ["torch.bfloat16", "torch.float16"])
@pytest.mark.parametrize("n", SIZES)
def test_hierarchical_16bit_within_its_precision(
    collectives: list[dict[str, torch.Tensor]], dtype: str, n: int
) -> None:
    eps = {"torch.bfloat16": 2.0**-8, "torch.float16": 2.0**-11}[dtype]
    exact = _exact(n)
    node_sums = [_input(0, n) + _input(1, n), _input(2, n) + _input(3, n)]
    # the two node sums are rounded to 16 bits (half an ulp each), summed, rounded again
    bound = eps * (node_sums[0].abs() + node_sums[1].abs() + exact.abs().float()).double() + 1e-6
    for rank, result in enumerate(collectives):
        got = result[f"2x2+{dtype}/{n}"]
        assert torch.all((got.double() - exact).abs() <= bound), f"rank {rank}"
        assert torch.equal(got, collectives[0][f"2x2+{dtype}/{n}"])


HOOKS = (
    "default",
    "hierarchical",
    "hierarchical+bf16",
    "hierarchical+fp16",
    "bf16",
    "fp16",
    "topk",
    "qsgd",
    "hierarchical/chunked",
)
OPTIONS = {"topk": {"ratio": 0.3}, "hierarchical/chunked": {"chunk_bytes": 16}}
"""``chunk_bytes=16``: four floats a chunk, so the 35-entry bucket runs through the pipeline in
nine chunks (the last one padded)."""
STEPS = 3
LR = 0.1


def _model() -> torch.nn.Module:
    # parameters of 35, 5, 15, 3, 3 and 1 entries: with a tiny bucket cap each is its own
    # bucket, so buckets of 1 and 3 entries meet a world of 4
    return torch.nn.Sequential(
        torch.nn.Linear(7, 5),
        torch.nn.Tanh(),
        torch.nn.Linear(5, 3),
        torch.nn.Tanh(),
        torch.nn.Linear(3, 1),
    )


def _ddp_training(rank: int, world: int, out: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel

    from gpuscale.runtime import build_groups, register_hook

    groups = build_groups()
    gen = torch.Generator().manual_seed(rank)
    x, y = torch.randn(16, 7, generator=gen), torch.randn(16, 1, generator=gen)
    results = {}
    for name in HOOKS:
        torch.manual_seed(0)
        model = _model()
        ddp = DistributedDataParallel(model, bucket_cap_mb=1e-5)
        if name != "default":
            register_hook(ddp, name.partition("/")[0], groups, **OPTIONS.get(name, {}))
        sgd = torch.optim.SGD(ddp.parameters(), lr=LR)
        for _ in range(STEPS):
            sgd.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            sgd.step()
        results[name] = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.manual_seed(0)
    results["initial"] = torch.cat([p.detach().flatten() for p in _model().parameters()])
    torch.save(results, out / f"rank{rank}.pt")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("ddp")
    run_ranks(_ddp_training, folder)
    return [torch.load(folder / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("hook", HOOKS)
def test_replicas_stay_bit_identical(trained: list[dict[str, torch.Tensor]], hook: str) -> None:
    for rank in range(1, WORLD):
        assert torch.equal(trained[rank][hook], trained[0][hook]), (
            f"rank {rank} drifted under {hook}"
        )
    assert torch.isfinite(trained[0][hook]).all()
    assert not torch.equal(trained[0][hook], trained[0]["initial"]), "nothing was trained"


@pytest.mark.parametrize(
    ("hook", "tolerance"),
    [
        ("hierarchical", 1e-6),
        ("hierarchical/chunked", 1e-6),
        ("hierarchical+bf16", 2.0**-8),
        ("bf16", 2.0**-8),
        ("hierarchical+fp16", 2.0**-11),
        ("fp16", 2.0**-11),
    ],
)
def test_ddp_matches_default_within_precision(
    trained: list[dict[str, torch.Tensor]], hook: str, tolerance: float
) -> None:
    moved = (trained[0]["default"] - trained[0]["initial"]).abs().max()
    diff = (trained[0][hook] - trained[0]["default"]).abs().max()
    # rounding of each step's mean gradient, relative to how far training moved the weights
    assert diff <= 4 * tolerance * moved + 1e-7, f"{hook}: {diff:.3g} vs moved {moved:.3g}"
