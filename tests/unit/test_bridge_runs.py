"""Megatron-Bridge's published pre-training runs (a held-out training source): the transcription
checks itself, every row is predicted or refused with its reason, and each mapping rule of
``gpuscale.validation.bridge_runs`` does what its docstring says."""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict

import pytest

from gpuscale.api import estimate
from gpuscale.validation import bridge_runs as bridge
from tests.conftest import validation_data


def _rows() -> list[dict[str, str]]:
    return bridge.load(validation_data() / bridge.FILE)


def _price(case: bridge.BridgeCase) -> tuple[float, bool]:
    answer = estimate(case.model_arg, **case.kwargs)
    return answer.tokens_per_s_per_gpu, answer.fits


def _row(row_id: str) -> dict[str, str]:
    return next(r for r in _rows() if r["id"] == row_id)


def test_each_row_is_one_published_cell() -> None:
    rows = _rows()
    assert len(rows) == 282
    assert len({r["id"] for r in rows}) == len(rows)
    # Megatron's model TFLOP/s over tokens/s is the model's FLOPs per token: one value per
    # model, sequence and MTP setting in every release and system. A digit read wrong in either
    # column moves its row off it. The gpt-oss rows of 26.06 on count 1.2x the FLOPs per token
    # of earlier releases (same tokens/s: the counter changed, not the run).
    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for r in rows:
        later_oss = r["table_model"].startswith("GPT OSS") and r["release"] >= "26.06"
        key = (
            r["table_model"].split(" (")[0],
            r["seq"],
            str("w/o MTP" in r["table_model"]),
            str(later_oss),
        )
        groups[key].append(float(r["model_tflops_per_gpu"]) / float(r["tokens_per_s_per_gpu"]))
    for key, ratios in groups.items():
        mid = statistics.median(ratios)
        assert all(abs(x / mid - 1) < 0.025 for x in ratios), key


def test_every_row_is_predicted_or_refused_with_a_reason() -> None:
    rows = _rows()
    results, skipped = bridge.evaluate(rows, _price)
    assert len(results) + len(skipped) == len(rows)
    assert len(results) == 218
    # Expert parallelism folded over the tensor-parallel ranks (EP 32 with TP 2 and dp 16) runs.
    folded = {
        r.case.id
        for r in results
        if r.case.kwargs["ep"]
        > r.case.kwargs["gpus"] // (r.case.kwargs["tp"] * r.case.kwargs["pp"])
    }
    assert "bridge-26.04-h100-qwen3-235b-a22b-fp8-256" in folded
    assert all(why for _, why in skipped)
    refused = {i for i, _ in skipped}
    # Hybrid Mamba models, Muon and a model outside the catalog are the only model refusals.
    nemotron = [r["id"] for r in rows if r["table_model"].startswith("Nemotron")]
    assert set(nemotron) <= refused
    assert all(r.predicted > 0 and r.case.measured > 0 for r in results)


def test_mapping_rules() -> None:
    assert bridge.precision_of("FP8-CS") == "fp8"
    assert bridge.precision_of("FP8") == "fp8"
    assert bridge.precision_of("MXFP8") == "mxfp8"
    assert bridge.precision_of("FP8-MX") == "mxfp8"
    assert bridge.precision_of("NVFP4") == "nvfp4"
    assert bridge.precision_of("BF16") == "bf16"
    with pytest.raises(LookupError):
        bridge.precision_of("FP16")

    # DeepSeek-V3 with its MTP module: 62 layers, 64 slots with embedding and loss over pp4 x vp4.
    ds = bridge.to_case(_row("bridge-26.08-gb200-deepseekv3-mxfp8-256"))
    assert ds.model_arg.num_layers == 62 and ds.moe
    assert ds.kwargs["embedding_as_layer"] and ds.kwargs["loss_as_layer"]
    assert ds.kwargs["gpus_per_node"] == bridge.NVL72_EP_DOMAIN
    assert ds.kwargs["zero"] == 1 and ds.kwargs["inter"] == "ib-ndr400"
    # Without it the 25.11 layouts (pp x vp of 8 to 32 over 61 layers) are refused, not guessed.
    with pytest.raises(LookupError, match="61 layers"):
        bridge.to_case(_row("bridge-25.11-gb300-deepseekv3-w-o-mtp-bf16-256"))

    # An 8-GPU GB200 job is one NVLink domain of 8; FSDP columns map to ZeRO-3.
    small = bridge.to_case(_row("bridge-26.08-gb200-qwen3-30b-a3b-mxfp8-8"))
    assert small.kwargs["gpus_per_node"] == 8
    fsdp = bridge.to_case(_row("bridge-26.04.01-gb300-llama3-70b-fp8-64"))
    assert fsdp.kwargs["zero"] == 3 and fsdp.kwargs["inter"] == "ib-xdr800"
    assert not fsdp.moe


def test_refusals_name_the_reason() -> None:
    with pytest.raises(LookupError, match="Muon"):
        bridge.to_case(_row("bridge-26.06-gb300-kimi-k2-mxfp8-256"))
    with pytest.raises(LookupError, match="Mamba"):
        bridge.to_case(_row("bridge-26.08-gb300-nemotron-3-nano-mxfp8-8"))


def test_summary_of_known_errors() -> None:
    case = bridge.to_case(_row("bridge-26.08-gb200-deepseekv3-mxfp8-256"))
    results = [
        bridge.BridgeResult(case, case.measured * 1.1, True),
        bridge.BridgeResult(case, case.measured * 0.7, True),
    ]
    s = bridge.summarize(results)
    assert s.n == 2
    assert s.mape == pytest.approx(0.2)
    assert s.median_bias == pytest.approx(-0.1)
    assert s.within_20 == pytest.approx(0.5)


