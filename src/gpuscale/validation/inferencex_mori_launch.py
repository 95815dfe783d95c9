"""Prompt budgets and running caps of InferenceX's MI355X MoRI-SGLang disaggregated launches.

The held-out MI355X ``mori-sglang`` records (``inferencex_api``) state their workers and per-stage
labels, not the SGLang flags their launch gave each worker. Those flags are set by the launch
scripts per stage and per attention-DP / EP mode, the same for every DeepSeek-R1 model name of
one version, and read here from each version in force while the records ran:

- before 2026-02-19, InferenceX's ``benchmarks/dsr1_fp{4,8}_mi355x_sglang-disagg.sh`` cloned
  billishyahao/sglang_disagg at a pinned commit, whose ``sglang_disagg_server.sh`` builds the
  flags and whose ``set_env_vars.sh`` exports ``MORI_MAX_DISPATCH_TOKENS_PREFILL=16384``: FP8
  953f7c512 from 6e97ccc73 (2026-02-14T17:05Z) and 14606ff7c from de7099fa7 (2026-02-16T01:53Z),
  both read; 21c60a1f9 (FP8 from 2026-02-11, FP4 to 2026-02-19) and branch ``sa-260203`` are
  not public, so the FP8 records of 2026-02-06 to 02-13 and the FP4 ones before 2026-02-19 are
  not read;
- from 8d81e0bf4 (#666, 2026-02-19T22:06Z), InferenceX's own ``benchmarks/multi_node/amd_utils/
  server.sh`` reads ``models.yaml`` (the entry of ``MODEL_NAME``) and ``env.sh``
  (``MORI_MAX_DISPATCH_TOKENS_PREFILL=16384``), changed by 4706e7009 (2026-03-03T17:03Z) and
  4230b97ca (2026-03-13T13:16Z), unchanged to 2e9cecf91 (2026-04-19).

What every version read launches (per worker, before SGLang splits it over attention-DP ranks):
prefill with attention DP ``--max-running-requests 24``, without it 128; decode with attention
DP ``--max-running-requests`` = the CUDA-graph batch range's end x ``DECODE_TP_SIZE`` (256 at
953f7c5, 160 from 14606ff; ``models.yaml``'s ``dp.max_running_requests: 4096`` is not what
``server.sh`` passes), with EP but no DP 256, with neither 128. The prefill
``--chunked-prefill-size``: with DP ``MORI_MAX_DISPATCH_TOKENS_PREFILL x PREFILL_TP_SIZE`` (FP8
in every version; the FP4 ``DeepSeek-R1-0528-MXFP4`` entry from 4230b97ca, whose ``env.sh``
lowers the prefill tokens to 12288 only for a ``MODEL_NAME`` matching ``*mxfp4*``, which the
upper-case name does not) or a fixed 16384 (FP4 ``DeepSeek-R1-0528-MXFP4-Preview`` at 8d81e0bf4,
``-MXFP4`` at 4706e7009); without DP 262144 (FP8) or 16384 (FP4). ``--enable-dp-attention`` runs
``--dp-size`` = ``--tp-size`` (``build_server_config``), EP where the stage's ``ep`` label is
not 1 and DP where its ``dp-attn`` is true (the launch scripts' ``*_ENABLE_EP`` /
``*_ENABLE_DP``).

SGLang then divides, with attention DP, ``chunked_prefill_size`` by ``dp_size``
(``server_args.py`` ``_handle_data_parallelism``: "DP attention is enabled. The chunked prefill
size is adjusted ...") and ``max_running_requests`` by ``dp_size`` (``model_runner.py``, as
``serving_rows`` reads the H100/H200 recipes' decode caps), and a prefill batch takes prompt
tokens up to ``--max-prefill-tokens`` (default 16384, ``catalog`` SGLang profile) besides the
chunk. So a record gets the prefill prompt cap (``prefill_batch``) and the decode running cap
(``decode_batch``) per attention rank, and the prefill ``--chunked-prefill-size`` as the
launch states it, per worker (engine option ``max_num_batched_tokens``, which the model
divides by the prefill's attention-DP size, ``EngineProfile.per_attention_rank``, and next to
which it applies ``--max-prefill-tokens`` itself: ``steady_state.prefill_curve``,
``disagg_closed_loop``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PREFILL_DP_RUNNING = 24
PREFILL_RUNNING = 128
DECODE_EP_RUNNING = 256
DECODE_RUNNING = 128
"""The running caps every version read passes (module docstring)."""
SPEC_V2_FIRST_DAY = "2026-05-07"
"""``benchmarks/multi_node/amd_utils/env.sh`` exports ``SGLANG_ENABLE_SPEC_V2=1`` ("Enable spec
v2") on main from ec02dba57 (2026-05-07), after every MoRI-SGLang record (the ``amd/mi355x-dsfp4-*``
branches had it from 2026-03-27, also after them); no version read before it (8d81e0bf4,
4706e7009, 4230b97ca) and no ref of billishyahao/sglang_disagg in the snapshot sets it.
Without it SGLang runs an EAGLE (MTP) launch with the overlap scheduler disabled
(``server_args.py`` ``_handle_speculative_decoding``: "Overlap scheduler is disabled when spec v2
is off"). The launchers give the MTP flags to the decode workers only (``build_server_config``:
"MTP config (only if MTP is enabled and mode is decode)", ``amd_utils/server.sh`` at 4706e7009;
``sglang_disagg_server.sh`` likewise from 6372ae8 on; its pinned commits are not in the snapshot,
and the MoRI MTP records before 2026-02-19 are not expressible anyway), so an MTP record's decode
workers run without the overlap scheduler and its prefill workers with it (engine options
``overlap_scheduler`` False, ``prefill_overlap_scheduler`` True), and its prefill workers load
and run no draft module (``prefill_speculative`` False, in every version)."""
MORI_ALL_TO_ALL = "--moe-a2a-backend mori"
"""The MoE exchange of every stage with attention DP in every version read: the launchers append
the model's DP flags, ``--moe-a2a-backend mori --enable-dp-attention --moe-dense-tp-size 1
--enable-dp-lm-head`` (``MODEL_DP_CONFIGS`` of ``sglang_disagg_server.sh`` at 14606ff7c and every
commit of the snapshot read; ``dp_flags`` of ``amd_utils/models.yaml`` at 8d81e0bf4, 4706e7009 and
4230b97ca, "Appended when DP is enabled (prefill or decode)"), so the MoE layers dispatch and
combine each token's top-k copies with MoRI's all-to-all, as DeepEP does, not SGLang's default
gather and scatter of the DP group (engine option ``moe_a2a_deepep``)."""
KV_DTYPE = "fp8"
"""``--kv-cache-dtype fp8_e4m3`` on both stages in every version read: the DeepSeek-R1 entries'
flags of ``sglang_disagg_server.sh`` (every commit of billishyahao/sglang_disagg in the snapshot
read) and the DeepSeek-R1 / -0528 / -MXFP4 entries' ``base_flags`` of ``amd_utils/models.yaml``
("Common flags for both prefill and decode"; 8d81e0bf4, 4706e7009, 4230b97ca, 2e9cecf91).
SGLang's ``auto`` would keep the checkpoint's 16 bits."""
MORI_PREFILL_TOKENS = 16384
"""``MORI_MAX_DISPATCH_TOKENS_PREFILL`` of every version read (``set_env_vars.sh`` at 953f7c512
and 14606ff7c; ``env.sh`` at 8d81e0bf4, 4706e7009 and 4230b97ca for the names read)."""


@dataclass(frozen=True, slots=True)
class MoriLaunch:
    """One launch version: the records of its precision, days and image ran it."""

    precision: str
    first: str
    """First and last day (UTC, inclusive; a boundary day belongs to both versions)."""
    last: str
    image: str
    """The image the configuration named for the entry (``amd-master.yaml``)."""
    source: str
    prefill_dp_chunk: int | None
    """``--chunked-prefill-size`` with attention DP; None: ``MORI_PREFILL_TOKENS`` x TP."""
    prefill_chunk: int
    """``--chunked-prefill-size`` without attention DP."""
    decode_dp_graph_bs: int
    """End of the decode CUDA-graph batch range with attention DP: ``--max-running-requests`` is
    this x ``DECODE_TP_SIZE``."""
    decode_routing: str | None = None
    """How the launch's router picks a decode worker (``infer``'s ``decode_routing``): the
    InferenceX ``amd_utils/server.sh`` versions start ``sglang_router.launch_router
    --pd-disaggregation --policy random --prefill-policy random --decode-policy random``
    (read at 8d81e0bf4, 4706e7009, 4230b97ca); None: not read (the sglang_disagg commits are not
    in the snapshot read)."""


FP8_0210 = "rocm/sgl-dev:sglang-0.5.8-rocm700-mi35x-mori-0210"
LAUNCHES: tuple[MoriLaunch, ...] = (
    MoriLaunch("fp8", "2026-02-14", "2026-02-16", FP8_0210, "sglang_disagg@953f7c512", None,
               262144, 256),
    MoriLaunch("fp8", "2026-02-16", "2026-02-19", FP8_0210, "sglang_disagg@14606ff7c", None,
               262144, 160),
    MoriLaunch("fp8", "2026-02-19", "2026-03-03", FP8_0210, "InferenceX@8d81e0bf4 amd_utils",
               None, 262144, 160, "random"),
    MoriLaunch("fp8", "2026-03-03", "2026-04-19",
               "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-2",
               "InferenceX@4706e7009 amd_utils", None, 262144, 160, "random"),
    MoriLaunch("fp4", "2026-02-19", "2026-03-03",
               "rocm/sgl-dev:sglang-0.5.7-rocm700-mi35x-mori-fp4-0122",
               "InferenceX@8d81e0bf4 amd_utils", 16384, 16384, 160, "random"),
    MoriLaunch("fp4", "2026-03-03", "2026-03-13",
               "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-2",
               "InferenceX@4706e7009 amd_utils", 16384, 16384, 160, "random"),
    MoriLaunch("fp4", "2026-03-13", "2026-04-19",
               "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-3",
               "InferenceX@4230b97ca amd_utils", None, 16384, 160, "random"),
)  # fmt: skip
"""The versions read (module docstring), with the entry's image at each commit."""


