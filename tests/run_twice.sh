#!/usr/bin/env bash
# run_twice.sh CLI ARGS...: `CLI ARGS...` twice must exit 0 and print byte-identical output.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$@" >"$dir/a"
"$@" >"$dir/b"
test -s "$dir/a"
cmp "$dir/a" "$dir/b"