def test_file_is_plain_csv_with_its_columns() -> None:
    with (validation_data() / bridge.FILE).open(newline="") as fh:
        header = next(csv.reader(fh))
    for column in (
        "release",
        "system",
        "table_model",
        "precision",
        "n_gpus",
        "tp",
        "pp",
        "ep",
        "tokens_per_s_per_gpu",
        "model_tflops_per_gpu",
        "file",
        "line",
    ):
        assert column in header


def _settings() -> dict[str, dict[str, str]]:
    return bridge.load_settings(validation_data() / bridge.SETTINGS_FILE)


def test_every_row_has_its_recipe_read_at_a_commit() -> None:
    settings = _settings()
    assert set(settings) == {r["id"] for r in _rows()}
    for s in settings.values():
        assert len(s["commit"]) == 12 and s["config_file"] and int(s["config_line"]) > 0
        assert s["layout_check"] == "matches" or s["layout_check"].startswith("differs: ")
    assert sum(s["layout_check"] != "matches" for s in settings.values()) == 28


def _recipe(**over: str) -> dict[str, str]:
    base = {
        "cross_entropy_loss_fusion": "default:True",
        "cross_entropy_fusion_impl": "te",
        "layout_check": "matches",
        "recompute_granularity": "default:None",
        "recompute_method": "default:None",
        "recompute_num_layers": "default:None",
        "recompute_modules": "default:core_attn",
        "cpu_offloading": "default:False",
        "cpu_offloading_num_layers": "default:0",
        "cpu_offloading_activations": "default:True",
        "fine_grained_activation_offloading": "default:False",
        "offload_modules": "default:[]",
        "moe_paged_stash": "",
        "moe_a2a_overlap": "False",
    }
    return {**base, **over}


@pytest.mark.parametrize(
    ("over", "options", "unchecked"),
    [
        ({}, {"loss": "te"}, ""),
        ({"cross_entropy_fusion_impl": "native"}, {}, ""),
        (
            {"recompute_granularity": "selective", "recompute_modules": "mla_up_proj mlp"},
            {"loss": "te", "recompute": "selective", "recompute_modules": "mla_up_proj,mlp"},
            "",
        ),
        (
            {"recompute_granularity": "selective", "recompute_modules": "None"},
            {"loss": "te", "recompute": "selective", "recompute_modules": "core_attn"},
            "",
        ),
        (
            {"recompute_granularity": "selective", "recompute_modules": "[]"},
            {"loss": "te", "recompute": "selective", "recompute_modules": "none"},
            "",
        ),
        (
            {
                "recompute_granularity": "full",
                "recompute_method": "uniform",
                "recompute_num_layers": "1",
            },
            {"loss": "te", "recompute": "full"},
            "",
        ),
        (
            {
                "recompute_granularity": "full",
                "recompute_method": "block",
                "recompute_num_layers": "5",
            },
            {"loss": "te"},
            "full recompute of 5 layers a stage (method block) (not priced)",
        ),
        (
            {"cpu_offloading": "True", "cpu_offloading_num_layers": "40"},
            {"loss": "te", "activation_offload_layers": 40},
            "",
        ),
        (
            {
                "cpu_offloading": "True",
                "cpu_offloading_num_layers": "40",
                "cpu_offloading_activations": "False",
            },
            {"loss": "te"},
            "CPU offload without its activations (not priced)",
        ),
        ({"moe_paged_stash": "True"}, {"loss": "te"}, "MoE paged stash (not priced)"),
        ({"moe_a2a_overlap": "True"}, {"loss": "te", "ep_overlap": True}, ""),
        (
            {"layout_check": "differs: pp:4vs2", "recompute_granularity": "selective"},
            {"loss": "te"},
            "recipe at the release's commit has another layout (differs: pp:4vs2)",
        ),
    ],
)
def test_recipe_settings_become_arguments_or_a_reason_not_to_check_memory(
    over: dict[str, str], options: dict[str, str], unchecked: str
) -> None:
    assert bridge.recipe_options(_recipe(**over)) == (options, unchecked)


def test_recipe_settings_reach_the_case() -> None:
    settings = _settings()
    row = _row("bridge-26.02.01-b200-gpt-oss-120b-bf16-64")
    case = bridge.to_case(row, settings[row["id"]])
    # scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py @8301abfc0d56: 110
    assert case.kwargs["recompute"] == "selective"
    assert case.kwargs["recompute_modules"] == "layernorm,moe_act"
    assert case.kwargs["loss"] == "te" and case.kwargs["grad_reduce_in_bf16"]
    assert case.memory_unchecked == ""
    offloaded = _row("bridge-26.04-gb200-llama3-70b-fp8-64")
    case = bridge.to_case(offloaded, settings[offloaded["id"]])
    # scripts/performance/configs/llama/llama3_workload_base_configs.py:241 @f171d7d30152
    assert case.kwargs["activation_offload_layers"] == 40 and case.memory_unchecked == ""
    assert bridge.to_case(offloaded).memory_unchecked == "no recipe settings read"
    overlapped = _row("bridge-26.06-gb300-qwen3-30b-a3b-mxfp8-8")
    case = bridge.to_case(overlapped, settings[overlapped["id"]])
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1, qwen3_workload_base_configs.py @a0faf081e73b
    assert case.kwargs["ep_overlap"]
