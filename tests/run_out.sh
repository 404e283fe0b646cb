#!/usr/bin/env bash
# run_out.sh CLI SCENARIO: `clustersim run --out DIR` writes a summary.json and a trace.json, the
# trace has slices, and a second run writes byte-identical files. (The trace's structure is checked
# by the Catch2 test "the step's Perfetto trace ...".)
set -euo pipefail
cli=$1
scenario=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run "$scenario" --out "$dir/a" >/dev/null
"$cli" run "$scenario" --out "$dir/b" >/dev/null
for f in summary.json trace.json; do
  cmp "$dir/a/$f" "$dir/b/$f"
done
grep -q '"step_time_s"' "$dir/a/summary.json"
grep -q '"ph"' "$dir/a/trace.json"
