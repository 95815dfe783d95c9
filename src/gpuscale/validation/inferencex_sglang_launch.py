"""Scheduler flags of InferenceX's single-node SGLang DeepSeek-R1 launches on B200 and B300.

Read from SemiAnalysisAI/InferenceX, every version of the scripts between the first record
they cover and the last (``git log`` of each path; the flags below are the same at every commit
named): ``benchmarks/dsr1_fp4_b200_docker.sh`` and ``dsr1_fp8_b200_docker.sh`` from 27f29acbe /
6be2c6997 (2025-09-21/23) to 64af5a771 (2026-01-21), their ``_slurm.sh`` twins (c88a4c3d2
2025-09-28 to 64af5a771), ``benchmarks/dsr1_fp{4,8}_b200.sh`` and ``dsr1_fp8_b200_mtp.sh``
(b0c4ed21b 2026-01-22 to b30c3398a; e62c6acdf 2026-02-06), ``benchmarks/single_node/
dsr1_fp{4,8}_b200{,_mtp}.sh`` (8d81e0bf4 2026-02-19 to ed5867f9e 2026-05-12) and
``benchmarks/single_node/dsr1_fp4_b300.sh`` (9ebeafb4e, 2026-04-17: "reuses the existing DSR1
FP4 B200 SGLang recipe as-is"), ``dsr1_fp8_b300.sh`` (5b302f147) and ``dsr1_fp8_b300_mtp.sh``
(f8543f9d1), to ed5867f9e. Each sets ``SCHEDULER_RECV_INTERVAL=30`` when ``CONC >= 16`` and
10 otherwise (the FP8 scripts' TP4 branch, 8k/1k only, from 1d29967c4 2026-01-13: always 10)
and passes ``--scheduler-recv-interval``; the token budget ``--chunked-prefill-size`` is 16384
(FP4; FP8 with MTP), 32768 (FP8 TP8) or 8192 (FP8 TP4), ``--max-prefill-tokens`` the same where
set (FP8; FP4 keeps the 16384 default), ``--max-running-requests`` 256 (FP4), 128 (FP8 TP8),
32 (FP8 TP4) or 512 (MTP). The memory fraction the scripts also set is not read here.

The MTP scripts (``dsr1_fp8_b200_mtp.sh`` e62c6acdf to ed5867f9e, ``dsr1_fp8_b300_mtp.sh``
f8543f9d1) write ``SGLANG_ENABLE_SPEC_V2=1`` as a plain shell assignment on a line of its own,
not exported and not in front of the ``python3 -m sglang.launch_server`` command, so the server
does not see it (bash passes a command only exported variables and the assignments that precede
it). SGLang 0.5.9 and 0.5.10.post1 (``environ.py``: ``SGLANG_ENABLE_SPEC_V2 = EnvBool(False)``;
``server_args.py`` ``_handle_speculative_decoding``: EAGLE without it sets
``disable_overlap_schedule = True``, "Overlap scheduler is disabled when spec v2 is off", read in
the 0.5.9 and 0.5.10.post1 wheels) then run EAGLE without the overlap scheduler
(engine option ``overlap_scheduler`` False).

The FP8 scripts run the dense block-FP8 linear layers on FlashInfer's TRT-LLM GEMM (engine
option ``flashinfer_fp8_gemm``): every version of them in the window turns DeepGEMM off
(``SGL_ENABLE_JIT_DEEPGEMM=false``, ``=0`` at 425f74d51, or the ``SGLANG_`` spelling) and either
exports ``SGLANG_ENABLE_FLASHINFER_GEMM=true`` (``=1`` at 425f74d51) or passes
``--fp8-gemm-backend=flashinfer_trtllm`` (the MTP scripts; ``dsr1_fp8_b200.sh`` at 28cc621e9 and
4d4d25576). Every SGLang release the records name then takes that kernel on Blackwell
(``layers/quantization/fp8_utils.py``, read in the wheels): 0.5.3 and 0.5.5(.post2)
``dispatch_w8a8_block_fp8_linear`` tries ``ENABLE_FLASHINFER_GEMM`` first (the 2025-11 records
ran ``v0.5.5-cu129``, nvidia-master.yaml at 189ae51cc); 0.5.6 copies the variable into
``SGLANG_ENABLE_FLASHINFER_FP8_GEMM`` (``environ._convert_SGL_to_SGLANG``) and tries it first;
0.5.8.post1 and 0.5.9 set the backend ``flashinfer_trtllm`` from the variable or the flag
(``initialize_fp8_gemm_config``); 0.5.10.post1 reads the flag only, and with DeepGEMM off picks
that kernel by itself on Blackwell (``_dispatch_auto_backend``), as 0.5.8 on would. Each calls
``gemm_fp8_nt_groupwise(..., backend="trtllm")``.
"""

from __future__ import annotations

from typing import Any

RECV_INTERVAL_LOW = 10
RECV_INTERVAL_HIGH = 30
RECV_INTERVAL_FROM_CONC = 16
"""``if [[ $CONC -ge 16 ]]; then SCHEDULER_RECV_INTERVAL=30 else SCHEDULER_RECV_INTERVAL=10``."""

EP_MOE_LAST_DAY = "2025-11-10"
"""``benchmarks/dsr1_fp4_b200_docker.sh`` (every version from 27f29acbe, 2025-09-21, to
d8fe8f73e~1) launches ``--enable-ep-moe``, which SGLang 0.5.3rc0/rc1 turns into ``ep_size = tp_size``: expert
parallelism over the whole engine, while the configuration entry had no ``ep`` and the records
say EP 1. InferenceX #204 (d8fe8f73e, 2025-11-10 14:55 -0500, "fix deprecated flags: replace
--enable-ep-moe with --ep-size 8 ... Add ep: 4 for tp=4 entries in dsr1-fp4-b200-sglang
config") kept that parallelism and wrote it into the entry (``{ tp: 4, ep: 4 }``, ``{ tp: 8,
ep: 8 }``), so later records state it. No other InferenceX script had the flag. The records of
2025-11-10 still say EP 1, the entry before #204: the old script's run."""

