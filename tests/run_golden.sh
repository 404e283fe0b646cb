#!/usr/bin/env bash
# run_golden.sh EXPECTED COMMAND...: runs the command and diffs its stdout against EXPECTED.
# To accept a reviewed change: CLUSTERSIM_UPDATE_GOLDEN=1 ctest -R golden
set -euo pipefail
expected=$1
shift
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
"$@" >"$actual"
if [ "${CLUSTERSIM_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$actual" "$expected"
  echo "updated $expected"
  exit 0
fi
diff -u "$expected" "$actual"
