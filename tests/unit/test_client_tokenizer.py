"""The prompt lengths the server counted where InferenceX's client tokenized on transformers 5
(validation.client_tokenizer), and the replay of the client's sampling that computed them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscale.api import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.client_tokenizer import (
    CLIENT_TOKENS_FILE,
    default_server_prompts,
    load_server_prompts,
    mismatched,
    server_prompt_lengths,
)
from gpuscale.validation.inferencex_api import API_FILE, load_records, read_record
from gpuscale.validation.inferencex_tables import InferenceXTables
from tests.benchmark_scripts import load_benchmark

SERVING = DATA_DIR / "serving"
TABLE = load_server_prompts(SERVING / CLIENT_TOKENS_FILE)
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "client_tokenizer_mismatch.py"


def _records(**match: str) -> list[dict[str, str]]:
    return [r for r in load_records(SERVING / API_FILE) if all(r[k] == v for k, v in match.items())]


B300_FP4_1K = _records(
    hardware="b300", framework="sglang", precision="fp4", isl="1024", conc="4", decode_tp="4"
)[0]


def test_only_the_transformers_5_image_before_the_hub_id_fix() -> None:
    assert B300_FP4_1K["image"] == "lmsysorg/sglang:v0.5.10.post1-cu130"
    assert mismatched(B300_FP4_1K)
    assert not mismatched({**B300_FP4_1K, "date": "2026-05-15"})  # 5fe6d56ee
    assert not mismatched({**B300_FP4_1K, "image": "lmsysorg/sglang:v0.5.9-cu130"})
    assert not mismatched({**B300_FP4_1K, "disagg": "true", "is_multinode": "true"})
    # No record on file from another image is read as mismatched.
    flagged = {r["image"] for r in load_records(SERVING / API_FILE) if mismatched(r)}
    assert flagged == {"lmsysorg/sglang:v0.5.10.post1-cu130"}


def test_table_holds_the_server_count_about_five_times_the_client() -> None:
    assert tuple(TABLE) == default_server_prompts()
    for line in TABLE:
        client, server = int(line["client_mean"]), int(line["server_mean"])
        # The client trims to its own count: the mean of uniform [0.8 L, L].
        assert client == pytest.approx(0.9 * int(line["isl"]), rel=0.01)
        assert 4.5 < server / client < 5.5


def test_server_lengths_of_a_b300_record_with_and_without_chat_template() -> None:
    kw, note, refused = server_prompt_lengths(B300_FP4_1K, TABLE)
    assert not refused and "transformers 5.3.0" in note
    line = next(t for t in TABLE if t["isl"] == "1024" and t["chat_template"] == "false")
    assert kw["input_len"] == int(line["server_mean"])
    assert kw["input_cv"] == pytest.approx(int(line["server_std"]) / int(line["server_mean"]))
    mtp = {**B300_FP4_1K, "spec_method": "mtp", "precision": "fp8", "isl": "8192"}
    line = next(t for t in TABLE if t["isl"] == "8192" and t["chat_template"] == "true")
    assert server_prompt_lengths(mtp, TABLE)[0]["input_len"] == int(line["server_mean"])


def test_a_missing_line_refuses_the_record_in_one_line() -> None:
    kw, _, refused = server_prompt_lengths({**B300_FP4_1K, "isl": "2048"}, TABLE)
    assert kw == {} and refused.startswith("not expressible:") and "ISL 2048" in refused
    row = read_record(B300_FP4_1K, InferenceXTables(server_prompts=[]))
    assert not row.expressible and CLIENT_TOKENS_FILE in row.reason


def test_record_is_predicted_at_the_server_prompts_and_ttft_grows() -> None:
    row = read_record(B300_FP4_1K)
    assert row.expressible
    assert row.kwargs["input_len"] > 4 * int(B300_FP4_1K["isl"])
    assert any(CLIENT_TOKENS_FILE in a for a in row.assumptions)
    client = {**row.kwargs, "input_len": 922, "input_cv": 0.064}
    at_server = infer(row.model, **row.kwargs).to_dict()["options"][0]
    at_client = infer(row.model, **client).to_dict()["options"][0]
    # Five times the prompt: a longer prefill, and a prediction nearer the measured TTFT.
    measured = row.measured["ttft_ms_p50"]
    assert at_server["ttft_ms_p50"] > at_client["ttft_ms_p50"]
    assert abs(at_server["ttft_ms_p50"] - measured) < abs(at_client["ttft_ms_p50"] - measured)


class _CharTokenizer:
    """A tokenizer whose ids are characters: decode and encode are inverse, as in a client and
    server that agree."""

    vocab_size = 26

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + i) for i in ids)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) - ord("a") for c in text]


def test_replayed_client_draws_uniform_lengths_and_agrees_with_itself() -> None:
    bench = load_benchmark(SCRIPT, "client_tokenizer_mismatch")
    prompts = bench.client_prompts(_CharTokenizer(), 1000, 300, False, np.random.RandomState(0))
    lens = [len(p) for p in prompts]
    assert min(lens) >= 800 and max(lens) <= 1000
    assert np.mean(lens) == pytest.approx(900, rel=0.02)
