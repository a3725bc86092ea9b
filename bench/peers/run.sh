#!/bin/sh
# Reproduces bench/peers/README.md's table: the check, then the interleaved
# rounds (SimPy, heapq, offsim; measure.py), then offsim's own scale rows once.
#
#   bench/peers/run.sh [OFFSIM] [OUT_DIR]     (defaults build-rel/cli/offsim, bench/peers/results)
#
# ROUNDS (default 5) and SIZES (default 96,1000,10000) override the rounds and
# the layer counts.  SCALE=0 skips `offsim bench --only scale`, whose 10^6-layer
# row holds about 9 GB for a few seconds.  About three minutes on 2 cores; run
# nothing else heavy meanwhile.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
offsim=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build-rel/cli/offsim}
out=${2:-$here/results}
mkdir -p "$out"

"$here/check.sh" "$offsim"

/usr/bin/python3 "$here/measure.py" --offsim "$offsim" --rounds "${ROUNDS:-5}" --sizes "${SIZES:-96,1000,10000}" \
  --out "$out/rounds.json" >"$out/table.md"
cat "$out/table.md"

if [ "${SCALE:-1}" != 0 ]; then
  /usr/bin/time -v "$offsim" bench --only scale --format json >"$out/bench-scale.json" 2>"$out/bench-scale.time"
  cat "$out/bench-scale.json"
  grep -E 'Elapsed|Maximum resident' "$out/bench-scale.time"
fi
