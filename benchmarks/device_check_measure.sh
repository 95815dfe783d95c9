#!/usr/bin/env bash
# GPU checks of the measure commands that a CPU machine cannot do (issue 4). One GPU is enough;
# collectives over NCCL need 2+ GPUs and are skipped on a single-GPU machine.
# Run from the repository root:  bash benchmarks/device_check_measure.sh  (about 2 minutes)
# Expected on one H200: matmul recognises h200-sxm and reaches ~0.6-0.8 of the 989.5 TFLOP/s bf16
# peak at 8192^3; doctor says ok for torch/gpus/matmul and skip/warn only for what one GPU cannot
# show; calibrate writes a profile whose gemm key is h200-sxm and that estimate can load.
set -euo pipefail
out=${OUT:-/tmp/gpuscale-device}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/nvidia-smi.csv"
gpuscale doctor --json > "$out/doctor.json" && echo "doctor exit 0" || echo "doctor exit $?"
python - "$out/doctor.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("verdict:", d["verdict"])
for f in d["findings"]:
    print(f"  {f['status']:5} {f['area']:12} {f['detail']}")
PY
gpuscale bench matmul --iters 20 --json > "$out/matmul.json"
python - "$out/matmul.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("device:", d["device"], "->", d["gpu_id"], "peak", d["peak_tflops"])
for s in d["samples"]:
    print(f"  {s['m']:>6}x{s['n']:>6}x{s['k']:>6} {s['tflops']:8.1f} TFLOP/s  eff {s['efficiency'] or 0:.3f}  cv {s['cv']:.3f}")
PY
ngpu=$(nvidia-smi -L | wc -l)
if [ "$ngpu" -ge 2 ]; then
  gpuscale bench collectives --nproc "$ngpu" --sizes 8:256M --json > "$out/collectives.json"
  gpuscale calibrate --from "$out/collectives.json" --from "$out/matmul.json" -o "$out/profile.yaml" --html "$out/fit.html"
else
  echo "one GPU: NCCL collectives need 2+ GPUs; calibrating the GEMM curve only"
  gpuscale calibrate --from "$out/matmul.json" -o "$out/profile.yaml" --html "$out/fit.html"
fi
gpuscale estimate llama3.1-8b --gpu h200-sxm --gpus 8 --dp 8 --profile "$out/profile.yaml" --json > "$out/estimate.json"
gpuscale estimate llama3.1-8b --gpu h200-sxm --gpus 8 --dp 8 --json > "$out/estimate-generic.json"
python - "$out" <<'PY'
import json, sys
a = json.load(open(f"{sys.argv[1]}/estimate-generic.json")); b = json.load(open(f"{sys.argv[1]}/estimate.json"))
print(f"step time generic {a['step_time_s']:.3f} s, measured profile {b['step_time_s']:.3f} s; compute {a['breakdown']['compute']:.3f} -> {b['breakdown']['compute']:.3f}")
PY
