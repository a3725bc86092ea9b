#!/bin/sh
# Golden outputs: nothing changes for users.  Every bundled scenario
# (scenarios/*.ini, and the embedded default) goes through every user-facing
# command but bench (which measures time): compare in table, csv and json,
# with --plot-script and under three budgets; run for each of the scenario's
# policies in table, csv and json, with its --timeline, --memory, --trace and
# --plot-script files; plan under the same three budgets (one too small:
# exit 4); sweep on tiny.ini; model for each scenarios/models/*.json, with and
# without --profile and with other --dtype/--attention/--optimizer; budget on
# scenarios/budget/chapter42.csv.  For each case the stdout, the stderr, the
# exit status (tests/data/golden/CASES, with the command line) and every file
# written are compared byte for byte with tests/data/golden/.  Files over
# 100 KiB are kept as their sha256 only (tests/data/golden/SHA256SUMS).
#
# Usage: golden.sh OFFSIM_BINARY REPO_ROOT [--record | --part PART]
# --part PART runs and compares one part only: `embedded`, a scenario's name
# (`tiny` for scenarios/tiny.ini), `sweep`, `model` or `budget` (the first
# directory of a case's name).  CTest runs the parts as tests of their own
# (golden_PART), side by side and each under its own timeout, so that a slow
# machine under ASan finishes every part: the whole took close to its one
# timeout there.  --record always records the whole.
# It runs from a scratch directory holding a copy of scenarios/, so that the
# outputs carry relative paths only, wherever the repository is.
#
# Re-record deliberately, from the repository root, with
#   tests/golden.sh build/cli/offsim . --record
# and only when an output change is intended; the commit that changes
# tests/data/golden/ must say which output changed and why.  A refactor must
# pass this test without re-recording.
set -eu
LC_ALL=C
export LC_ALL
usage() {
  echo "usage: $0 OFFSIM_BINARY REPO_ROOT [--record | --part PART]" >&2
  exit 2
}
[ $# -ge 2 ] && [ $# -le 4 ] || usage
record=no
part=
case $# in
  3) [ "$3" = --record ] || usage; record=yes ;;
  4) [ "$3" = --part ] && [ -n "$4" ] || usage; part=$4 ;;
esac
# want NAME: whether cases of the part NAME run (all of them without --part).
want() {
  [ -z "$part" ] || [ "$part" = "$1" ]
}
[ -x "$1" ] || { echo "golden: $1 is not an executable" >&2; exit 2; }
offsim=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
golden=$src/tests/data/golden
big=102400  # bytes (100 KiB); larger files are stored as a sha256 line

work=$(mktemp -d "${TMPDIR:-/tmp}/offsim-golden.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
mkdir "$work/run" "$work/stored"
cp -R "$src/scenarios" "$work/run/scenarios"
cd "$work/run"
out=out
mkdir "$out"

# c NAME ARGS...: one case.  Runs offsim ARGS... here; its stdout goes to
# out/NAME.stdout, its stderr to out/NAME.stderr (dropped when empty), and
# "NAME<TAB>status<TAB>offsim ARGS" to out/CASES.  Files the command writes
# are named out/NAME.* by the caller.
# Cases run $jobs at a time (GOLDEN_JOBS, default every core), each writing
# only its own files; CASES is written in call order once all are done
# (cases_done), so the outputs do not depend on the job count.
jobs=${GOLDEN_JOBS:-$(nproc 2>/dev/null || echo 1)}
n=0
running=0
c() {
  name=$1
  shift
  n=$((n + 1))
  mkdir -p "$out/$(dirname "$name")"
  printf '%s\t' "$name" >"$work/name.$n"
  printf 'offsim %s\n' "$*" >"$work/cmd.$n"
  (
    rc=0
    "$offsim" "$@" >"$out/$name.stdout" 2>"$out/$name.stderr" </dev/null || rc=$?
    [ -s "$out/$name.stderr" ] || rm -f "$out/$name.stderr"
    printf '%s\t' "$rc" >"$work/rc.$n"
  ) &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
}
# Waits for every case started; a case's files are read only after this.
cases_done() {
  wait
  running=0
}

# Three budgets per scenario: too small for any plan (plan exits 4), tight
# (close to the smallest peak a plan reaches) and roomy (between that and the
# resident peak); each gives a different plan.
budgets() {
  case $1 in
    default | qwen2.5-0.5b) echo 8.5GiB 9GiB 9.5GiB ;;
    gpt3-175b-tp8-sp) echo 42GiB 43GiB 45GiB ;;
    llama-3.1-8b | llama-3.1-8b-gh200) echo 39GiB 41GiB 56.6GiB ;;
    tiny) echo 1GiB 1.2GiB 1.25GiB ;;
    pipeline-tiny) echo 300MB 500MB 600MB ;;
    llama-3.1-8b-pp4) echo 50GiB 60GiB 70GiB ;;
    llama-3.1-8b-dp8) echo 20GiB 30GiB 50GiB ;;
    *) echo "golden: no budgets for scenarios/$1.ini: add three to budgets() in $0" >&2; exit 2 ;;
  esac
}

