"""Bad input and double work the last review found in estimate/infer, checked on the library:
a node larger than the GPU's NVLink fabric, requests in flight past one benchmark run, a plan
too large named by its degree, TP across nodes priced on the fabric, a config.json read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale import catalog
from gpuscale.api import estimate, infer, infer_static
from gpuscale.api.serving import MAX_NUM_REQUESTS, check_requests
from gpuscale.catalog import hf_config
from gpuscale.errors import InputError


@pytest.mark.parametrize(
    ("gpu", "per_node", "most"),
    [("h100-sxm", 16, 8), ("mi300x", 9, 8), ("h200-nvl", 9, 8), ("gb200", 73, 72)],
)
def test_a_node_is_at_most_the_gpus_nvlink_fabric(gpu: str, per_node: int, most: int) -> None:
    with pytest.raises(InputError, match=rf"holds at most {most} GPUs .*accepted: 1 to {most}"):
        catalog.cluster(gpu, 2 * per_node, gpus_per_node=per_node)
    assert catalog.cluster(gpu, 2 * most, gpus_per_node=most).gpus_per_node == most
    assert catalog.cluster(gpu, 4, gpus_per_node=2).gpus_per_node == 2  # smaller boards exist


def test_the_default_node_and_an_8_gpu_server_of_every_gpu_are_accepted() -> None:
    # H200 NVL: 4-card NVLink bridges (its default node), 8 cards a server when asked for.
    for gpu in catalog.gpus():
        catalog.cluster(gpu, 16, gpus_per_node=catalog.DEFAULT_GPUS_PER_NODE)
        catalog.cluster(gpu, 144)


def test_pcie_cards_have_no_fabric_bound() -> None:
    # A PCIe server holds as many cards as it has slots (10 double-width is common).
    assert catalog.cluster("l40s", 20, gpus_per_node=10).gpus_per_node == 10


@pytest.mark.parametrize("value", [0, MAX_NUM_REQUESTS + 1, 10**9])
def test_requests_outside_one_run_are_refused(value: int) -> None:
    with pytest.raises(InputError, match="must be 1 to 1,000,000 requests") as exc:
        check_requests(value, "concurrency")
    assert exc.value.field == "concurrency"
    with pytest.raises(InputError, match="--concurrency must be 1 to 1,000,000"):
        infer("llama3.1-8b", gpu="h100-sxm", concurrency=value)
    with pytest.raises(InputError, match="--batch must be 1 to 1,000,000"):
        infer_static("llama3.1-8b", gpu="h100-sxm", batch=value)


def test_the_largest_run_is_still_priced() -> None:
    check_requests(MAX_NUM_REQUESTS, "concurrency")
    check_requests(None, "decode_batch")


def test_a_plan_too_large_names_its_largest_degree() -> None:
    with pytest.raises(InputError, match=r"^--dp 1000000000000000: tp x pp x dp x cp") as exc:
        estimate("llama3.1-8b", gpu="h100-sxm", dp=10**15)
    assert exc.value.field == "dp"


def test_tp_across_nodes_is_priced_on_the_fabric() -> None:
    # TP 16 on 8-GPU nodes all-reduces over --inter: a 10 GbE fabric slows each token, while TP 8
    # (one node, NVLink only) does not depend on the fabric at all.
    def tpot(tp: int, inter: str) -> float:
        result = infer("llama3.1-70b", gpu="h100-sxm", tp=tp, concurrency=16, inter=inter)
        return float(result.to_dict()["options"][0]["tpot_ms"])

    assert tpot(8, "eth-10") == tpot(8, "ib-ndr400")
    assert tpot(16, "eth-10") > 5 * tpot(16, "ib-ndr400")


def test_weights_auto_reads_a_config_path_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    reads: list[Path] = []
    real = hf_config.model_from_config_file

    def counted(path: Path) -> object:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(hf_config, "model_from_config_file", counted)
    assert infer(str(tmp_path), gpu="h100-sxm", concurrency=4).weights == "fp8_block"
    assert len(reads) == 1
    reads.clear()
    assert infer_static(str(tmp_path), gpu="h100-sxm", tp=[1]).weights == "fp8"
    assert len(reads) == 1
