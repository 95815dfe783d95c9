"""Bad input the CLI fuzz of 2026-12-04 left (docs/investigations/reviews.md, "A bad-input fuzz
of the whole CLI"): refused in one line by the rule's one place in the library."""

from __future__ import annotations

import pytest

from gpuscale.api.serving import infer
from gpuscale.errors import InputError

QWEN = "Qwen/Qwen3-235B-A22B-FP8"
LOAD = dict(gpu="h200-sxm", input_len=1000, output_len=100, concurrency=8)


@pytest.mark.parametrize(
    ("model", "kw", "why"),
    [
        ("llama3.1-8b", dict(tp=2), "llama3.1-8b has no experts"),
        (QWEN, dict(tp=2, weights="fp8"), "its weights are fp8, not fp8_block"),
        (QWEN, dict(tp=8), r"its MoE TP \(tp / ep\) 8 is 8 or more"),
        (QWEN, dict(tp=4, gpu="a100-sxm-80gb"), "a100-sxm-80gb has compute capability 8.0"),
        (
            QWEN,
            dict(prefill_workers=1, decode_workers=1, prefill_tp=8, decode_tp=8),
            r"every pool's MoE TP \(tp / ep: 8 and 8\) is 8 or more",
        ),
    ],
)
def test_deepgemm_worst_case_refused_where_the_kernel_does_not_run(
    model: str, kw: dict[str, object], why: str
) -> None:
    args = {**LOAD, **kw}
    with pytest.raises(InputError, match=f"deepgemm_moe_worst_case .*; {why}: leave it out"):
        infer(model, engine="vllm", engine_options={"deepgemm_moe_worst_case": True}, **args)
    # Off, the option says nothing to refuse.
    infer(model, engine="vllm", engine_options={"deepgemm_moe_worst_case": False}, **args)


def test_deepgemm_worst_case_taken_where_one_pool_runs_it() -> None:
    # The prefill workers below MoE TP 8 run DeepGEMM's MoE; the decode workers at 8 do not.
    kw = dict(prefill_workers=1, decode_workers=1, prefill_tp=4, decode_tp=8)
    on = infer(QWEN, engine_options={"deepgemm_moe_worst_case": True}, **LOAD, **kw)
    off = infer(QWEN, **LOAD, **kw)
    assert on.to_dict()["options"][0]["ttft_ms"] > off.to_dict()["options"][0]["ttft_ms"]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            {"max_num_batched_tokens": 4096, "max_num_seqs": 8192},
            "max_num_batched_tokens 4096 is below max_num_seqs 8192; vLLM refuses to start",
        ),
        (
            {"max_num_seqs": 100_000},
            "max_num_batched_tokens 8192 (vLLM's default on h100-sxm) is below max_num_seqs",
        ),
    ],
)
def test_vllm_token_budget_below_its_running_cap_is_refused(
    options: dict[str, int], words: str
) -> None:
    kw = dict(gpu="h100-sxm", tp=2, concurrency=8)
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")) as exc:
        infer("llama3.1-8b", engine="vllm", engine_options=options, **kw)
    assert exc.value.field == "engine_options"


def test_a_vllm_budget_below_the_default_cap_lowers_the_cap() -> None:
    # vLLM's EngineArgs._set_default_args: max_num_seqs = min(default, max_num_batched_tokens)
    # when the cap is left to its default; refused only when both are stated.
    kw = dict(gpu="h100-sxm", tp=2, concurrency=8)
    low = infer("llama3.1-8b", engine="vllm", engine_options={"max_num_batched_tokens": 64}, **kw)
    same = infer(
        "llama3.1-8b",
        engine="vllm",
        engine_options={"max_num_batched_tokens": 64, "max_num_seqs": 64},
        **kw,
    )
    assert low.to_dict()["options"] == same.to_dict()["options"]


def test_vllm_token_budget_equal_to_the_cap_and_other_engines_pass() -> None:
    kw = dict(gpu="h100-sxm", tp=2, concurrency=8)
    infer("llama3.1-8b", engine_options={"max_num_batched_tokens": 32, "max_num_seqs": 32}, **kw)
    # SGLang's chunk and running cap are separate limits (no such start-up check).
    opts = {"max_num_batched_tokens": 64, "max_num_seqs": 128}
    infer("llama3.1-8b", engine="sglang", engine_options=opts, **kw)


def test_part_filled_node_of_a_derived_gpu_count_names_the_degrees() -> None:
    from gpuscale.api import estimate

    with pytest.raises(InputError, match=r"^tp x pp x dp x cp = 4 x 1 x 1 x 1 = 4 GPUs must") as e:
        estimate("llama3.1-70b", gpu="h100-sxm", gpus_per_node=3, tp=4, pp=1, dp=1, mbs=1, seq=4096)
    assert "--gpus " not in str(e.value) and e.value.field is None
    # A typed count keeps its own name.
    with pytest.raises(InputError, match=r"^--gpus \(4\) must be a multiple") as e:
        estimate("llama3.1-70b", gpu="h100-sxm", gpus_per_node=3, gpus=4, tp=4, mbs=1, seq=4096)
    assert e.value.field == "gpus"


