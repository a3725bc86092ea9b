#!/bin/sh
# Runs every fuzz target for SECONDS each, at most two at a time, and says
# which found something.  Builds build-fuzz first (clang, OFFSIM_FUZZ=ON) when
# it is missing.  New inputs go to a scratch corpus beside the logs; the
# committed corpora (tests/fuzz/corpus/TARGET) are only read, unless
# OFFSIM_FUZZ_MERGE=1 merges what was found back into them, minimised.
# A crash, leak or hang leaves its input in OUT/TARGET/ as crash-*, leak-*,
# timeout-* or oom-*: copy it to tests/data/regress/ (see README.md here).
# Usage: tests/fuzz/run.sh SECONDS [TARGET...]
#   env: OFFSIM_FUZZ_OUT (default build-fuzz/fuzz-out), OFFSIM_FUZZ_JOBS (2),
#        OFFSIM_FUZZ_MAX_LEN (262144: inputs up to 256 KiB, so that nesting
#        100,000 deep (200 KB) and 64 KiB lines are in reach)
set -eu
[ $# -ge 1 ] || { echo "usage: $0 SECONDS [TARGET...]" >&2; exit 2; }
seconds=$1
shift
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-fuzz
out=${OFFSIM_FUZZ_OUT:-$build/fuzz-out}
jobs=${OFFSIM_FUZZ_JOBS:-2}
max_len=${OFFSIM_FUZZ_MAX_LEN:-262144}
targets=${*:-units scenario profile hf_config trace budget snapshot}

if [ ! -x "$build/tests/fuzz/fuzz_units" ]; then
  CC=clang cmake -S "$src" -B "$build" -DOFFSIM_FUZZ=ON -DBUILD_TESTING=OFF -DOFFSIM_CUDA=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >"$build/fuzz-build.log" 2>&1 || { cat "$build/fuzz-build.log"; exit 1; }

fuzz_one() { # target
  mkdir -p "$out/$1/new"
  # -timeout: one input may take 10 s (hang); -rss_limit_mb: 2 GiB (runaway memory);
  # -max_len: libFuzzer's default is the largest seed, too short for deep nesting.
  "$build/tests/fuzz/fuzz_$1" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 \
    -dict="$src/tests/fuzz/$1.dict" -artifact_prefix="$out/$1/" "$out/$1/new" "$src/tests/fuzz/corpus/$1" \
    </dev/null >"$out/$1.log" 2>&1
}

status=0
running=0
for t in $targets; do
  echo "fuzz_$t: ${seconds}s, log in $out/$t.log"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then # every target runs as long: batches lose nothing
    wait
    running=0
  fi
done
wait

for t in $targets; do
  found=$(ls "$out/$t" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' || true)
  stats=$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$out/$t.log" | sed 's/^stat:://' | tr '\n' ' ')
  if [ -n "$found" ]; then
    echo "fuzz_$t: FOUND $(echo "$found" | tr '\n' ' ')($stats)"
    status=1
  else
    echo "fuzz_$t: nothing found ($stats)"
  fi
  if [ "${OFFSIM_FUZZ_MERGE:-0}" = 1 ]; then
    # Edges only (no hit counts): what adds a branch, not every loop count.
    "$build/tests/fuzz/fuzz_$t" -merge=1 -use_counters=0 "$src/tests/fuzz/corpus/$t" "$out/$t/new" >/dev/null 2>&1
  fi
done
exit $status