FIRST_DAY = {"b200": "2025-09-21", "b300": "2026-04-17"}
"""First day each system's scripts carried the flags (27f29acbe; 9ebeafb4e)."""
LAST_DAY = "2026-05-12"
"""Last script version read (ed5867f9e); records after it are not read by this table."""


def blackwell_sglang_launch(rec: dict[str, str]) -> dict[str, Any]:
    """Engine options of an aggregated InferenceX SGLang DeepSeek-R1 record on B200/B300 as
    its launch script states them (module docstring); empty for any other record. Read from
    the record's system, precision, MTP, TP, concurrency and date only."""
    system = rec["hardware"]
    if (
        system not in FIRST_DAY
        or rec["framework"] != "sglang"
        or rec["disagg"] == "true"
        or rec["model"] != "dsr1"
        or not FIRST_DAY[system] <= rec["date"] <= LAST_DAY
    ):
        return {}
    tp, conc = int(rec["decode_tp"]), int(rec["conc"])
    high = RECV_INTERVAL_HIGH if conc >= RECV_INTERVAL_FROM_CONC else RECV_INTERVAL_LOW
    if rec["precision"] == "fp4" and rec["spec_method"] == "none":
        return {"recv_interval": high, "max_num_batched_tokens": 16384, "max_num_seqs": 256}
    if rec["precision"] != "fp8":
        return {}
    if rec["spec_method"] == "mtp":
        budget, seqs = 16384, 512
        return {
            "recv_interval": high,
            "max_num_batched_tokens": budget,
            "max_prefill_tokens": budget,
            "max_num_seqs": seqs,
            "overlap_scheduler": False,
            "flashinfer_fp8_gemm": True,
        }
    elif tp == 8:
        budget, seqs = 32768, 128
    elif tp == 4:
        return {
            "recv_interval": RECV_INTERVAL_LOW,
            "max_num_batched_tokens": 8192,
            "max_prefill_tokens": 8192,
            "max_num_seqs": 32,
            "flashinfer_fp8_gemm": True,
        }
    else:
        return {"flashinfer_fp8_gemm": True}
    return {
        "recv_interval": high,
        "max_num_batched_tokens": budget,
        "max_prefill_tokens": budget,
        "max_num_seqs": seqs,
        "flashinfer_fp8_gemm": True,
    }


def blackwell_sglang_expert_parallel(rec: dict[str, str]) -> int | None:
    """The expert-parallel size an aggregated InferenceX B200 SGLang DeepSeek-R1 FP4 record ran
    with where its launch script set it and the record does not say (:data:`EP_MOE_LAST_DAY`):
    its TP; None for any other record."""
    if (
        rec["hardware"] != "b200"
        or rec["framework"] != "sglang"
        or rec["disagg"] == "true"
        or rec["model"] != "dsr1"
        or rec["precision"] != "fp4"
        or not FIRST_DAY["b200"] <= rec["date"] <= EP_MOE_LAST_DAY
    ):
        return None
    return int(rec["decode_tp"])


AMD_BUDGET_FIRST_DAY = "2025-09-20"
"""First day of the AMD DeepSeek-R1 SGLang scripts read by :func:`amd_sglang_budget`
(``benchmarks/dsr1_fp{4,8}_mi355x_docker.sh`` b99db2e85, ``dsr1_fp8_mi3{0,2}5x_docker.sh``
c2be17947, 2025-09-20)."""
AMD_MI3X_BUDGET_FROM = "2026-01-22"
"""``dsr1_fp8_mi300x.sh`` and ``dsr1_fp8_mi325x.sh`` set 131072 from 32772c579 (2026-01-22) on
(196608 before), through ``benchmarks/single_node/`` to ed5867f9e (2026-05-12)."""


def amd_sglang_budget(rec: dict[str, str]) -> dict[str, Any]:
    """The token budget an aggregated InferenceX SGLang DeepSeek-R1 record on MI300X, MI325X or
    MI355X ran with: its script's ``--chunked-prefill-size`` and ``--max-prefill-tokens``, the
    same number, in every version from the first (:data:`AMD_BUDGET_FIRST_DAY`) to ed5867f9e
    (2026-05-12): 196608 on MI355X (FP4: 32768 at 8k/1k above concurrency 32, ``if [[ "$ISL" ==
    "8192" && "$OSL" == "1024" ]]; then if [[ "$CONC" -gt "32" ]]; then PREFILL_SIZE=32768``),
    and on MI300X/MI325X 196608, then 131072 (:data:`AMD_MI3X_BUDGET_FROM`). SGLang's default
    (16384) had been read. Empty for any other record."""
    system = rec["hardware"]
    if (
        system not in ("mi300x", "mi325x", "mi355x")
        or rec["framework"] != "sglang"
        or rec["disagg"] == "true"
        or rec["model"] != "dsr1"
        or rec["spec_method"] != "none"  # the MTP scripts are not read here
        or not AMD_BUDGET_FIRST_DAY <= rec["date"] <= LAST_DAY
    ):
        return {}
    if system == "mi355x":
        shape = (rec["isl"], rec["osl"])
        small = rec["precision"] == "fp4" and shape == ("8192", "1024") and int(rec["conc"]) > 32
        budget = 32768 if small else 196608
    else:
        budget = 131072 if rec["date"] >= AMD_MI3X_BUDGET_FROM else 196608
    return {"max_num_batched_tokens": budget, "max_prefill_tokens": budget}
