#!/usr/bin/env bash
# gpu_calib/run-on-gpu.sh — the whole GPU check in one call, in under eight
# minutes on one H100/H200-class GPU:
#   1. build offsim and offsim-calib (CMake, OFFSIM_CUDA=ON) into OUTDIR/build;
#   2. offsim-calib --out OUTDIR/profile.ini (the full run, or --quick when the
#      build took long enough to put the budget at risk), with the GEMM list
#      of Llama-3.1-8B at batch 1 x 4096 and Qwen2.5-0.5B at 2 x 512 (one
#      layer and the LM head, forward, dgrad and wgrad, bf16 and fp32); the
#      profile is copied to scenarios/profiles/h200-measured.ini when the GPU
#      is an H200 (--save-profile: elsewhere, whatever the GPU);
#   3. ground_truth.py at two sizes (qwen0.5b: the seed chapter's workload,
#      qwen1.5b: eight times its activations), each writing the scenario of
#      what it ran, including the measured profile;
#   4. offsim compare on each of those scenarios;
#   5. frameworks.py: the six framework handlers (save_on_cpu, verl, TE,
#      Megatron, torchtune, DeepSpeed) on real CUDA streams and events, one
#      step each of tests/data/hf/configs/qwen2-fw.json, with the offsim
#      scenario of that workload (OUTDIR/frameworks.{json,ini,txt}) and
#      offsim compare on it where the build's offsim reads `framework =`;
#   6. the tables, printed last: the kernel model's figures as written to
#      the profile (OUTDIR/kernel-model.txt: SMs, launch overhead, HBM
#      bandwidth, best TFLOPS per dtype, TFLOPS per GEMM shape); workload,
#      policy, measured against predicted step time and peak memory, error in
#      percent (OUTDIR/table.txt).
# Every log, JSON and scenario stays in OUTDIR.
#
# --dry-run needs no GPU: it builds (OFFSIM_CUDA=AUTO: offsim-calib too where
# nvcc exists), compiles every Python file, runs ground_truth.py --device cpu
# at its tiny size and frameworks.py --device cpu at a small size (stand-in
# streams: counts only), offsim on the scenarios with the bundled H100
# profile, and prints the same tables, labelled as a dry run: CPU timings are
# no measurement.
#
# Usage: run-on-gpu.sh [--dry-run] [--quick-calib] [--build-dir DIR] [--save-profile FILE] OUTDIR
#   --quick-calib        offsim-calib --quick (under a minute) instead of the full run
#   --build-dir DIR      use an existing build of this tree instead of building
#   --save-profile FILE  copy the measured profile to FILE (default on an H200:
#                        scenarios/profiles/h200-measured.ini; on other GPUs: not copied)
# Environment: PYTHON (default: the first of python3, /usr/bin/python3 that
# imports torch), JOBS (default: nproc).
set -euo pipefail

usage() {
  sed -n 's/^# Usage: //p' "$0" >&2
  exit "$1"
}

dry_run=0
quick_calib=0
build_dir=
save_profile=
out=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --quick-calib) quick_calib=1 ;;
    --build-dir) [ $# -ge 2 ] || usage 2; build_dir=$2; shift ;;
    --save-profile) [ $# -ge 2 ] || usage 2; save_profile=$2; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "run-on-gpu.sh: unknown option $1" >&2; usage 2 ;;
    *) [ -z "$out" ] || usage 2; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || usage 2

src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$SECONDS
log() { printf '[%3ds] %s\n' $((SECONDS - start)) "$*" >&2; }
fail() { printf 'run-on-gpu.sh: %s\n' "$1" >&2; exit "${2:-1}"; }
# Runs a stage with a time limit (one that hangs must not eat the budget of
# the rest), its output shown and kept in LOG; a failure stops everything
# with the stage's status.  Usage: stage SECONDS LOG COMMAND...
stage() {
  local seconds=$1 stage_log=$2 status
  shift 2
  local run=("$@")
  if command -v timeout >/dev/null 2>&1; then run=(timeout "$seconds" "$@"); fi
  set +e
  "${run[@]}" 2>&1 | tee "$stage_log" >&2
  status=${PIPESTATUS[0]}
  set -e
  [ "$status" = 0 ] && return 0
  [ "$status" = 124 ] && fail "$(basename "$1") ran past ${seconds}s: $stage_log" "$status"
  [ "$status" = 3 ] && [ $dry_run = 0 ] && fail "$(basename "$1") found no GPU; without one, use --dry-run" 3
  fail "$(basename "$1") failed with status $status: $stage_log" "$status"
}

if [ -z "${PYTHON:-}" ]; then
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
      PYTHON=$candidate
      break
    fi
  done
fi
[ -n "${PYTHON:-}" ] || fail "no python3 that imports torch (set PYTHON)" 3

# 1. Build.
if [ -n "$build_dir" ]; then
  build=$(cd "$build_dir" && pwd)
  log "using the build in $build"
else
  build=$out/build
  cuda=ON
  [ $dry_run = 1 ] && cuda=AUTO
  log "building into $build (OFFSIM_CUDA=$cuda)"
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DOFFSIM_CUDA=$cuda \
    >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log" >&2; fail "cmake failed: $out/build.log"; }
  cmake --build "$build" -j"${JOBS:-$(nproc)}" >>"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; fail "the build failed: $out/build.log"; }
fi
offsim=$build/cli/offsim
calib=$build/gpu_calib/offsim-calib
[ -x "$offsim" ] || fail "no offsim in $build"

