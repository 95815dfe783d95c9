"""What ``gpuscale.api`` decides for ``cluster`` that the CLI used to: the ``--degrade`` text,
and a node loss that has no bandwidth factor."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale.api.cluster import cluster_adapt, parse_degradation
from gpuscale.errors import InputError


def test_degradation_text_is_read_field_by_field() -> None:
    d = parse_degradation("core:1:0.25:3600:7200")
    assert (d.level, d.index, d.factor, d.start_s, d.end_s) == ("core", 1, 0.25, 3600.0, 7200.0)


@pytest.mark.parametrize("text", ["core", "core:0:0.5:1", "core:x:0.5:1:2", "core:0:half:1:2"])
def test_malformed_degradation_is_an_error_on_degrade(text: str) -> None:
    with pytest.raises(InputError, match="--degrade") as err:
        parse_degradation(text)
    assert err.value.field == "degrade"


@given(st.text(max_size=40))
def test_any_degradation_text_parses_or_names_the_flag(text: str) -> None:
    try:
        parse_degradation(text)
    except InputError as exc:
        assert exc.field == "degrade"


def test_node_loss_has_no_bandwidth_factor() -> None:
    result = cluster_adapt("llama3.1-8b", gpu="h100-sxm", gpus=16, event="node-loss", factor=0.1)
    assert result.factor == 1.0 and result.to_dict()["factor"] == 1.0


def test_link_event_keeps_the_cli_default_factor() -> None:
    result = cluster_adapt("llama3.1-8b", gpu="h100-sxm", gpus=16, event="inter")
    assert result.factor == 0.25
