#!/usr/bin/env bash
# run_special_files.sh CLI DATA_DIR: an input that is a named pipe (FIFO) is refused, naming it, by
# every command that reads files, where it had blocked the read for ever (a probe's find): the
# scenario or file given, and a file a scenario or option names (a request trace, --results).
set -uo pipefail
cli=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/pipe.yaml" "$dir/pipe.csv" "$dir/pipe.jsonl"
fail=0
expect_fifo() {  # expect_fifo ARGS...: exit status 2 within 20 s and "FIFO" in the message
  local out status
  out=$(timeout 20 "$cli" "$@" 2>&1 >/dev/null)
  status=$?
  if [ $status -ne 2 ] || [[ "$out" != *"FIFO"* ]]; then
    echo "clustersim $*: expected status 2 naming a FIFO, got $status: $out"
    fail=1
  fi
}
for command in topo run plan cost validate; do expect_fifo "$command" "$dir/pipe.yaml"; done
expect_fifo report "$dir/pipe.yaml" --out "$dir/report"
expect_fifo calibrate --from "$dir/pipe.yaml" --base h100-sxm5-80gb
expect_fifo calibrate --from-nccl-tests "$dir/pipe.yaml" --op all_reduce --ranks 8 --base h100-sxm5-80gb
expect_fifo plan "$data/plan-small.yaml" --results "$dir/pipe.jsonl"
# A serving scenario whose request trace is the pipe.
cat >"$dir/trace.yaml" <<YAML
scenario:
  name: fifo-trace
  kind: inference
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1}
  serving: {tp: 1, replicas: 1}
  workload: {arrival: {kind: trace, file: pipe.csv}}
YAML
expect_fifo run "$dir/trace.yaml"
exit $fail
