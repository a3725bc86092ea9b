#!/bin/sh
# The peers against offsim: for each case, the scenario file scenario.py writes
# is run by offsim (`run SCENARIO --policy async --format json`, with
# --timeline to count its ops) and the same parameters by heapq_step.py and
# simpy_step.py.  The step must agree to 1e-9 relative, the device and host
# peaks to the byte and the op count exactly.  Exit 1 on any mismatch.
#
# Besides the brief's 4x2, 24x8 and 96x32 (keep_last 0, and 1 as offsim's
# async default), the cases cover a transfer-bound link, prefetch 2 and 0,
# inflight 3, and exact ties: with latency 0, 1000 MiB/s and a 3 ms forward,
# a layer's last copy out ends at the very instant the forward two layers on
# starts, and the peak is 2 MiB lower only if every end of an instant is
# applied before its starts, as offsim does (a peer that takes the peak at
# each action in SimPy's order, or that does not batch an instant, reports
# 2 MiB more there).
#
#   bench/peers/check.sh [OFFSIM]      (default build-rel/cli/offsim)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
offsim=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build-rel/cli/offsim}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# layers tensors, then the scenario options (scenario.py --help)
cases='4 2 --workspace-mib 64 --static-mib 1024
24 8 --workspace-mib 64 --static-mib 1024
96 32 --workspace-mib 64 --static-mib 1024
4 2 --workspace-mib 64 --static-mib 1024 --keep-last 1
24 8 --workspace-mib 64 --static-mib 1024 --keep-last 1
96 32 --workspace-mib 64 --static-mib 1024 --keep-last 1
24 8 --workspace-mib 64 --static-mib 1024 --bandwidth-gbs 5
24 8 --workspace-mib 64 --static-mib 1024 --prefetch 2 --inflight 3
24 8 --workspace-mib 64 --static-mib 1024 --prefetch 0
24 8 --workspace-mib 64 --static-mib 1024 --latency-ns 0 --bandwidth-gbs 8
6 2 --workspace-mib 64 --static-mib 1024 --latency-ns 0 --bandwidth-mibs 1000 --forward-us 3000 --inflight 3
48 2 --workspace-mib 64 --static-mib 1024 --latency-ns 0 --bandwidth-mibs 1000 --forward-us 3000 --inflight 3
100 32 --keep-last 1'

status=0
printf '%-70s %-7s %-22s %-12s %-14s %-6s %s\n' case peer step_ms rel_err peak_device peak_host ops
echo "$cases" | while read -r layers tensors opts; do
  args="--layers $layers --tensors $tensors $opts"
  # shellcheck disable=SC2086
  $py "$here/scenario.py" $args >"$tmp/s.ini"
  "$offsim" run "$tmp/s.ini" --policy async --format json --timeline "$tmp/tl.csv" >"$tmp/offsim.json"
  for peer in heapq simpy; do
    # shellcheck disable=SC2086
    $py "$here/${peer}_step.py" $args --repeats 1 --warmup 0 >"$tmp/$peer.json"
  done
  $py - "$tmp" "$layers"x"$tensors $opts" <<'EOF' || exit 1
import json, sys
tmp, case = sys.argv[1], sys.argv[2]
ref = json.load(open(tmp + "/offsim.json"))
ref_ops = sum(1 for _ in open(tmp + "/tl.csv")) - 1
bad = False
print("%-70s %-7s %-22r %-12s %-14d %-6s %d" % (case, "offsim", ref["step_ms"], "", ref["peak_device_bytes"],
                                              "", ref_ops))
for peer in ("heapq", "simpy"):
    r = json.load(open("%s/%s.json" % (tmp, peer)))
    rel = abs(r["step_ms"] - ref["step_ms"]) / ref["step_ms"]
    ok = (rel <= 1e-9 and r["peak_device_bytes"] == ref["peak_device_bytes"]
          and r["peak_host_bytes"] == ref["peak_host_bytes"] and r["ops"] == ref_ops)
    print("%-70s %-7s %-22r %-12.2e %-14d %-6s %d%s" % (
        "", peer, r["step_ms"], rel, r["peak_device_bytes"],
        "same" if r["peak_host_bytes"] == ref["peak_host_bytes"] else "DIFF", r["ops"],
        "" if ok else "   MISMATCH"))
    bad |= not ok
sys.exit(1 if bad else 0)
EOF
done || status=1
if [ "$status" -ne 0 ]; then
  echo "check: MISMATCH" >&2
  exit 1
fi
echo "check: all cases agree (step to 1e-9 relative, device and host peaks to the byte, op counts)"
