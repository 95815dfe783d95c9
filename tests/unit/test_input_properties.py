"""Properties of the paths bad input takes that had none: any numbers a user can give
``gpuscale infer`` (library and CLI parsers), any config.json the parser accepts then priced by
estimate and infer, and profile YAML of the right shape with arbitrary numbers. Each answers
with finite figures or refuses with one :class:`InputError` line, never another exception."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.api import estimate, infer, infer_static
from gpuscale.cli.infer import _engine_options, _loads, _single
from gpuscale.errors import InputError

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.0, max_value=10.0),
    st.integers(-3, 10**6),
)
"""Floats a user may type (the API receives them unchecked, inf and nan included), and sane
ones, so that some draws get past the first check."""


def _finite_figures(doc: Any) -> None:
    """Every number of a result document is finite (no inf/nan reaches a table or JSON)."""
    if isinstance(doc, dict):
        for value in doc.values():
            _finite_figures(value)
    elif isinstance(doc, list):
        for value in doc:
            _finite_figures(value)
    elif isinstance(doc, float):
        assert math.isfinite(doc), doc


def _one_line(exc: InputError) -> None:
    assert str(exc) and "\n" not in str(exc), str(exc)


# Mostly one load (so that most draws reach the model), sometimes none, both or a bad one.
ONE_LOAD = st.one_of(
    st.fixed_dictionaries({"concurrency": st.integers(1, 2048)}),
    st.fixed_dictionaries({"request_rate": st.floats(0.01, 1000.0)}),
    st.fixed_dictionaries(
        {}, optional={"concurrency": st.integers(-2, 8), "request_rate": NUMBERS}
    ),
)
LOAD = st.tuples(
    ONE_LOAD,
    st.fixed_dictionaries(
        {
            "input_len": st.integers(1, 32_768) | st.integers(-2, 140_000),
            "output_len": st.integers(1, 4096) | st.integers(-2, 4096),
        },
        optional={
            "num_requests": st.integers(-2, 5000),
            "prefix_hit": NUMBERS,
            "input_cv": NUMBERS,
            "output_cv": NUMBERS,
            "tp": st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64]),
            "pp": st.integers(0, 40),
            "replicas": st.integers(0, 4),
        },
    ),
).map(lambda pair: {**pair[0], **pair[1]})


@pytest.mark.parametrize(
    "kw",
    [
        # regression cases found by the property below go here
        {"input_len": 512, "output_len": 256, "concurrency": 8, "input_cv": 0.5},
        # arrivals over 4.5e315 s overflowed to inf: TTFT nan (now refused, at most 10^9 s)
        {"request_rate": 2.2250738585e-313, "input_len": 1, "output_len": 453},
        {"request_rate": math.inf, "input_len": 1, "output_len": 453},
    ],
)
def test_serving_numbers_found_by_the_property(kw: dict[str, Any]) -> None:
    _serve(kw)


def _serve(kw: dict[str, Any]) -> None:
    try:
        result = infer("llama3.1-8b", gpu="h100-sxm", **kw)
    except InputError as exc:
        _one_line(exc)
        return
    _finite_figures(result.to_dict())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LOAD)
def test_any_serving_numbers_answer_finite_or_refuse_in_one_line(kw: dict[str, Any]) -> None:
    _serve(kw)


# Found by the property: a typed newline came back inside the error, which then spanned lines.
@pytest.mark.parametrize("text", ["\n", "1,\n", "99999999999999999999\n", "4\n,8"])
def test_cli_number_texts_found_by_the_property(text: str) -> None:
    _cli_numbers(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=24))
def test_cli_number_lists_parse_or_refuse_in_one_line(text: str) -> None:
    _cli_numbers(text)


def _cli_numbers(text: str) -> None:
    for parse in (_loads, _single):
        try:
            out = parse(text)
        except InputError as exc:
            _one_line(exc)
            continue
        values = out if isinstance(out, list) else [out]
        assert all(isinstance(v, int) and abs(v) <= 2**53 for v in values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=3))
def test_engine_options_text_parses_or_refuses_in_one_line(texts: list[str]) -> None:
    try:
        out = _engine_options(tuple(texts))
    except InputError as exc:
        _one_line(exc)
        return
    try:
        infer("llama3.1-8b", gpu="h100-sxm", concurrency=4, engine_options=out)
    except InputError as exc:
        _one_line(exc)


def _dim(low: int, high: int) -> st.SearchStrategy[int]:
    """Mostly a plausible size, sometimes the parser's extremes (1 and 2^24)."""
    return st.integers(low, high) | st.sampled_from([1, 2, 3, 1 << 24])