def _values(launch: MoriLaunch, kw: dict[str, Any], rec: dict[str, str]) -> dict[str, int]:
    p_dp, d_dp = int(kw["prefill_attention_dp"]), int(kw["decode_attention_dp"])
    if p_dp > 1:
        chunk = launch.prefill_dp_chunk or MORI_PREFILL_TOKENS * int(kw["prefill_tp"])
        running = PREFILL_DP_RUNNING
    else:
        chunk, running = launch.prefill_chunk, PREFILL_RUNNING
    # SGLang splits the running caps over the attention-DP ranks (dp-size = tp-size in these
    # launches); the chunk stays the launch's, split by the model (per_attention_rank).
    if d_dp > 1:
        decode = launch.decode_dp_graph_bs * int(kw["decode_tp"]) // d_dp
    elif rec["decode_ep"] != "1":
        decode = DECODE_EP_RUNNING
    else:
        decode = DECODE_RUNNING
    return {
        "prefill_batch": max(running // p_dp, 1),
        "decode_batch": decode,
        "max_num_batched_tokens": chunk,
    }


def mori_launch(rec: dict[str, str], kw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Per-rank caps and per-worker prefill chunk of MoRI-SGLang record ``rec`` whose disaggregated
    deployment ``kw`` (``inferencex_api``'s reading of its stages) states, from the launch
    versions (:data:`LAUNCHES`) of its precision, day and image; each value only where every
    matching version gives the same. Empty for any other record; where no version read
    matches, only MoRI's all-to-all under attention DP, which every version read launches
    (:data:`MORI_ALL_TO_ALL`)."""
    if rec["hardware"] != "mi355x" or rec["framework"] != "mori-sglang":
        return {}, ""
    # MoRI's all-to-all on the stages with attention DP (MORI_ALL_TO_ALL).
    dp = int(kw["prefill_attention_dp"]) > 1 or int(kw["decode_attention_dp"]) > 1
    hits = [
        ln
        for ln in LAUNCHES
        if ln.precision == rec["precision"]
        and ln.first <= rec["date"] <= ln.last
        and ln.image == rec["image"]
    ]
    if not hits:
        if not dp:
            return {}, ""
        return {"moe_a2a_deepep": True}, (
            "MoRI launch of that day not read: its caps and chunk unknown; MoRI all-to-all "
            f"under attention DP ({MORI_ALL_TO_ALL}), as every version read launches it"
        )
    # EAGLE on the decode workers without spec v2 (SPEC_V2_FIRST_DAY): no overlap scheduler there.
    spec = rec.get("spec_method", "none") == "mtp"
    mtp = spec and rec["date"] < SPEC_V2_FIRST_DAY
    per: list[dict[str, Any]] = [
        {
            **_values(ln, kw, rec),
            "decode_routing": ln.decode_routing,
            "kv_dtype": KV_DTYPE,
            "overlap_scheduler": False if mtp else None,
            "prefill_overlap_scheduler": True if mtp else None,
            "moe_a2a_deepep": True if dp else None,
            # The MTP flags reach the decode workers only (SPEC_V2_FIRST_DAY).
            "prefill_speculative": False if spec else None,
        }
        for ln in hits
    ]
    agree = {k: v for k, v in per[0].items() if all(p[k] == v for p in per)}
    out = {k: v for k, v in agree.items() if v is not None}
    left = sorted(set(per[0]) - set(agree))
    sources = ", ".join(ln.source for ln in hits)
    note = (
        f"MoRI launch ({sources}): prefill {out.get('prefill_batch', '-')} prompts per rank "
        f"and a {out.get('max_num_batched_tokens', '-')}-token chunk per worker, decode cap "
        f"{out.get('decode_batch', '-')} per rank, decode workers picked "
        f"{'at random' if out.get('decode_routing') == 'random' else 'by a router not read'}, "
        "FP8 KV cache"
        + (f", MoRI all-to-all under attention DP ({MORI_ALL_TO_ALL})" if dp else "")
        + (", MTP on the decode workers only" if spec else "")
        + (", EAGLE without the overlap scheduler (no SGLANG_ENABLE_SPEC_V2)" if mtp else "")
    )
    if left:
        note += f"; {', '.join(left)} not applied: the versions in force that day differ"
    return out, note
