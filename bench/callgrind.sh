#!/bin/sh
# Instructions per engine event and per 96x32 async step, counted by
# callgrind inside bench/instructions.c's measure_* functions (the second
# call of each: the first grows the buffers).  Repeatable to the instruction
# for one binary, whatever else the machine is doing.
# Usage: bench/callgrind.sh BUILD_DIR
set -eu
bin=$1/bench/offsim-instructions
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # workload -> "instructions output"
  valgrind --tool=callgrind --callgrind-out-file="$tmp/$1.out" --toggle-collect="measure_$1" "$bin" "$1" \
    > "$tmp/$1.txt" 2> /dev/null
  # The toggled count covers both calls; the first grew the buffers.
  total=$(callgrind_annotate "$tmp/$1.out" 2> /dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  echo "$total $(cat "$tmp/$1.txt")"
}
set -- $(count engine)
echo "engine: $1 instructions for two runs of $3 events: $(( $1 / 2 / $3 )) per event"
set -- $(count step)
echo "step 96x32: $1 instructions for 20 steps of $5 ops: $(( $1 / 20 )) per step, $(( $1 / 20 / $5 )) per op"