CONFIG = st.fixed_dictionaries(
    {
        "model_type": st.sampled_from(["llama", "mistral", "qwen2", "mixtral", "qwen3_moe"]),
        "hidden_size": _dim(8, 8192),
        "num_attention_heads": _dim(1, 128),
        "num_hidden_layers": _dim(1, 96),
        "vocab_size": _dim(2, 262_144),
        "intermediate_size": _dim(1, 32_768),
    },
    optional={
        "num_key_value_heads": _dim(1, 128),
        "head_dim": _dim(1, 256),
        "max_position_embeddings": _dim(1, 1 << 20),
        "num_local_experts": _dim(1, 256),
        "num_experts": _dim(1, 256),
        "num_experts_per_tok": _dim(1, 16),
        "moe_intermediate_size": _dim(1, 4096),
        "sliding_window": st.none() | _dim(1, 1 << 17),
        "tie_word_embeddings": st.booleans(),
    },
)
"""Configs the parser accepts (each value in range) whose numbers need not fit together."""


def _priced(cfg: dict[str, Any]) -> None:
    from gpuscale.catalog.hf_config import model_from_config

    try:
        spec = model_from_config(cfg, "fuzz")
    except InputError as exc:
        _one_line(exc)
        return
    for run in (
        lambda: estimate(spec, gpu="h100-sxm", gpus=8, seq=min(2048, spec.max_seq_len)),
        lambda: infer(spec, gpu="h100-sxm", concurrency=4, input_len=1, output_len=1),
        lambda: infer_static(spec, gpu="h100-sxm", tp=[1], input_len=1, output_len=1),
    ):
        try:
            result = run()
        except InputError as exc:
            _one_line(exc)
            continue
        _finite_figures(result.to_dict())


@pytest.mark.parametrize(
    "cfg",
    [
        # regression cases found by the property below go here
        {
            "model_type": "llama",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "vocab_size": 100,
            "intermediate_size": 128,
        },
    ],
)
def test_configs_found_by_the_property(cfg: dict[str, Any]) -> None:
    _priced(cfg)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONFIG)
def test_an_accepted_config_is_priced_or_refused_in_one_line(cfg: dict[str, Any]) -> None:
    _priced(cfg)


VALUE = st.floats(allow_nan=True, allow_infinity=True) | st.floats(0.0, 1.0) | st.integers(-1, 10)
CONSTANTS = (
    "kernel_launch_us",
    "decode_step_overhead_us",
    "step_overhead_s",
    "host_memory_gb_per_s",
    "comm_compute_interference",
    "memory_allocator_fragmentation",
    "memory_headroom_fraction",
    "attention_backward_relative_efficiency",
)
PROFILE = st.fixed_dictionaries(
    {},
    optional={
        "hbm_efficiency": VALUE,
        "attention_efficiency": st.fixed_dictionaries({"hopper": VALUE}),
        "gemm": st.fixed_dictionaries(
            {
                "hopper": st.fixed_dictionaries(
                    {
                        "flops": st.lists(st.floats(1.0, 1e15), min_size=1, max_size=3).map(sorted),
                        "efficiency": st.lists(VALUE, min_size=1, max_size=3),
                    }
                )
            }
        ),
        "links": st.dictionaries(
            st.sampled_from(["nvlink", "infiniband"]),
            st.fixed_dictionaries({"bandwidth_efficiency": VALUE}),
            max_size=2,
        ),
        "overlap": st.dictionaries(st.sampled_from(["dp", "tp", "pp"]), VALUE, max_size=2),
        "constants": st.dictionaries(st.sampled_from(CONSTANTS), VALUE, max_size=3),
    },
)
"""Calibration overlays of the right shape with any numbers in them."""


def _profiled(tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]) -> None:
    import yaml

    from gpuscale.costmodel.profile import load_profile_for

    path = tmp_path_factory.mktemp("profile") / "p.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, **data}))
    try:
        load_profile_for("generic", str(path))
    except InputError as exc:
        _one_line(exc)
        return
    for run in (
        lambda: estimate("llama3.1-8b", gpu="h100-sxm", gpus=16, tp=2, profile=str(path)),
        lambda: infer("llama3.1-8b", gpu="h100-sxm", concurrency=8, tp=2, profile=str(path)),
        lambda: infer_static("llama3.1-8b", gpu="h100-sxm", tp=[2], profile=str(path)),
    ):
        try:
            result = run()
        except InputError as exc:
            _one_line(exc)
            continue
        _finite_figures(result.to_dict())


@pytest.mark.parametrize(
    "data",
    [
        # regression cases found by the property below go here
        {"hbm_efficiency": 0.5, "overlap": {"tp": 1.0}},
        # a subnormal efficiency passed the (0, 1] check; the serving model divided by zero
        {"hbm_efficiency": 2.2250738585e-313},
        {"hbm_efficiency": 0.0078125},
        {"links": {"nvlink": {"bandwidth_efficiency": 5e-324}}},
    ],
)
def test_profiles_found_by_the_property(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]
) -> None:
    _profiled(tmp_path_factory, data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PROFILE)
def test_a_loaded_profile_prices_finite_or_refuses_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]
) -> None:
    _profiled(tmp_path_factory, data)
