#!/bin/sh
# Keeps README.md's "Recording your own model" true: its recorder command
# reproduces the committed CSV and JSON byte for byte (written to a scratch
# directory instead), and `offsim compare` on the committed scenario prints
# the output the README shows.
# Usage: readme_recorder.sh OFFSIM_BINARY SOURCE_DIR   (exit 77 without torch)
set -eu
offsim=$1
src=$2
readme=$src/README.md
python=/usr/bin/python3
fail() { echo "readme_recorder: $*" >&2; exit 1; }
"$python" -c 'import torch' >/dev/null 2>&1 || { echo "readme_recorder: torch is not installed: skipped"; exit 77; }

commands=$(awk '/<!-- recorder-commands:begin -->/{m=1; next} /<!-- recorder-commands:end -->/{m=0} m&&!/^```/' "$readme")
[ "$(printf '%s\n' "$commands" | wc -l)" -eq 2 ] || fail "expected two commands between the recorder-commands markers"
record=$(printf '%s\n' "$commands" | sed -n 1p)
compare=$(printf '%s\n' "$commands" | sed -n 2p)
case $record in "PYTHONPATH=python $python -m offsim_torch.recorder "*" --out "*.csv) ;; *) fail "the first command must run PYTHONPATH=python $python -m offsim_torch.recorder and end with --out FILE.csv" ;; esac
case $compare in "./build/cli/offsim compare "*) ;; *) fail "the second command must be ./build/cli/offsim compare" ;; esac

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
out=${record##* --out }
# shellcheck disable=SC2086 # the command's words split on purpose; env, for its PYTHONPATH=
(cd "$src" && env ${record% --out *} --out "$scratch/t.csv") 2>"$scratch/err" || fail "'$record' failed: $(cat "$scratch/err")"
cmp -s "$scratch/t.csv" "$src/$out" || fail "$out is not what '$record' writes"
cmp -s "$scratch/t.json" "$src/${out%.csv}.json" || fail "${out%.csv}.json is not what '$record' writes"

shown=$(awk '/<!-- recorder-compare-output -->/{m=1; next} m&&/^```$/{if(in_block){exit} in_block=1; next} m&&in_block{print}' "$readme")
# shellcheck disable=SC2086
actual=$(cd "$src" && "$offsim" ${compare#./build/cli/offsim } 2>&1) || fail "'$compare' failed: $actual"
[ "$shown" = "$actual" ] || fail "README's recorder output differs from '$compare': $actual"
echo "readme_recorder: the recorder command reproduces $out and offsim compare prints what README.md shows"