# 2. The Python (python/offsim_torch, run as a package from the source tree), compiled; no
# byte code in the source tree.
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
PYTHONPYCACHEPREFIX=$out/pycache "$PYTHON" -m py_compile "$src"/python/offsim_torch/*.py || fail "the Python does not compile"
log "python: $PYTHON ($("$PYTHON" -c 'import torch; print("torch", torch.__version__)'))"

# The GEMM list of the calibration: the two models the ground truths and the
# kernel model are checked on, NAME=HIDDEN,FFN,HEADS,KV_HEADS,HEAD_DIM,VOCAB,TOKENS.
gemm_models=(--gemm-model llama3.1-8b=4096,14336,32,8,128,128256,4096
             --gemm-model qwen2.5-0.5b=896,4864,14,2,64,151936,1024)

if [ $dry_run = 1 ]; then
  profile=$src/scenarios/profiles/h100-sxm-pcie-gen5.ini
  presets=(tiny)
  device=cpu
  # A failed check stops the dry run (CTest runs it).
  extra=(--warmup 1 --repeats 3 --check)
  if [ -x "$calib" ]; then log "offsim-calib built: $calib (not run: dry run)"; fi
  echo "kernel model: not measured (dry run)" >"$out/kernel-model.txt"
else
  [ -x "$calib" ] || fail "no offsim-calib in $build: is the CUDA toolkit installed?"
  profile=$out/profile.ini
  mode=()
  # The full calibration is sized for about a minute on an H100 (at most
  # five), the two ground truths for about three.  A slow build leaves less:
  # go quick.
  if [ $quick_calib = 1 ] || [ $((SECONDS - start)) -gt 150 ]; then mode=(--quick); fi
  log "offsim-calib ${mode[*]:-(full)} --out $profile ${gemm_models[*]}"
  stage 330 "$out/calib.log" "$calib" ${mode[@]+"${mode[@]}"} --out "$profile" "${gemm_models[@]}"
  # The kernel model's block closes the log.
  sed -n '/^kernel model, as written to \[device\]:/,$p' "$out/calib.log" >"$out/kernel-model.txt"
  if [ -z "$save_profile" ] && grep -q '^device = .*H200' "$profile"; then
    save_profile=$src/scenarios/profiles/h200-measured.ini
  fi
  if [ -n "$save_profile" ]; then
    cp "$profile" "$save_profile"
    log "profile copied to $save_profile"
  else
    log "profile not copied into scenarios/profiles (not an H200; --save-profile FILE copies it)"
  fi
  presets=(qwen0.5b qwen1.5b)
  device=cuda
  # No --check: GPU time is precious, so a way whose gradients differ still
  # gets its row; the table marks it and the script then exits 1.
  extra=()
fi

# 3 and 4. Ground truth, then offsim on the same workload.
pairs=()
for preset in "${presets[@]}"; do
  log "ground_truth.py --preset $preset --device $device"
  stage 200 "$out/truth-$preset.log" "$PYTHON" -m offsim_torch.ground_truth --preset "$preset" \
    --device "$device" ${extra[@]+"${extra[@]}"} --out "$out/truth-$preset.json" \
    --write-scenario "$out/truth-$preset.ini" --profile "$profile"
  "$offsim" compare "$out/truth-$preset.ini" >"$out/predicted-$preset.txt"
  "$offsim" compare "$out/truth-$preset.ini" --format json >"$out/predicted-$preset.json"
  pairs+=("$out/truth-$preset.json" "$out/predicted-$preset.json")
done

# 5. The framework handlers.  GPU: bf16 at batch 66 x 256 (the filters' sizes:
# some tensors above and some below TE's 2^18 and Megatron's 2^20 elements).
# Dry run: fp32 at 4 x 64 on CPU with the filters scaled to that size.
if [ $dry_run = 1 ]; then
  fw_args=(--device cpu --batch 4 --seq 64 --te-min 16384 --megatron-min 8192 --check)
else
  fw_args=(--device cuda --dtype bf16 --batch 66 --seq 256)
fi
log "frameworks.py ${fw_args[*]}"
stage 240 "$out/frameworks.log" "$PYTHON" -m offsim_torch.frameworks "${fw_args[@]}" \
  --out "$out/frameworks.json" --write-scenario "$out/frameworks.ini" --profile "$profile"
grep '^|\|^[a-z_]*: kept\|finding' "$out/frameworks.log" >"$out/frameworks.txt" || true
# offsim reads `framework =` once the presets are in; until then it names the key.
if "$offsim" compare "$out/frameworks.ini" >"$out/frameworks-predicted.txt" 2>"$out/frameworks-predicted.err"; then
  log "offsim compare on the frameworks scenario: $out/frameworks-predicted.txt"
else
  log "offsim cannot read the frameworks scenario yet: $(head -n 1 "$out/frameworks-predicted.err")"
fi

# 6. The tables, last.
log "done in $((SECONDS - start)) s; everything is in $out"
cat "$out/kernel-model.txt"
echo "frameworks.py ${fw_args[*]}$([ $dry_run = 1 ] && echo ' (dry run: CPU stand-in streams, counts only)'):"
cat "$out/frameworks.txt"
if [ -s "$out/frameworks-predicted.txt" ]; then cat "$out/frameworks-predicted.txt"; fi
"$PYTHON" -m offsim_torch.compare_table "${pairs[@]}" | tee "$out/table.txt"
