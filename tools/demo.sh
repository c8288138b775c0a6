#!/usr/bin/env bash
# The README's demo: train SNAP-UQ on the embedded digits set, evaluate every method on the host,
# export int8, build the Cortex-M4 firmware, boot it in QEMU and stream the test split through the
# serial harness. Prints where the reports are.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
SNAPUQ=.venv/bin/snapuq
OUT=${DEMO_OUT:-runs/demo}
mkdir -p "$OUT"
t0=$(date +%s)
step() { echo; echo "== [$(( $(date +%s) - t0 ))s] $*"; }

step "train: cnn4 + SNAP heads + baselines on digits"
$SNAPUQ train --dataset digits --out "$OUT/model"
step "export: full-int8 model + manifest + C arrays; verify the C core vs TFLM"
$SNAPUQ export "$OUT/model"
$SNAPUQ verify "$OUT/model" --n 100
step "eval: SNAP and the 12 baselines (host, float + int8 reference)"
$SNAPUQ eval "$OUT/model" --report "$OUT/report"
step "firmware: Cortex-M4 (QEMU mps2-an386) harness run on the test split"
.venv/bin/python host/harness.py --port qemu:m4 --model "$OUT/model" --dataset digits --split test \
  --out "$OUT/device"
step "done in $(( $(date +%s) - t0 ))s"
echo "host report:   $OUT/report/report.md (metrics.json, *.png)"
echo "device report: $OUT/device/summary.json (results.jsonl)"
