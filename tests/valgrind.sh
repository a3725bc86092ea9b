#!/bin/sh
# valgrind memcheck on `offsim compare` over every bundled scenario and the
# embedded default: any error or leak (definite, indirect or
# possible) fails.  It takes about 14 s on the 2-core development machine
# (RelWithDebInfo build, 14 runs), too long for every ctest, so it skips (exit 77) unless
# asked for:
#   OFFSIM_VALGRIND=1 ctest --test-dir build -L valgrind --output-on-failure
# Usage: valgrind.sh OFFSIM_BINARY SCENARIOS_DIR
set -eu
offsim=$1
scenarios=$2
if [ "${OFFSIM_VALGRIND:-0}" != 1 ]; then
  echo "valgrind: skipped; OFFSIM_VALGRIND=1 runs it"
  exit 77
fi
command -v valgrind >/dev/null 2>&1 || { echo "valgrind: not installed (apt-get install valgrind)" >&2; exit 1; }
log=$(mktemp)
script=$(mktemp)
trap 'rm -f "$log" "$script"' EXIT
status=0
memcheck() { # what, then offsim's arguments
  what=$1
  shift
  # GLib's slice allocator would hide frees from valgrind; gc-friendly clears
  # the pointers GLib frees so that no leak hides behind a stale one.
  if G_SLICE=always-malloc G_DEBUG=gc-friendly valgrind --quiet --error-exitcode=99 --leak-check=full \
      --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
      "$offsim" "$@" >/dev/null 2>"$log"; then
    echo "valgrind: $what: no errors, no leaks"
  else
    echo "valgrind: $what: FAILED" >&2
    cat "$log" >&2
    status=1
  fi
}
# The embedded default first (no argument), then every file; each as JSON,
# then as a table with a budget and the plot script (the planner and the
# plots module on the same results).
for scenario in "" "$scenarios"/*.ini; do
  name=${scenario:-(embedded default)}
  memcheck "offsim compare $name --format json" compare ${scenario:+"$scenario"} --format json
  memcheck "offsim compare $name --budget 8GiB --plot-script" compare ${scenario:+"$scenario"} --budget 8GiB \
    --plot-script "$script"
done
exit $status
