#!/bin/sh
# Seeds the fuzz corpora from the repository's own inputs, into
# tests/fuzz/corpus/<target>/ (run once; run.sh merges what the fuzzers find).
#   units      every value of every bundled and test scenario
#   scenario   every scenario of scenarios/ and tests/data/scenario/, each as
#              one bundle with the files it includes and reads (see
#              fuzz_scenario.c for the "#@@ NAME" format), plus one [trace]
#   profile    scenarios/profiles/*.ini and tests/data/calib/*.ini
#   hf_config  scenarios/models/*.json
#   trace      tests/data/trace/*.csv
#   budget     scenarios/budget/*.csv and tests/data/budget/*.csv
# Usage: tests/fuzz/seed.sh
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
corpus=$src/tests/fuzz/corpus
for t in units scenario profile hf_config trace budget; do mkdir -p "$corpus/$t"; done

# A file under its content's hash, as libFuzzer names corpus entries.
keep() { # target file
  cp "$2" "$corpus/$1/$(sha1sum "$2" | cut -c1-40)"
}

# The files a scenario reads, transitively, relative to the top file's folder.
references() { # file topdir depth (a cycle stops at depth 8)
  [ "$3" -lt 8 ] || return 0
  sed -n 's/^[[:space:]]*\(include\|hf_config\|file\)[[:space:]]*=[[:space:]]*//p' "$1" | tr ',' '\n' |
    sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | while read -r ref; do
      [ -n "$ref" ] && [ -f "$(dirname "$1")/$ref" ] || continue
      realpath --relative-to="$2" "$(dirname "$1")/$ref"
      case $ref in *.ini) references "$(dirname "$1")/$ref" "$2" $(($3 + 1)) ;; esac
    done
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for top in "$src"/scenarios/*.ini "$src"/tests/data/scenario/*.ini; do
  topdir=$(dirname "$top")
  bundle=$scratch/bundle
  cat "$top" > "$bundle"
  for ref in $(references "$top" "$topdir" 0 | sort -u); do
    case $ref in ../*) continue ;; esac
    printf '#@@ %s\n' "$ref" >> "$bundle"
    cat "$topdir/$ref" >> "$bundle"
  done
  keep scenario "$bundle"
  sed -n 's/^[a-z_0-9.]*[[:space:]]*=[[:space:]]*//p' "$top" | while IFS= read -r value; do
    printf '%s' "$value" > "$scratch/value"
    keep units "$scratch/value"
  done
done
# A [trace] scenario: the top file and the recording it names.
{
  printf '[scenario]\nname = traced\n[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\n'
  printf '[trace]\nfile = t.csv\nforward = 1ms\nworkspace = 1MiB\n#@@ t.csv\n'
  cat "$src/tests/data/trace/qwen2-tiny.csv"
} > "$scratch/bundle"
keep scenario "$scratch/bundle"
for f in "$src"/scenarios/profiles/*.ini "$src"/tests/data/calib/*.ini; do keep profile "$f"; done
for f in "$src"/scenarios/models/*.json; do keep hf_config "$f"; done
for f in "$src"/tests/data/trace/*.csv; do keep trace "$f"; done
for f in "$src"/scenarios/budget/*.csv "$src"/tests/data/budget/*.csv; do keep budget "$f"; done
for t in units scenario profile hf_config trace budget; do
  echo "$t: $(ls "$corpus/$t" | wc -l) seeds"
done
