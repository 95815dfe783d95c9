"""The plan enumerator: every plan it returns is valid, and it misses none (checked against a
plain Python enumeration of the same rules on small cases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.planner.enumerate import SearchSpace, divisors, enumerate_plans
from gpuscale.specs import ModelSpec, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CODE


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    kv = draw(st.sampled_from([1, 2, 4, 8, 16]))
    heads = kv * draw(st.sampled_from([1, 2, 3, 4, 8]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    experts = draw(st.sampled_from([1, 1, 4, 8]))
    return ModelSpec(
        name="hypothesis",
        num_layers=draw(st.integers(1, 96)),
        hidden_size=heads * head_dim,
        num_heads=heads,
        num_kv_heads=kv,
        ffn_hidden_size=draw(st.sampled_from([1024, 3072, 11008, 14336, 5000])),
        vocab_size=32000,
        max_seq_len=8192,
        num_experts=experts,
        experts_per_token=min(2, experts),
    )


def _check_valid(model: ModelSpec, n: int, gbs: int, seq: int, batch: PlanBatch) -> None:
    tp, pp, dp, cp = batch.tp, batch.pp, batch.dp, batch.cp
    assert np.all(tp * pp * dp * cp == n)
    assert np.all(model.num_heads % tp == 0)
    assert np.all(model.ffn_hidden_size % tp == 0)
    kv = model.num_kv_heads
    assert np.all((kv % tp == 0) | (tp % kv == 0))
    # every stage keeps a layer; interleaving needs pp*vp to divide the layers, or the layers
    # plus embedding and loss counted as layers (a deficit of at most two)
    assert np.all((pp == 1) | ((pp - 1) * -(-model.num_layers // pp) < model.num_layers))
    chunks = pp * batch.vp
    assert np.all(
        (batch.vp == 1) | (-(-model.num_layers // chunks) * chunks - model.num_layers <= 2)
    )
    interleaved = batch.vp > 1
    assert np.all(pp[interleaved] > 1)
    assert np.all(batch.num_microbatches[interleaved] % pp[interleaved] == 0)
    assert np.all((cp == 1) | (seq % (2 * cp) == 0))
    assert np.all(gbs % (batch.micro_batch * dp) == 0)
    assert np.all(batch.global_batch == gbs)
    assert np.all((batch.zero == 0) | (dp > 1))
    assert np.all(model.num_experts % batch.ep == 0)
    # Experts split like TP (etp = tp: ep divides dp x cp) or folded over it (etp = 1).
    assert np.all((batch.etp == tp) | ((batch.etp == 1) & (tp > 1)))
    assert np.all((tp * dp * cp) % (batch.ep * batch.etp) == 0)
    assert np.all(model.ffn_hidden_size % batch.etp == 0)
    if not model.is_moe:
        assert np.all(batch.ep == 1) and np.all(batch.etp == tp)
    rows = np.stack(
        [
            *(tp, pp, dp, cp, batch.vp, batch.ep, batch.etp),
            *(batch.micro_batch, batch.zero, batch.recompute),
        ],
        axis=1,
    )
    assert np.unique(rows, axis=0).shape[0] == len(batch), "duplicate plans"


@settings(max_examples=60, deadline=None)
@given(
    model=models(),
    n=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 64, 96, 256, 1024]),
    gbs=st.sampled_from([1, 8, 48, 256, 1024]),
    seq=st.sampled_from([512, 2048, 4096, 3000]),
)
def test_every_enumerated_plan_is_valid(model: ModelSpec, n: int, gbs: int, seq: int) -> None:
    batch = enumerate_plans(model, n, global_batch=gbs, seq_len=seq)
    _check_valid(model, n, gbs, seq, batch)
    for i in range(0, len(batch), max(1, len(batch) // 7)):
        plan = batch.plan(i)  # Plan.__post_init__ re-validates the fields one by one
        assert plan.num_gpus == n


def _brute_force(model: ModelSpec, n: int, gbs: int, seq: int, space: SearchSpace) -> set[tuple]:
    """The same rules, one candidate at a time (the specification the vectorized code meets)."""
    out = set()
    kv = model.num_kv_heads
    experts = range(1, model.num_experts + 1) if model.is_moe else [1]
    for tp, pp, cp in itertools.product(range(1, n + 1), repeat=3):
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        if model.num_heads % tp or model.ffn_hidden_size % tp or (kv % tp and tp % kv):
            continue
        uneven_ok = pp == 1 or (pp - 1) * -(-model.num_layers // pp) < model.num_layers
        if not uneven_ok or (cp > 1 and seq % (2 * cp)):
            continue
        folds = [tp, 1] if (model.is_moe and tp > 1) else [tp]
        for ep, etp, vp, mbs, zero, rc in itertools.product(
            experts,
            folds,
            range(1, model.num_layers + 1),
            space.micro_batches,
            space.zero_stages,
            space.recompute,
        ):
            deficit = -(-model.num_layers // (pp * vp)) * pp * vp - model.num_layers
            if (vp > 1 and deficit > 2) or gbs % (mbs * dp):
                continue
            if vp > 1 and (pp == 1 or (gbs // (mbs * dp)) % pp):
                continue
            if model.num_experts % ep or (tp * dp * cp) % (ep * etp) or (zero and dp == 1):
                continue
            if model.ffn_hidden_size % etp:
                continue
            out.add((tp, pp, dp, cp, vp, ep, etp, mbs, zero, RECOMPUTE_CODE[rc]))
    return out


@pytest.mark.parametrize(
    ("heads", "kv", "layers", "experts", "n", "gbs", "seq"),
    [
        (8, 2, 12, 1, 8, 32, 1024),
        (12, 12, 6, 1, 12, 24, 512),
        (4, 1, 8, 4, 16, 64, 2048),
        (16, 4, 9, 1, 6, 12, 768),
    ],
)
def test_enumeration_misses_no_valid_plan(
    heads: int, kv: int, layers: int, experts: int, n: int, gbs: int, seq: int
) -> None:
    model = ModelSpec(
        name="small",
        num_layers=layers,
        hidden_size=heads * 64,
        num_heads=heads,
        num_kv_heads=kv,
        ffn_hidden_size=heads * 256,
        vocab_size=1000,
        max_seq_len=4096,
        num_experts=experts,
        experts_per_token=1,
    )
    space = SearchSpace(micro_batches=(1, 2, 4))
    batch = enumerate_plans(model, n, global_batch=gbs, seq_len=seq, space=space)
    got = {
        tuple(
            int(getattr(batch, f)[i])
            for f in ("tp", "pp", "dp", "cp", "vp", "ep", "etp", "micro_batch", "zero", "recompute")
        )
        for i in range(len(batch))
    }
    assert got == _brute_force(model, n, gbs, seq, space)
    assert len(got) == len(batch)


def test_known_recipes_are_candidates() -> None:
    """Llama 3 70B as Meta and NVIDIA recipes run it (TP=8 in a node, PP=4, interleaved) and
    pure FSDP are both in the space; cross-node TP is enumerated so that it can be priced."""
    model = catalog.model("llama3.1-70b")
    batch = enumerate_plans(model, 64, global_batch=256, seq_len=4096)
    rows = set(
        zip(
            batch.tp.tolist(),
            batch.pp.tolist(),
            batch.dp.tolist(),
            batch.vp.tolist(),
            batch.zero.tolist(),
            strict=True,
        )
    )
    assert (8, 4, 2, 5, 1) in rows
    assert (1, 1, 64, 1, 3) in rows
    assert any(tp == 16 for tp, *_ in rows), "TP across two 8-GPU nodes must be priced, not hidden"


def test_kv_heads_replicate_only_in_whole_copies() -> None:
    model = ModelSpec(
        name="mqa",
        num_layers=4,
        hidden_size=1024,
        num_heads=16,
        num_kv_heads=4,
        ffn_hidden_size=4096,
        vocab_size=1000,
        max_seq_len=2048,
    )
    tps = set(enumerate_plans(model, 16, global_batch=16, seq_len=1024).tp.tolist())
    assert tps == {1, 2, 4, 8, 16}
    odd = ModelSpec(
        name="six",
        num_layers=4,
        hidden_size=768,
        num_heads=12,
        num_kv_heads=4,
        ffn_hidden_size=3072,
        vocab_size=1000,
        max_seq_len=2048,
    )
    assert 6 not in set(enumerate_plans(odd, 12, global_batch=12, seq_len=1024).tp.tolist())


def test_batch_too_small_for_any_replica_count_gives_no_plan() -> None:
    model = catalog.model("gpt3-125m")
    # seq 16 allows cp <= 8, heads and layers allow tp, pp <= 4: dp >= 8 > the batch of 1
    assert len(enumerate_plans(model, 1024, global_batch=1, seq_len=16)) == 0


def test_divisors() -> None:
    assert divisors(12).tolist() == [1, 2, 3, 4, 6, 12]
    assert divisors(1).tolist() == [1]