# The embedded default scenario.
if want embedded; then
  c embedded/compare-table compare
  c embedded/compare-csv compare --format csv
  c embedded/compare-json compare --format json
  c embedded/run-table run
fi

for ini in scenarios/*.ini; do
  s=$(basename "$ini" .ini)
  want "$s" || continue
  c "$s/compare-table" compare "$ini"
  c "$s/compare-csv" compare "$ini" --format csv
  c "$s/compare-json" compare "$ini" --format json
  c "$s/compare-plot" compare "$ini" --plot-script "$out/$s/compare-plot.gp"
  cases_done
  policies=$(sed -n 's/^      "policy": "\(.*\)",$/\1/p' "$out/$s/compare-json.stdout")
  [ -n "$policies" ] || { echo "golden: no policies in $s's compare --format json" >&2; exit 1; }
  for p in $policies; do
    c "$s/run-$p-table" run "$ini" --policy "$p" \
      --timeline "$out/$s/run-$p-table.timeline.csv" --memory "$out/$s/run-$p-table.memory.csv" \
      --trace "$out/$s/run-$p-table.trace.json" --plot-script "$out/$s/run-$p-table.plot.gp"
    c "$s/run-$p-csv" run "$ini" --policy "$p" --format csv
    c "$s/run-$p-json" run "$ini" --policy "$p" --format json
  done
  bl=$(budgets "$s")
  i=0
  for b in $bl; do
    i=$((i + 1))
    c "$s/compare-budget$i-$b" compare "$ini" --budget "$b"
    c "$s/plan-budget$i-$b-table" plan "$ini" --budget "$b"
    c "$s/plan-budget$i-$b-json" plan "$ini" --budget "$b" --format json
  done
done

# sweep: two keys on the small scenario, every point and one shard to a file;
# a value the scenario rejects.
if want sweep; then
c sweep/tiny-bandwidth-forward sweep scenarios/tiny.ini --set link.h2d_bandwidth=10GB/s,25GB/s,55GB/s \
  --set model.forward=1ms,2ms --jobs 2
c sweep/tiny-shard sweep scenarios/tiny.ini --set link.h2d_bandwidth=10GB/s,25GB/s \
  --set link.latency=2us,20us --shard 1/2 --jobs 2 --out "$out/sweep/tiny-shard.csv"
c sweep/tiny-bad-layers sweep scenarios/tiny.ini --set model.layers=2,4 --jobs 2
fi

# model: every config, with and without a profile, other dtypes and attention.
want model && for json in scenarios/models/*.json; do
  m=$(basename "$json" .json)
  c "model/$m" model --hf-config "$json" --batch 2 --seq 512
  c "model/$m-eager" model --hf-config "$json" --batch 2 --seq 512 --attention eager
  c "model/$m-fp32" model --hf-config "$json" --batch 1 --seq 1024 --dtype fp32
  c "model/$m-fp16-eager-noopt" model --hf-config "$json" --batch 4 --seq 256 --dtype fp16 \
    --attention eager --optimizer none --name custom
  for prof in scenarios/profiles/*.ini; do
    c "model/$m-$(basename "$prof" .ini)" model --hf-config "$json" --batch 2 --seq 512 --profile "$prof"
  done
done
want model && c model/missing-seq model --hf-config scenarios/models/qwen2.5-0.5b.json --batch 2

# budget: the chapter's ledger, both formats, other budgets and thresholds.
ch=scenarios/budget/chapter42.csv
if want budget; then
c budget/384MiB-table budget "$ch" --budget 384MiB --bandwidth 8GiB/s
c budget/384MiB-json budget "$ch" --budget 384MiB --bandwidth 8GiB/s --format json
c budget/1GiB-table budget "$ch" --budget 1GiB --bandwidth 8GiB/s
c budget/1GiB-json budget "$ch" --budget 1GiB --bandwidth 8GiB/s --format json
c budget/256MiB-checkpoint-table budget "$ch" --budget 256MiB --bandwidth 8GiB/s \
  --checkpoint-saved 256MiB --checkpoint-extra 20ms
c budget/256MiB-checkpoint-json budget "$ch" --budget 256MiB --bandwidth 8GiB/s \
  --checkpoint-saved 256MiB --checkpoint-extra 20ms --format json
c budget/512MiB-thresholds-table budget "$ch" --budget 512MiB --bandwidth 16GiB/s \
  --min-saved-ratio 0.5 --max-transfer 30ms
c budget/missing-bandwidth budget "$ch" --budget 384MiB
c budget/bandwidth-without-unit budget "$ch" --budget 384MiB --bandwidth 8.0
fi

cases_done
i=1
while [ "$i" -le "$n" ]; do
  cat "$work/name.$i" "$work/rc.$i" "$work/cmd.$i"
  i=$((i + 1))
done >"$out/CASES"

# What is kept: every file, those over $big bytes as a sha256 line instead.
cp -R "$out/." "$work/stored/"
cd "$work/stored"
: >SHA256SUMS
find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | while IFS= read -r f; do
  if [ "$(wc -c <"$f")" -gt "$big" ]; then
    sha256sum "$f" >>SHA256SUMS
    rm "$f"
  fi
done

if [ "$record" = yes ]; then
  rm -rf "$golden"
  mkdir -p "$golden"
  cp -R "$work/stored/." "$golden/"
  echo "golden: recorded $(wc -l <CASES) cases, $(du -sk "$golden" | cut -f1) KiB, into $golden"
  exit 0
fi

[ -d "$golden" ] || { echo "golden: $golden is missing; record it with $0 OFFSIM_BINARY REPO_ROOT --record" >&2; exit 1; }
[ "$n" -gt 0 ] || { echo "golden: no part '$part' (expected embedded, a scenario's name, sweep, model or budget)" >&2; exit 2; }
# With --part, what is expected is that part of the record: its directory,
# its lines of CASES and of SHA256SUMS.
if [ -n "$part" ]; then
  expected=$work/expected
  mkdir "$expected"
  [ ! -d "$golden/$part" ] || cp -R "$golden/$part" "$expected/$part"
  awk -F '\t' -v p="$part/" 'index($1, p) == 1' "$golden/CASES" >"$expected/CASES"
  awk -v p="$part/" 'index($2, p) == 1' "$golden/SHA256SUMS" >"$expected/SHA256SUMS"
  golden=$expected
fi
# case_of FILE CASES: the case (and its command line) that wrote FILE.
case_of() {
  awk -F '\t' -v f="$1" 'index(f, $1 ".") == 1 && length($1) > length(best) { best = $1; line = $0 }
    END { if (best != "") { split(line, a, "\t"); printf "case %s (exit %s: %s)", a[1], a[2], a[3] } else printf "no case of that name" }' \
    "$2"
}
(cd "$golden" && find . -type f | sed 's|^\./||' | sort) >"$work/golden.list"
find . -type f | sed 's|^\./||' | sort >"$work/actual.list"
differ=0
excerpts=0
excerpt() { # excerpt OLD NEW: diff -u of the first ~40 lines, for the first 20 files
  excerpts=$((excerpts + 1))
  [ "$excerpts" -le 20 ] || return 0
  diff -u --label "golden/$3" --label "now/$3" "$1" "$2" | head -n 40 || true
}
for f in $(comm -23 "$work/golden.list" "$work/actual.list"); do
  differ=$((differ + 1))
  echo "golden: $f is no longer written, $(case_of "$f" "$golden/CASES")"
done
for f in $(comm -13 "$work/golden.list" "$work/actual.list"); do
  differ=$((differ + 1))
  echo "golden: $f is new, $(case_of "$f" CASES)"
  excerpt /dev/null "$f" "$f"
done
for f in $(comm -12 "$work/golden.list" "$work/actual.list"); do
  cmp -s "$golden/$f" "$f" && continue
  if [ "$f" = SHA256SUMS ]; then
    # The large files: name each one whose hash changed.
    for g in $(diff "$golden/SHA256SUMS" SHA256SUMS | sed -n 's/^[<>] [0-9a-f]*  //p' | sort -u); do
      differ=$((differ + 1))
      echo "golden: $g (kept as its sha256) differs, $(case_of "$g" CASES)"
    done
    excerpt "$golden/$f" "$f" "$f"
  else
    differ=$((differ + 1))
    echo "golden: $f differs, $(case_of "$f" CASES)"
    excerpt "$golden/$f" "$f" "$f"
  fi
done
if [ "$differ" -gt 0 ]; then
  # Every output in full, the large ones included, for a closer look.
  # One folder per part: parts run side by side under CTest.
  keep=${TMPDIR:-/tmp}/offsim-golden-actual${part:+-$part}
  rm -rf "$keep" && cp -R "$work/run/out" "$keep"
  echo "golden: this build's outputs, in full, are in $keep"
  echo "golden: $differ outputs differ from tests/data/golden (re-record only for an intended, explained change: $0 OFFSIM_BINARY REPO_ROOT --record)"
  exit 1
fi
echo "golden: $(wc -l <"$golden/CASES") cases, every output identical to tests/data/golden"
