"""Memory as frameworks allocate it: FSDP2 reshard-after-forward, torchtitan's selective
checkpointing, the loss in fp32 or compiled, float8 all-gathers, CUDA graphs, the optimizer
step, loading a quantized base and the caching allocator -- each term checked by hand."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.costmodel.activations import op_sac_terms, stage_activations
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import Plan, PlanBatch
from gpuscale.specs.training import Training

GIB = 2**30
PROFILE = load_profile("generic")
L8B = catalog.model("llama3.1-8b")
L405B = catalog.model("llama3.1-405b")


def _stored(training: Training, plan: Plan, stage: str = "first") -> float:
    acts = stage_activations(L8B, training, PlanBatch.from_plans([plan]), stage)  # type: ignore[arg-type]
    return float(acts.stored[0])


def test_op_sac_keeps_the_input_every_other_matmul_and_the_attention_outputs() -> None:
    """torchtitan's per-op SAC on a Llama layer (tp 1): saves wq, wv, w1, w2 outputs (mm 1, 3,
    5, 7), recomputes wk, wo, w3; keeps the flash output and log-sum-exp."""
    e, h, q, kv, f, a = 2, 4096, 4096, 1024, 14336, 32
    terms = op_sac_terms(L8B, Training())
    assert terms.by_sp == e * h
    assert terms.by_tp == e * (q + kv + f) + e * q + 4 * a
    assert terms.whole == e * h
    tokens, layers = 2 * 8192, 32
    training = Training(seq_len=8192, selective_policy="op")
    op = _stored(training, Plan(micro_batch=2, global_batch=2, recompute="selective"))
    full = _stored(training, Plan(micro_batch=2, global_batch=2, recompute="full"))
    none = _stored(training, Plan(micro_batch=2, global_batch=2, recompute="none"))
    per_layer = terms.by_sp + terms.by_tp + terms.whole - e * h
    assert op - full == pytest.approx(tokens * layers * per_layer)
    assert full < op < none


def test_layer_sac_fully_recomputes_one_layer_in_every_n() -> None:
    plan = Plan(micro_batch=1, global_batch=1, recompute="selective")
    none = _stored(Training(seq_len=4096), dataclasses.replace(plan, recompute="none"))
    full = _stored(Training(seq_len=4096), dataclasses.replace(plan, recompute="full"))
    every2 = _stored(Training(seq_len=4096, selective_policy="layer", selective_every=2), plan)
    every4 = _stored(Training(seq_len=4096, selective_policy="layer", selective_every=4), plan)
    head = none - _stored(
        Training(seq_len=4096, loss="fused"), dataclasses.replace(plan, recompute="none")
    )
    assert every2 - head == pytest.approx(((none - head) + (full - head)) / 2, rel=1e-9)
    assert full < every2 < every4 < none


def test_compiled_and_chunked_losses_hold_no_fp32_logits() -> None:
    plan = Plan(micro_batch=1, global_batch=1, recompute="full")
    batch = PlanBatch.from_plans([plan])
    v, s = L8B.vocab_size, 4096
    standard = stage_activations(L8B, Training(seq_len=s), batch, "last")
    compiled = stage_activations(L8B, Training(seq_len=s, loss="compiled"), batch, "last")
    # Standard: fp32 log-probs kept + two fp32 gradients in backward; compiled: 16-bit logits
    # kept + their 16-bit gradient.
    assert float(standard.loss[0]) == pytest.approx(2 * 4 * s * v)
    assert float(compiled.loss[0]) == pytest.approx(2 * s * v)
    assert float(standard.stored[0] - compiled.stored[0]) == pytest.approx((4 - 2) * s * v)


def test_fsdp_keeps_the_root_gathered_and_reshards_blocks_after_forward() -> None:
    training = Training(seq_len=4096)
    plan = Plan(dp=8, zero=3, micro_batch=1, global_batch=8, recompute="full")
    sharded = plan_memory(L8B, dataclasses.replace(training, separate_embedding_units=True), plan)
    rooted = plan_memory(L8B, training, plan)
    table = L8B.vocab_size * L8B.hidden_size * 2
    # The embedding (a root member) stays gathered whole; as a unit of its own it is resharded.
    assert rooted["weights"] - sharded["weights"] == pytest.approx(table, rel=0.01)


def test_no_reshard_under_pipelining_keeps_the_stage_gathered_with_fp32_grad_accumulators() -> None:
    """torchtitan turns reshard-after-forward off under PP: a stage's blocks stay gathered and
    FSDP2 accumulates their unsharded gradients in fp32 across micro-batches."""
    training = Training(seq_len=8192, precision="fp8")
    plan = Plan(tp=8, pp=8, dp=8, zero=3, micro_batch=1, global_batch=64, recompute="full")
    default = plan_memory(L405B, training, plan)
    forced = plan_memory(L405B, dataclasses.replace(training, reshard_after_forward=True), plan)
    layers = -(-L405B.num_layers // 8)
    layer_params = (total_params(L405B) - 2 * L405B.vocab_size * L405B.hidden_size) / 126 / 8
    # The first stage's peak is inside a layer: all its blocks gathered instead of two.
    assert default["weights"] - forced["weights"] == pytest.approx(
        (layers - 2) * layer_params * 2, rel=0.02
    )
    assert default["gradients"] - forced["gradients"] == pytest.approx(
        layers * layer_params * 4, rel=0.05
    )
    one_step = dataclasses.replace(plan, global_batch=8)
    assert plan_memory(L405B, training, one_step)["gradients"] < default["gradients"]


def test_float8_all_gather_halves_the_gathered_linear_weights() -> None:
    training = Training(seq_len=8192, precision="fp8")
    plan = Plan(tp=8, pp=8, dp=8, zero=3, micro_batch=1, global_batch=64, recompute="full")
    bf16 = plan_memory(L405B, training, plan)
    fp8 = plan_memory(L405B, dataclasses.replace(training, fp8_all_gather=True), plan)
    assert 0.3 * bf16["weights"] < bf16["weights"] - fp8["weights"] < 0.5 * bf16["weights"]


def test_cuda_graphs_hold_the_layer_and_loss_working_sets_together() -> None:
    plan = Plan(micro_batch=1, global_batch=1, recompute="full")
    batch = PlanBatch.from_plans([plan])
    eager = stage_activations(L8B, Training(seq_len=4096), batch, "first")
    graphed = stage_activations(L8B, Training(seq_len=4096, cuda_graphs=True), batch, "first")
    assert float(graphed.transient[0]) == pytest.approx(float(eager.workspace[0] + eager.loss[0]))
    assert float(eager.transient[0]) == pytest.approx(max(eager.workspace[0], eager.loss[0]))
    assert float(graphed.cached[0]) == 0.0 < float(eager.cached[0])


def test_reserved_holds_the_smaller_working_set_cached_above_the_allocated_peak() -> None:
    plan = Plan(micro_batch=2, global_batch=2, recompute="full")
    training = Training(seq_len=4096, foreach_optimizer=False, master_weights=False)
    mem = plan_memory(L8B, training, plan)
    acts = stage_activations(L8B, training, PlanBatch.from_plans([plan]), "first")
    cached = float(min(acts.workspace[0], acts.loss[0]))
    frag = PROFILE.const("memory_allocator_fragmentation")
    assert mem["reserved"] == pytest.approx((mem["allocated"] + cached) * frag)
    no_recompute = plan_memory(L8B, training, dataclasses.replace(plan, recompute="none"))
    assert no_recompute["reserved"] == pytest.approx(no_recompute["allocated"] * frag)


def test_foreach_adamw_step_can_set_the_peak() -> None:
    """Full fine-tuning on one GPU: the foreach step's temporary (one state-sized list) lands
    on top of weights, gradients and states once the activations are freed."""
    plan = Plan(micro_batch=1, global_batch=1, recompute="full")
    fused = plan_memory(L8B, Training(seq_len=1024, foreach_optimizer=False), plan)
    foreach = plan_memory(L8B, Training(seq_len=1024), plan)
    states = foreach["weights"] + foreach["gradients"] + foreach["optimizer"]
    temp = total_params(L8B) * 4.0
    assert foreach["allocated"] == pytest.approx(states + temp)
    assert fused["allocated"] < foreach["allocated"]


def test_quantizing_on_the_device_peaks_at_the_16_bit_model() -> None:
    training = Training(
        seq_len=512, finetune="qlora", lora_targets=("q", "v"), master_weights=False
    )
    plan = Plan(micro_batch=1, global_batch=1)
    streamed = plan_memory(L8B, training, plan)
    built = plan_memory(L8B, dataclasses.replace(training, load_16bit_on_device=True), plan)
    assert streamed["allocated"] < 0.75 * total_params(L8B) * 2
    assert built["allocated"] == pytest.approx(total_params(L8B) * 2, rel=0.01)


@pytest.mark.parametrize(("model", "extra"), [("llama3.1-8b", True), ("bert-large", False)])
def test_eager_modules_keep_more_only_where_kernels_are_python(model: str, extra: bool) -> None:
    """Eager RMSNorm and SiLU-gating keep fp32 upcasts and the SiLU output; nn.LayerNorm and
    nn.GELU are native kernels that keep the same as fused ones."""
    spec = catalog.model(model)
    batch = PlanBatch.from_plans([Plan(micro_batch=1, global_batch=1)])
    fused = stage_activations(spec, Training(seq_len=512), batch, "first").stored[0]
    eager = stage_activations(
        spec, Training(seq_len=512, fused_elementwise=False), batch, "first"
    ).stored[0]
    assert bool(eager > fused) is extra
    assert eager >= fused


def test_transformer_engine_caches_fp8_weights_and_transposes() -> None:
    """Two FP8 bytes per linear weight on the GPU (the copy and its transpose), split by TP;
    nothing under bf16 or ZeRO-3."""
    plan = Plan(tp=8, pp=2, dp=4, micro_batch=1, global_batch=32, recompute="full")
    fp8 = Training(seq_len=4096, precision="fp8")
    base = plan_memory(L8B, fp8, plan)
    cached = plan_memory(L8B, dataclasses.replace(fp8, fp8_weight_cache=True), plan)
    linear = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)
    assert cached["weights"] - base["weights"] == pytest.approx(linear / 2 / 8 * 2)
    sharded = dataclasses.replace(plan, zero=3)
    assert plan_memory(L8B, dataclasses.replace(fp8, fp8_weight_cache=True), sharded)[
        "weights"
    ] == pytest.approx(plan_memory(L8B, fp8, sharded)["weights"])


def test_dtensor_sequence_parallelism_keeps_the_gathered_linear_inputs() -> None:
    """torchtitan's TP keeps the all-gathered q/k/v and gate/up inputs at full sequence length
    (two h-wide 16-bit tensors per token) where Megatron keeps a sequence shard."""
    plan = Plan(tp=8, micro_batch=1, global_batch=1, recompute="none")
    batch = PlanBatch.from_plans([plan])
    megatron = stage_activations(L8B, Training(seq_len=4096), batch, "first")
    dtensor = stage_activations(
        L8B, Training(seq_len=4096, sp_saves_gathered_input=True), batch, "first"
    )
    tokens, layers, eh = 4096, 32, 2 * 4096
    assert float(dtensor.stored[0] - megatron.stored[0]) == pytest.approx(
        tokens * layers * 2 * eh * (1 - 1 / 8)
    )
    single = PlanBatch.from_plans([dataclasses.replace(plan, tp=1)])
    assert float(
        stage_activations(
            L8B, Training(seq_len=4096, sp_saves_gathered_input=True), single, "first"
        ).stored[0]
    ) == pytest.approx(
        float(stage_activations(L8B, Training(seq_len=4096), single, "first").stored[0])
    )
