#!/usr/bin/env bash
# run_special_files.sh CLI DATA_DIR: an input that is a named pipe (FIFO) is refused, naming it, by
# every command that reads files, where it had blocked the read for ever (a probe's find): the
# scenario or file given, and a file a scenario or option names (a request trace, --results). A loop
# of symbolic links or a link to nothing given as the input file is named as what it is.
set -uo pipefail
cli=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/pipe.yaml" "$dir/pipe.csv" "$dir/pipe.jsonl"
fail=0
# shellcheck source=expect_refusal.sh
. "$(dirname "$0")/expect_refusal.sh"
refusal_timeout=20
expect_fifo() {  # expect_fifo ARGS...: exit status 2 within 20 s and "FIFO" in the message
  expect_refusal FIFO "$@"
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
# An output is renamed over its target: a FIFO, a device or a symbolic link in its place is refused
# and left as it was (a probe's --trace /dev/null, run as root, replaced /dev/null with a file).
expect_refused() {  # expect_refused TARGET ARGS...: exit status 2 naming TARGET, TARGET unchanged
  local target=$1 out status before
  shift
  before=$(stat -c '%F %N' "$target")
  out=$(timeout 60 "$cli" "$@" 2>&1 >/dev/null)
  status=$?
  if [ $status -ne 2 ] || [[ "$out" != *"cannot write $target: it is"* ]] || [ "$(stat -c '%F %N' "$target")" != "$before" ]; then
    echo "clustersim $*: expected status 2 refusing $target and leaving it, got $status: $out; now $(stat -c '%F %N' "$target")"
    fail=1
  fi
}
mkfifo "$dir/out.fifo"
ln -s "$dir/elsewhere.json" "$dir/link.json"
expect_refused "$dir/out.fifo" collective l40s-box --size 1MiB --trace "$dir/out.fifo"
expect_refused "$dir/link.json" collective l40s-box --size 1MiB --trace "$dir/link.json"
expect_refused "$dir/out.fifo" topo l40s-box --dot "$dir/out.fifo"
[ ! -e "$dir/elsewhere.json" ] || { echo "the link's target was written"; fail=1; }
mkdir -p "$dir/outdir"
ln -s "$dir/elsewhere.json" "$dir/outdir/summary.json"
expect_refused "$dir/outdir/summary.json" run "$data/plan-small.yaml" --out "$dir/outdir"
# A loop of symbolic links, and a link to nothing, where an input file belongs: each named as what
# it is (CLI11's check had said "File does not exist" of both).
ln -s loop.yaml "$dir/loop.yaml"
ln -s "$dir/no-such-file.yaml" "$dir/dangling.yaml"
for command in run plan cost validate; do
  expect_refusal ": expected a file to read, found a loop of symbolic links: $dir/loop.yaml" "$command" "$dir/loop.yaml"
  expect_refusal "found a symbolic link to $dir/no-such-file.yaml, which leads to nothing: $dir/dangling.yaml" "$command" "$dir/dangling.yaml"
done
expect_refusal "--from-nccl-tests: expected a file to read, found a loop of symbolic links" calibrate --from-nccl-tests "$dir/loop.yaml" --op all_reduce --ranks 8 --base h100-sxm5-80gb
# Standard output that cannot be written (a full disk: /dev/full) is a failure, not exit 0 with the
# output cut short.
if [ -c /dev/full ]; then
  for args in "topo l40s-box" "run $data/plan-small.yaml --json" "--list-models"; do
    # shellcheck disable=SC2086
    out=$("$cli" $args 2>&1 >/dev/full)
    status=$?
    if [ $status -ne 1 ] || [[ "$out" != *"could not write the standard output"* ]]; then
      echo "clustersim $args >/dev/full: expected status 1 and a message, got $status: $out"
      fail=1
    fi
  done
fi
exit $fail
