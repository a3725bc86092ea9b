#!/bin/sh
# Keeps README.md true: its two set-up commands, .ci/run and the output it
# shows must agree with each other and with the program.
# Usage: check_readme.sh OFFSIM_BINARY SOURCE_DIR
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
case $first in *"apt-get install"*"offsim compare") ;; *) fail "the first command must install, build and end with offsim compare" ;; esac
case $second in *"apt-get install"*ctest*) ;; *) fail "the second command must install, build and run ctest" ;; esac

# .ci/run calls the second command and nothing else.
ci_command=$(grep -v '^#' "$src/.ci/run" | grep -v '^set -eu$' | grep -v '^cd ' | grep -v '^$')
[ "$ci_command" = "$second" ] || fail ".ci/run does not run the README's test command"

# The output shown after the marker is what offsim compare prints.
shown=$(awk '/<!-- offsim-compare-output -->/{m=1; next} m&&/^```$/{if(in_block){exit} in_block=1; next} m&&in_block{print}' "$readme")
actual=$("$offsim" compare)
[ "$shown" = "$actual" ] || {
  printf '%s\n' "$actual" > "${TMPDIR:-/tmp}/offsim-readme-actual.txt"
  fail "README's output block differs from 'offsim compare' (actual output in ${TMPDIR:-/tmp}/offsim-readme-actual.txt)"
}
echo "check_readme: README commands, .ci/run and the shown output agree"
