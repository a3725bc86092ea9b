#!/bin/sh
# Records one training step of a Llama-3-70B-shaped model (bench/configs/llama-3-70b.json:
# hidden 8192, 80 layers, 64 heads, 8 key/value heads, ffn 28672, vocab 128256) on the
# meta device with python/offsim_torch/recorder.py: no weights, no GPU, no memory for the
# tensors.  Prints the wall time and peak resident memory that GNU time measures
# (target: under 2 minutes and 4 GB), and the per-layer summary's first lines.
# Usage: bench/record-70b.sh [OUT_DIR] [RECORDER OPTIONS...]   (from the repository root)
# Defaults: batch 1, seq 4096, bf16, attention sdpa (HF's SDPA path, CUDA flash kernel).
set -eu
out=${1:-build/bench-record-70b}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
# The recorder is a module of the package in python/ (python/offsim_torch).
export PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
[ -x /usr/bin/time ] || { echo "record-70b.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 2; }
/usr/bin/time -v -o "$out/time.txt" "$python" -m offsim_torch.recorder --hf-config bench/configs/llama-3-70b.json \
  --batch 1 --seq 4096 --dtype bf16 --attention sdpa --device meta --out "$out/llama-3-70b.csv" "$@"
grep -E 'Elapsed \(wall clock\)|Maximum resident set size' "$out/time.txt"
"$python" -m offsim_torch.recorder --summary "$out/llama-3-70b.csv" | sed -n '3,6p'
