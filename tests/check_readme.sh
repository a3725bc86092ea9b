#!/bin/sh
# Keeps README.md true: its two set-up commands, .ci/run and the output it
# shows must agree with each other and with the program, the pictures it
# shows must exist, and its pipeline command must draw its pictures.
# Usage: check_readme.sh OFFSIM_BINARY SOURCE_DIR
# Exits 77 (skipped) after every other check when gnuplot is missing: the
# first command draws plots, so its output cannot be reproduced without it.
set -eu
offsim=$1
src=$2
readme=$src/README.md
fail() { echo "check_readme: $*" >&2; exit 1; }

# The first two ```sh blocks of the quick start, one line each.
commands=$(awk '/^## Quick start/{q=1} q&&/^```sh$/{getline; print; n++; if(n==2) exit}' "$readme")
[ "$(printf '%s\n' "$commands" | wc -l)" -eq 2 ] || fail "README must show two one-line commands"
first=$(printf '%s\n' "$commands" | sed -n 1p)
second=$(printf '%s\n' "$commands" | sed -n 2p)
demo="./build/cli/offsim compare --plot plots-out"
case $first in *"apt-get install"*gnuplot-nox*"&& $demo") ;; *) fail "the first command must install gnuplot-nox, build and end with $demo" ;; esac
case $second in *"apt-get install"*gnuplot-nox*ctest*) ;; *) fail "the second command must install gnuplot-nox, build and run ctest" ;; esac

# .ci/run calls the second command and nothing else.
ci_command=$(grep -v '^#' "$src/.ci/run" | grep -v '^set -eu$' | grep -v '^cd ' | grep -v '^$')
[ "$ci_command" = "$second" ] || fail ".ci/run does not run the README's test command"

# Every picture the README shows is in the repository.
for image in $(sed -n 's/.*!\[[^]]*\](\([^)]*\)).*/\1/p' "$readme"); do
  [ -f "$src/$image" ] || fail "README shows $image, which does not exist"
done

# The lines of `offsim show` shown after their marker are its first lines, from the
# repository root.
shown_show=$(awk '/<!-- offsim-show-output -->/{m=1; next} m&&/^```$/{if(in_block){exit} in_block=1; next} m&&in_block{print}' "$readme")
[ -n "$shown_show" ] || fail "README shows no offsim show output"
show_lines=$(printf '%s\n' "$shown_show" | wc -l)
actual_show=$(cd "$src" && "$offsim" show scenarios/llama-3.1-8b-gh200.ini | head -n "$show_lines")
[ "$shown_show" = "$actual_show" ] || fail "README's offsim show lines differ from the program's: $actual_show"

# The pipeline plan shown after its marker is what `offsim plan` prints for it, from the
# repository root (the command is the one line of the sh block above the marker).
shown_plan=$(awk '/<!-- offsim-plan-pipeline-output -->/{m=1; next} m&&/^```$/{if(in_block){exit} in_block=1; next} m&&in_block{print}' "$readme")
[ -n "$shown_plan" ] || fail "README shows no offsim plan output for a pipeline"
plan_command=$(awk '/<!-- offsim-plan-pipeline-output -->/{print last; exit} /^\.\/build\/cli\/offsim plan /{last=$0}' "$readme")
case $plan_command in "./build/cli/offsim plan scenarios/pipeline-tiny.ini"*) ;; *) fail "no pipeline plan command above its output: '$plan_command'" ;; esac
# shellcheck disable=SC2086 # the command's arguments split on purpose
actual_plan=$(cd "$src" && "$offsim" ${plan_command#./build/cli/offsim }) || fail "'$plan_command' failed"
[ "$shown_plan" = "$actual_plan" ] || fail "README's pipeline plan differs from '$plan_command': $actual_plan"

# The output shown after the marker is what the first command's last step
# prints, report and plot line alike, run from a scratch directory.
command -v gnuplot >/dev/null 2>&1 || {
  echo "check_readme: commands and .ci/run agree; output check skipped: gnuplot is not installed"
  exit 77
}
shown=$(awk '/<!-- offsim-compare-output -->/{m=1; next} m&&/^```$/{if(in_block){exit} in_block=1; next} m&&in_block{print}' "$readme")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck disable=SC2086 # the demo's arguments split on purpose
actual=$(cd "$scratch" && "$offsim" ${demo#./build/cli/offsim } 2>&1) || fail "'$demo' failed: $actual"
[ "$shown" = "$actual" ] || {
  printf '%s\n' "$actual" > "${TMPDIR:-/tmp}/offsim-readme-actual.txt"
  fail "README's output block differs from '$demo' (actual output in ${TMPDIR:-/tmp}/offsim-readme-actual.txt)"
}
for picture in comparison memory timeline-offload-sync timeline-offload-async; do
  [ -s "$scratch/plots-out/$picture.png" ] || fail "'$demo' did not draw plots-out/$picture.png"
done
# ...and nothing outside plots-out/, a folder of its own (git ignores it), not CMake's build tree.
[ "$(ls -A "$scratch")" = plots-out ] ||
  fail "'$demo' wrote outside plots-out: $(cd "$scratch" && find . -mindepth 1 | sort | tr '\n' ' ')"

# The pipeline's command (the sh block after its marker) runs against the bundled scenario,
# from a scratch copy of scenarios/, and draws the timeline the README's picture is made from.
pipeline=$(awk '/<!-- offsim-pipeline-command -->/{m=1; next} m&&/^```sh$/{getline; print; exit}' "$readme")
case $pipeline in "./build/cli/offsim compare scenarios/"*" --plot plots-out/pipeline"*) ;;
  *) fail "the pipeline command must be ./build/cli/offsim compare scenarios/... --plot plots-out/pipeline" ;; esac
mkdir "$scratch/pipeline"
cp -R "$src/scenarios" "$scratch/pipeline/scenarios"
# shellcheck disable=SC2086 # the command's arguments split on purpose
said=$(cd "$scratch/pipeline" && "$offsim" ${pipeline#./build/cli/offsim } 2>&1) || fail "'$pipeline' failed: $said"
for picture in comparison memory timeline-offload timeline-resident; do
  [ -s "$scratch/pipeline/plots-out/pipeline/$picture.png" ] || fail "'$pipeline' did not draw plots-out/pipeline/$picture.png"
done
echo "check_readme: README commands, .ci/run, the shown output and its pictures agree"
