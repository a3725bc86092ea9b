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
#   and for each, deep and long inputs (see the end), named after what they are
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
# Deep and long inputs, which no bundled file has, under names that say what
# they are: nesting past the config.json limit (objects and arrays, directly
# and through a scenario's hf_config), exactly at it, brackets in strings,
# and lines of 64 KiB or thousands of items for each format.
keep_as() { # target name: stdin under that name
  cat > "$corpus/$1/$2"
}
repeat() { # count text
  awk -v n="$1" -v t="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s", t }'
}
gpt2='"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100, "n_positions": 128'
nest() { # depth open close: a GPT-2 config with a value nested depth levels deep in all
  printf '{%s,\n"task_specific_params": ' "$gpt2"
  repeat $(($1 - 1)) "$2"
  printf '0'
  repeat $(($1 - 1)) "$3"
  printf '}\n'
}
nest 1000 '[' ']' | keep_as hf_config deep-arrays-1000.json
nest 1000 '{"a":' '}' | keep_as hf_config deep-objects-1000.json
nest 64 '[' ']' | keep_as hf_config deep-at-limit-64.json
{ printf '{%s, "s": "\\"' "$gpt2"; repeat 10000 '[{'; printf '"}\n'; } | keep_as hf_config brackets-in-string.json
{ printf '{%s, "_name_or_path": "' "$gpt2"; repeat 65536 x; printf '"}\n'; } | keep_as hf_config long-string.json
{
  printf '[device]\nmemory = 80GiB\nmatmul_tflops = 312\nhbm_bandwidth = 2TB/s\n'
  printf '[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\n'
  printf '[transformer]\nhf_config = c.json\nbatch = 2\nseq = 16\n#@@ c.json\n'
  nest 1000 '[' ']'
} | keep_as scenario hf-config-deep-1000
{
  printf '[scenario]\nname = '
  repeat 65536 n
  printf '\n[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\n'
  printf '[model]\nlayers = 4\nforward = 1ms\ninput = 1MiB\ntensors = a:1MiB'
  awk 'BEGIN { for (i = 0; i < 2000; i++) printf ", t%d:%dKiB", i, i % 64 + 1 }'
  printf '\n'
} | keep_as scenario long-lines
{
  printf '[device]\nmemory = 80GiB\n[link]\nh2d_bandwidth = 55GB/s\nd2h_bandwidth = 55GB/s\nh2d_table = 4KiB:1GB/s'
  awk 'BEGIN { for (i = 1; i <= 500; i++) printf ", %dKiB:%d.5GB/s", 4 + 4 * i, 1 + i % 50 }'
  printf '\n'
} | keep_as profile long-table
{ repeat 10000 1; printf 'MB'; } | keep_as units long-number
header='layer,op,name,bytes,dtype,shape,is_parameter,storage,storage_bytes,saved'
# 2,100 names in one layer (x, x#2, ...): more than GLib's first array of
# 2,048 interned strings, which fuzz_common.c keeps LeakSanitizer from
# reporting as a leak when GLib drops it.
{ echo "$header"; awk 'BEGIN { for (i = 0; i < 2100; i++) printf "0,,x,1,,,0,%d,1,1\n", i }'; } |
  keep_as trace interned-names-2100.csv
{ echo "$header"; printf '0,op,'; repeat 65536 n; printf ',1024,float32,16x16,0,0,1024,1\n'; } |
  keep_as trace long-line.csv
{
  echo 'name,bytes,reuse_delay_layers,offloadable'
  repeat 65536 c
  printf ',1048576,2,true\n'
  awk 'BEGIN { for (i = 0; i < 1000; i++) printf "c%d,%d,%d,%s\n", i, 4096 * (i % 97 + 1), i % 13, i % 3 ? "true" : "false" }'
} | keep_as budget long-lines.csv
for t in units scenario profile hf_config trace budget; do
  echo "$t: $(ls "$corpus/$t" | wc -l) seeds"
done
