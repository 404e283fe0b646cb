#!/usr/bin/env bash
# run_out_inference.sh CLI SCENARIO: `clustersim run --out DIR` on an inference scenario writes
# summary.json, requests.csv (one row per request) and trace.json (Perfetto), and a second run writes
# byte-identical files.
set -euo pipefail
cli=$1
scenario=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run "$scenario" --out "$dir/a" >/dev/null
"$cli" run "$scenario" --out "$dir/b" >/dev/null
for f in summary.json requests.csv trace.json; do
  cmp "$dir/a/$f" "$dir/b/$f"
done
grep -q '"output_token_throughput"' "$dir/a/summary.json"
head -1 "$dir/a/requests.csv" | grep -q '^id,arrival_s,prompt_tokens,output_tokens'
rows=$(($(wc -l <"$dir/a/requests.csv") - 1))
completed=$(grep '"completed"' "$dir/a/summary.json" | tr -dc '0-9')
[ "$rows" -eq "$completed" ] || { echo "requests.csv has $rows rows, summary says $completed completed"; exit 1; }
# The trace: each request opens 4 async slices (itself, queued, prefill, decode) and closes as many.
begins=$(grep -c '"ph": "b"' "$dir/a/trace.json")
ends=$(grep -c '"ph": "e"' "$dir/a/trace.json")
[ "$begins" -eq $((4 * rows)) ] && [ "$ends" -eq "$begins" ] || { echo "trace.json: $begins begins, $ends ends for $rows requests"; exit 1; }
tail -c 4 "$dir/a/trace.json" | grep -q ']}'
# A request trace the workload replays is recorded among the parts read, with its SHA-256.
cat >"$dir/trace.csv" <<'CSV'
arrival_s,prompt_tokens,output_tokens
0,100,10
0.5,200,20
CSV
awk -v trace="$dir/trace.csv" '/^  workload:/{print "  workload:"; print "    arrival: {kind: trace, file: " trace "}"; skip=1; next}
  skip && /^    /{next} {skip=0; print}' "$scenario" >"$dir/replay.yaml"
"$cli" run "$dir/replay.yaml" --out "$dir/c" >/dev/null
grep -q "\"file\": \"$dir/trace.csv\"" "$dir/c/summary.json" || { echo "the trace is not among source.parts"; exit 1; }
