#!/usr/bin/env bash
# run_bad.sh CLI CASE.yaml [SUBCOMMAND [ARGS...]]: `clustersim SUBCOMMAND CASE.yaml ARGS...` (default topo) must exit with status 2 and print the
# message given on the case's first line ('# expect: TEXT'; TEXT is matched literally after the
# file's path, which is machine-specific, is replaced by CASE).
set -uo pipefail
cli=$1
case_file=$2
subcommand=${3:-topo}
shift $(($# < 3 ? $# : 3))
expect=$(head -n 1 "$case_file" | sed -n 's/^# expect: //p')
if [ -z "$expect" ]; then
  echo "$case_file: first line must be '# expect: MESSAGE'"
  exit 1
fi
out=$(timeout 60 "$cli" "$subcommand" "$case_file" "$@" 2>&1 >/dev/null)
status=$?
out=${out//"$case_file"/CASE}
out=${out//"$(dirname "$case_file")"/DIR}
if [ $status -ne 2 ]; then
  echo "expected exit status 2, got $status; stderr: $out"
  exit 1
fi
case "$out" in
  *"$expect"*) exit 0 ;;
esac
echo "expected stderr to contain: $expect"
echo "got: $out"
exit 1
