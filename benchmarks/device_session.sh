#!/usr/bin/env bash
# One device-machine call (the lent GPU has ~15 minutes a session): the serving kernels' readings
# (device_serving_kernels.py), the measure commands' GPU check (device_check_measure.sh), then a
# whole step's kernels back to back (device_serving_step.py: not yet run on a GPU). The machine's image has torch but not plotly or ijson: carry them as
# wheels in .whl/ (see /work/.library/device/README.md), and run from the repository root:
#   run(command="bash benchmarks/device_session.sh", carry=[".whl"], timeout_s=480)
set -uo pipefail
out=${OUT:-/tmp/gpuscale-device}
work=/tmp/gpuscale-work
mkdir -p "$out" "$work/measure" /tmp/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 PATH=/tmp/bin:$PATH
printf '#!/bin/sh\nexec python3 -c "from gpuscale.cli.main import entry; entry()" "$@"\n' > /tmp/bin/gpuscale
chmod +x /tmp/bin/gpuscale
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
timeout 330 python3 benchmarks/device_serving_kernels.py --out "$out/serving_kernels.json" 2>&1 \
  | tee "$out/kernels.log"
echo "kernels rc=${PIPESTATUS[0]}"
OUT=$work/measure timeout 150 bash benchmarks/device_check_measure.sh 2>&1 | tee "$out/measure.log"
echo "measure rc=${PIPESTATUS[0]}"
tar czf "$out/measure.tgz" -C "$work" measure
timeout 120 python3 benchmarks/device_serving_step.py --out "$out/serving_step.json" 2>&1 \
  | tee "$out/step.log"
echo "step rc=${PIPESTATUS[0]}"
