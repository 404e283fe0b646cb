#!/usr/bin/env bash
# run_out.sh CLI SCENARIO: `clustersim run --out DIR` writes a summary.json and a trace.json that
# parse as JSON, the trace has GPU slices, and a second run writes byte-identical files.
set -euo pipefail
cli=$1
scenario=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run "$scenario" --out "$dir/a" >/dev/null
"$cli" run "$scenario" --out "$dir/b" >/dev/null
for f in summary.json trace.json; do
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/a/$f"
  cmp "$dir/a/$f" "$dir/b/$f"
done
grep -q '"step_time_s"' "$dir/a/summary.json"
grep -q '"ph"' "$dir/a/trace.json"
