#!/usr/bin/env bash
# run_outputs.sh CLI SCENARIOS_DIR DATA_DIR: outputs that cannot be written, or that would replace
# one another, are refused with exit status 2 before the work, leaving no fresh file behind; a
# result's companion from an earlier result of another kind is removed (probes' finds: a --report
# directory that could not be created failed after --out's files were written, exit 1 for an
# unwritable --out, --dot and --graphml on one file, --results replaced by --out's plans.json, and
# an inference run's requests.csv left beside a training run's summary.json).
set -uo pipefail
cli=$1
scenarios=$2
data=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
# shellcheck source=expect_refusal.sh
. "$(dirname "$0")/expect_refusal.sh"
training=$scenarios/training/llama3-8b-1-node-h100.yaml
inference=$scenarios/inference/llama3-8b-chat-h100.yaml
expect_refusal "--report /proc/no-such-dir: expected a directory to write into" run "$training" --out "$dir/a" --report /proc/no-such-dir
if [ -e "$dir/a/summary.json" ]; then echo "a refused --report left $dir/a/summary.json"; fail=1; fi
expect_refusal "--out /proc/self: expected a directory clustersim can write into" run "$training" --out /proc/self
expect_refusal "cannot write /proc/x.dot" topo l40s-box --dot /proc/x.dot
expect_refusal "--dot and --graphml name the same file" topo l40s-box --dot "$dir/g.txt" --graphml "$dir/./g.txt"
mkdir -p "$dir/p"
expect_refusal "is the plans.json that --out writes" plan "$data/plan-small.yaml" --results "$dir/p/plans.json" --out "$dir/p"
"$cli" run "$inference" --out "$dir/r" >/dev/null || fail=1
"$cli" run "$training" --out "$dir/r" >"$dir/r.txt" || fail=1
if [ -e "$dir/r/requests.csv" ]; then echo "a training run left the inference run's requests.csv beside its summary.json"; fail=1; fi
grep -q "removed $dir/r/requests.csv" "$dir/r.txt" || { echo "the training run did not say it removed requests.csv: $(cat "$dir/r.txt" | tail -1)"; fail=1; }
# An output may not replace a file the command read: a request trace named requests.csv in the
# --out directory, a topology given as collective's --trace (a probe lost both, exit 0).
mkdir -p "$dir/trace-in"
printf 'arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.1,200,20\n' >"$dir/trace-in/requests.csv"
cat >"$dir/trace-in/s.yaml" <<YAML
scenario:
  name: trace-in
  kind: inference
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  serving: {tp: 1, replicas: 1}
  workload: {arrival: {kind: trace, file: requests.csv}}
YAML
expect_refusal "requests.csv is a file this command read" run "$dir/trace-in/s.yaml" --out "$dir/trace-in"
head -1 "$dir/trace-in/requests.csv" | grep -q '^arrival_s,' || { echo "run --out replaced the request trace it read"; fail=1; }
printf 'topology: {name: t, node: l40s-pcie-8x, nodes: 1, fabric: {kind: none}}\n' >"$dir/topo.yaml"
expect_refusal "topo.yaml is a file this command read" collective "$dir/topo.yaml" --size 1MiB --trace "$dir/topo.yaml"
# A file of that name that is not clustersim's, or beside no earlier result, stays.
mkdir -p "$dir/own"
printf 'my,own,trace\n1,2,3\n' >"$dir/own/requests.csv"
"$cli" run "$training" --out "$dir/own" >/dev/null || fail=1
[ -e "$dir/own/requests.csv" ] || { echo "a training run removed a requests.csv that was not clustersim's"; fail=1; }
exit $fail
