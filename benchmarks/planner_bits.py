"""Bit-for-bit check of the planner's numbers against another revision of the source.

    python benchmarks/planner_bits.py --against main     # compare with `main` (git archive)
    python benchmarks/planner_bits.py --emit out.json    # write this tree's digests

A speed change to the memory model, the pipeline split, enumeration or the search must leave
every number as it was. This hashes (SHA-256 of the raw bytes) every field of
``training_memory`` and of ``estimate_batch`` over every enumerated plan, plus hand-made uneven
pipeline splits (explicit first/last counts, embedding and loss counted as layers), and the
``repr`` of ``search_count`` (every float exact), for several models x trainings (fp8 with the
weight cache and float8 all-gathers, LoRA, QLoRA, optimizer and parameter offload, paged and
in-backward optimizers, op and layer SAC, reshard on and off, dropout with unfused attention,
CUDA graphs, activation offload, fp32, ...) x profiles, and the 405B ``scale`` curve. With
``--against REV`` the same script runs on ``git archive REV src`` in a temporary directory and
every digest is compared; the exit code is 1 when any differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.memory import training_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_batch
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.enumerate import enumerate_plans
from gpuscale.planner.scale import scale
from gpuscale.planner.search import Hardware, Workload, search_count
from gpuscale.specs import PlanBatch, Training

try:  # the planner's run-wise memory path, where the revision has it
    from gpuscale.costmodel.memory import memory_total
    from gpuscale.planner.enumerate import enumerate_runs
except ImportError:  # pragma: no cover - older revisions
    memory_total = None  # type: ignore[assignment]
    enumerate_runs = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent

CASES = (
    ("llama3.1-8b", "h100-sxm", 64),
    ("llama3.1-70b", "h100-sxm", 512),
    ("llama3.1-405b", "h100-sxm", 4096),
    ("mixtral-8x7b", "h100-sxm", 256),
    ("llama3.1-8b", "h100-sxm", 8),
    ("mixtral-8x7b", "h100-sxm", 64),
)
TRAININGS: dict[str, dict[str, Any]] = {
    "default": {},
    "fp8": {"precision": "fp8", "fp8_weight_cache": True, "fp8_all_gather": True},
    "fp16-pure": {"precision": "fp16", "master_weights": False},
    "fp32": {"precision": "fp32"},
    "lora": {"finetune": "lora", "lora_dropout": 0.05},
    "lora-some": {"finetune": "lora", "lora_targets": ("q", "v")},
    "qlora": {"finetune": "qlora", "load_16bit_on_device": True, "paged_optimizer": True},
    "offload-opt": {"offload_optimizer": True},
    "offload-params": {"offload_params": True, "offload_optimizer": True},
    "in-backward": {"optimizer_in_backward": True, "optimizer": "sgd-momentum"},
    "adafactor-nofe": {"optimizer": "adafactor", "foreach_optimizer": False},
    "op-sac": {"selective_policy": "op", "sp_saves_gathered_input": True},
    "layer-sac": {"selective_policy": "layer", "selective_every": 3},
    "reshard-off": {"reshard_after_forward": False, "separate_embedding_units": True},
    "reshard-on": {"reshard_after_forward": True},
    "dropout-eager": {"dropout": True, "flash_attention": False, "fused_elementwise": False},
    "graphs": {"cuda_graphs": True, "loss": "chunked"},
    "act-offload": {"activation_offload": True, "loss": "compiled"},
    "classify": {"task": "classify", "loss": "fused"},
    "long": {"seq_len": 32768},
}
PROFILES = ("generic", "torchtitan", "megatron", "deepspeed")
# estimate_batch over every plan is the slow part: these trainings and profiles only
STEP_TRAININGS = ("default", "fp8", "lora", "offload-opt", "op-sac", "reshard-off", "long")
STEP_PROFILES = ("generic", "megatron")


def _digest(value: Any) -> str:
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        data = str(arr.dtype).encode() + str(arr.shape).encode() + arr.tobytes()
    else:
        data = repr(value).encode()
    return hashlib.sha256(data).hexdigest()[:20]


def _workload(model_id: str, options: dict[str, Any]) -> Workload:
    model = catalog.model(model_id)
    opts = dict(options)
    seq = int(opts.pop("seq_len", defaults.seq_len(model).value))
    return Workload(
        model=model,
        training=Training(seq_len=seq, **opts),
        global_batch=int(defaults.global_batch(model, seq).value),
        tokens=float(defaults.tokens_to_train(model).value),
    )


SPLIT_FIELDS = ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split")


def _uneven(plans: PlanBatch, num_layers: int) -> PlanBatch:
    """The plans with pp > 1 and vp == 1, twice more: embedding and loss counted as layers
    (alternately one or both), and explicit first/last counts one layer short of even."""
    pick = np.flatnonzero((plans.pp > 1) & (plans.vp == 1))
    base = plans.take(pick)
    columns = {
        name: getattr(base, name)
        for name in (
            "tp",
            "pp",
            "dp",
            "cp",
            "vp",
            "ep",
            "micro_batch",
            "global_batch",
            "recompute",
            "zero",
            "sequence_parallel",
        )
    }
    odd = np.arange(len(base)) % 2 == 1
    accounted = PlanBatch.from_arrays(
        **columns, embedding_in_split=np.ones(len(base), dtype=bool), loss_in_split=odd
    )
    short = np.maximum(num_layers // base.pp - 1, 0)
    explicit = PlanBatch.from_arrays(
        **columns, first_stage_layers=short, last_stage_layers=np.where(odd, short, 0)
    )
    out = {
        name: np.concatenate([getattr(accounted, name), getattr(explicit, name)])
        for name in (*columns, *SPLIT_FIELDS)
    }
    return PlanBatch.from_arrays(**out)


def digests(quick: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    cases = CASES[:2] if quick else CASES
    for model_id, gpu, n in cases:
        for tname, options in TRAININGS.items():
            try:
                workload = _workload(model_id, options)
            except InputError:
                continue
            model, training = workload.model, workload.training
            plans = enumerate_plans(
                model, n, global_batch=workload.global_batch, seq_len=training.seq_len
            )
            runs = None
            if enumerate_runs is not None:
                runs = enumerate_runs(
                    model, n, global_batch=workload.global_batch, seq_len=training.seq_len
                )
            extra = _uneven(plans, model.num_layers)
            hardware = Hardware(gpu=gpu)
            for pname in PROFILES:
                profile = load_profile(pname)
                tag = f"{model_id}/{n}/{tname}/{pname}"
                for which, batch in (("plans", plans), ("uneven", extra)):
                    mem = training_memory(model, training, batch, profile)
                    for field in (
                        "weights",
                        "gradients",
                        "optimizer",
                        "activations",
                        "overlap",
                        "allocated",
                        "reserved",
                        "overhead",
                        "total",
                        "host",
                        "stage",
                    ):
                        out[f"memory/{tag}/{which}/{field}"] = _digest(getattr(mem, field))
                # the planner's path where this revision has one: every plan's total from runs
                total = training_memory(model, training, plans, profile).total
                if runs is not None and memory_total is not None:
                    total = memory_total(model, training, runs.heads, profile, recompute=runs.codes)
                out[f"memory/{tag}/plans/total-runs"] = _digest(total)
                if tname in STEP_TRAININGS and pname in STEP_PROFILES and not quick:
                    cluster = hardware.cluster(n)
                    for which, batch in (("plans", plans), ("uneven", extra)):
                        est = estimate_batch(model, cluster, training, batch, profile)
                        for field in type(est).__slots__:
                            value = getattr(est, field)
                            if isinstance(value, np.ndarray):
                                out[f"step/{tag}/{which}/{field}"] = _digest(value)
                try:
                    found = search_count(workload, hardware, profile, n)
                except InputError as err:
                    found = f"InputError: {err}"
                out[f"search/{tag}"] = _digest(found)
    if not quick:
        workload = _workload("llama3.1-405b", {})
        curve = scale(workload, Hardware(gpu="h100-sxm"), load_profile("generic"), 4096)
        out["scale/405b/4096"] = _digest(repr(curve))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="git revision to compare with (e.g. main)")
    parser.add_argument("--emit", help="write this tree's digests to this JSON file")
    parser.add_argument("--quick", action="store_true", help="two cases, memory and search only")
    args = parser.parse_args()
    if args.emit:
        Path(args.emit).write_text(json.dumps(digests(args.quick), indent=0, sort_keys=True))
        return 0
    if not args.against:
        parser.error("give --against REV or --emit FILE")
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.against, "src"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        theirs_path = Path(tmp) / "theirs.json"
        env = dict(os.environ, PYTHONPATH=str(Path(tmp) / "src"))
        command = [sys.executable, __file__, "--emit", str(theirs_path)]
        subprocess.run(command + (["--quick"] if args.quick else []), check=True, env=env)
        theirs = json.loads(theirs_path.read_text())
    ours = digests(args.quick)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    for key in differ[:40]:
        print(f"DIFFERS {key}: {theirs.get(key)} -> {ours.get(key)}")
    print(
        f"{len(ours)} digests, {len(differ)} differ from {args.against}"
        f" ({sum(k.startswith('memory/') for k in ours)} memory, "
        f"{sum(k.startswith('step/') for k in ours)} step, "
        f"{sum(k.startswith('search/') for k in ours)} search, "
        f"{sum(k.startswith('scale/') for k in ours)} scale)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
