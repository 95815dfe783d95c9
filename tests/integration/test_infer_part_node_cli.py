"""`gpuscale infer` of a disaggregated deployment whose workers are smaller than a node, through
the real entry point: DeepSeek-R1 on 8-GPU B200 nodes, 2 x TP4 prefill workers beside a TP8/EP8
attention-DP decode worker (InferenceX's Dynamo/SGLang recipes), and the one-line refusal of a
worker no node layout holds."""

from __future__ import annotations

import json

# A TP4 FP8 worker holds 158 GiB of weights per GPU: SGLang's default mem_fraction_static on a
# B200 (0.854) leaves it no KV room, so the launch states 0.95 as InferenceX's TP4 FP8 launches do
# (inferencex_mem_fractions.csv: dsr1_fp8_b200.sh TP4 branch, gb200-fp8/1k1k/low-latency.yaml).
R1 = ("infer", "deepseek-ai/DeepSeek-R1", "--gpu", "b200", "--engine", "sglang",
      "--input", "1024", "--output", "1024", "--concurrency", "64",
      "--engine-options", "memory_fraction=0.95")  # fmt: skip
DECODE = ("--decode-workers", "1", "--decode-tp", "8", "--decode-ep", "8",
          "--decode-attention-dp", "8")  # fmt: skip


def test_two_tp4_prefill_workers_and_a_tp8_decode_worker_on_two_nodes(gpuscale) -> None:
    proc = gpuscale(*R1, "--prefill-workers", "2", "--prefill-tp", "4", *DECODE, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    o = doc["options"][0]
    assert (o["gpus"], o["nodes"], o["gpus_per_node"]) == (16, 2, 8)
    assert (o["prefill_nodes"], o["decode_nodes"]) == (1, 1)
    # the pools hold a node each: every KV hand-off crosses nodes
    assert o["kv_transfer_within_node_share"] == 0.0
    assert o["output_tokens_per_s_per_gpu"] == o["output_tokens_per_s"] / 16
    assert "on 16 GPUs (2 nodes of 8)" in doc["verdict"]
    # one prefill worker: 12 GPUs used on two nodes (refused before the placement)
    proc = gpuscale(*R1, "--prefill-workers", "1", "--prefill-tp", "4", *DECODE, "--json")
    assert proc.returncode == 0, proc.stderr
    o = json.loads(proc.stdout)["options"][0]
    assert (o["gpus"], o["nodes"]) == (12, 2)


def test_a_worker_straddling_nodes_is_refused_in_one_line(gpuscale) -> None:
    proc = gpuscale(*R1, "--prefill-workers", "1", "--prefill-tp", "4", *DECODE,
                    "--gpus-per-node", "6")  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "a decode worker of 8 GPUs (TP8) cannot be placed on 6-GPU nodes" in lines[0]