def test_static_table_names_the_tp_typed_and_leaves_part_filled_defaults_out() -> None:
    from gpuscale.api.serving_static import infer_static

    with pytest.raises(
        InputError, match=r"^--tp 4 \(4 GPUs, one tensor-parallel group\) must"
    ) as e:
        infer_static("llama3.1-70b", gpu="h100-sxm", gpus_per_node=3, tp="2,4")
    assert e.value.field == "tp"
    default = infer_static("llama3.1-70b", gpu="h100-sxm", gpus_per_node=3)
    assert [o["tp"] for o in default.to_dict()["options"]] == [1, 2]
    whole = infer_static("llama3.1-70b", gpu="h100-sxm", gpus_per_node=4)
    assert [o["tp"] for o in whole.to_dict()["options"]] == [1, 2, 4, 8]


@pytest.mark.parametrize("text", ["٣", "８", "1_000", "1_0.5", "٣.5", "١e3"])
def test_typed_numbers_take_ascii_digits_only(text: str) -> None:
    from gpuscale.errors import parse_float, parse_int

    for parse in (parse_int, parse_float):
        with pytest.raises(InputError, match="ASCII digits 0-9, without '_' separators"):
            parse(text)


def test_typed_numbers_read_as_before() -> None:
    from gpuscale.errors import parse_float, parse_int

    assert parse_int(" 12 ") == 12 and parse_int("-3") == -3 and parse_int("+4") == 4
    assert parse_float("1e3") == 1000.0 and parse_float(".5") == 0.5
    for bad, parse in (("abc", parse_int), ("1.5", parse_int), ("x", parse_float)):
        with pytest.raises(InputError, match="is not a"):
            parse(bad)


def test_inline_plan_and_static_tp_text_take_ascii_digits_only() -> None:
    from gpuscale.api.measure import _converted
    from gpuscale.api.serving_static import infer_static

    with pytest.raises(InputError, match="gpus='٨': not an integer; accepted: an integer"):
        _converted("gpus", "٨", "int | None")
    with pytest.raises(InputError, match=r"--tp '1_0' must be comma-separated integers") as e:
        infer_static("llama3.1-8b", gpu="h100-sxm", tp="1_0")
    assert e.value.field == "tp"


@pytest.mark.parametrize(("row", "fields"), [("5,2,100,extra", 4), ("5,2", 2)])
def test_trace_rows_with_other_field_counts_are_refused(tmp_path, row: str, fields: int) -> None:  # type: ignore[no-untyped-def]
    from gpuscale.cluster.trace import read_trace

    path = tmp_path / "t.csv"
    path.write_text(f"submit_s,gpus,duration_s\n0,1,100\n{row}\n")
    with pytest.raises(InputError, match=f"line 3: {fields} fields, the header has 3 columns") as e:
        read_trace(path)
    assert "(submit_s, gpus, duration_s)" in str(e.value) and e.value.field == "trace"
    # A quoted field over two lines: the line named is where the row ends.
    path.write_text('job_id,submit_s,gpus,duration_s\n"a\nb",0,1,100\nc,1,1,100,x\n')
    with pytest.raises(InputError, match="line 4: 5 fields"):
        read_trace(path)


V100 = dict(gpu="v100-sxm2-32gb", tp=2, concurrency=4)


@pytest.mark.parametrize("gpu", ["v100-sxm2-32gb", "t4"])
def test_stated_bf16_on_a_gpu_without_it_is_refused(gpu: str) -> None:
    from gpuscale.api.serving_search import search
    from gpuscale.api.serving_static import infer_static

    words = f"--weights bf16: {gpu} .* has no bf16.*accepted: --weights fp16"
    for ask in (
        lambda: infer("llama3.1-8b", **{**V100, "gpu": gpu}, weights="bf16"),
        lambda: infer_static("llama3.1-8b", gpu=gpu, tp=2, weights="bf16"),
        lambda: search("llama3.1-8b", gpu=gpu, gpus=4, weights="bf16"),
    ):
        with pytest.raises(InputError, match=words) as e:
            ask()
        assert e.value.field == "weights"
    with pytest.raises(InputError, match=r"--kv-dtype bf16: .* has no bf16") as e:
        infer("llama3.1-8b", **{**V100, "gpu": gpu}, kv_dtype="bf16")
    assert e.value.field == "kv_dtype"


def test_auto_serves_a_bf16_checkpoint_as_fp16_and_says_so() -> None:
    from gpuscale.api.serving_static import infer_static

    auto = infer("llama3.1-8b", **V100)
    fp16 = infer("llama3.1-8b", **V100, weights="fp16")
    doc = auto.to_dict()
    assert doc["weights"] == "fp16"
    assert doc["options"][0]["tpot_ms"] == fp16.to_dict()["options"][0]["tpot_ms"]
    assert any(
        "the checkpoint's bf16 served as fp16" in n and "v100-sxm2-32gb" in n
        for n in doc["options"][0]["notes"]
    )
    static = infer_static("llama3.1-8b", gpu="v100-sxm2-32gb", tp=2).to_dict()
    assert (static["weights"], static["kv_dtype"]) == ("fp16", "fp16")
    # A GPU with bf16 keeps it.
    assert infer("llama3.1-8b", **{**V100, "gpu": "a100-sxm-80gb"}).to_dict()["weights"] == "bf16"


def test_a_gpu_without_bf16_does_not_offer_it() -> None:
    # the low-precision refusal listed bf16 among the formats a V100 takes, which it refuses
    with pytest.raises(InputError) as exc:
        infer("llama3.1-8b", gpu="v100-sxm2-32gb", engine="vllm", concurrency=8, weights="fp8")
    assert "accepted there: fp16," in str(exc.value) and "bf16" not in str(exc.value)
