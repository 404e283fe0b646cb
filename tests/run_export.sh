#!/usr/bin/env bash
# run_export.sh CLI: --dot, --graphml and --trace write complete files, and no temporary file is left behind.
set -euo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" topo dgx-h100-superpod --dot "$dir/t.dot" --graphml "$dir/t.graphml" >/dev/null
head -n 1 "$dir/t.dot" | grep -q '^graph "dgx-h100-superpod" {$'
tail -n 1 "$dir/t.dot" | grep -q '^}$'
grep -q '</graphml>' "$dir/t.graphml"
# 1,016 GPUs appear as nodes in both files.
[ "$(grep -c 'kind=gpu,' "$dir/t.dot")" -eq 1016 ]
[ "$(grep -c '<data key="kind">gpu</data>' "$dir/t.graphml")" -eq 1016 ]
# A leaf joins each spine by two cables, one link of two lanes: the DOT label says so (it had shown
# one cable's worth of edge with the pair's bandwidth).
grep -q '"leaf0" -- "spine0" \[kind=infiniband, label="2 x 50 GB/s"\];' "$dir/t.dot"
# A collective's Perfetto/Chrome trace: GPU slices and link-load counters.
"$cli" collective dgx-h100-superpod --gpus 0-15 --size 64MiB --trace "$dir/t.json" >/dev/null
grep -q '"traceEvents"' "$dir/t.json"
grep -q '"ph": "X", "name": "all_reduce' "$dir/t.json"
grep -q '"ph": "C", "name": "n0.gpu0 -> ' "$dir/t.json"
tail -n 1 "$dir/t.json" | grep -q '^]}$'
# Nothing but the three outputs: no temporary files.
[ "$(ls -A "$dir" | wc -l)" -eq 3 ]
# Writing into a directory that does not exist is refused before the work (status 2), with no output.
status=0
"$cli" topo l40s-box --dot "$dir/missing/t.dot" >"$dir/out" 2>"$dir/err" || status=$?
[ "$status" -eq 2 ] && [ ! -s "$dir/out" ]
grep -q 'directory .* does not exist' "$dir/err"
rm -f "$dir/out"
rm -f "$dir/err"
# Both exports or neither: a symbolic link in the GraphML's place fails the command before the DOT
# file is replaced (a probe found it replaced).
echo OLD >"$dir/old.dot"
echo target >"$dir/target.txt"
ln -s target.txt "$dir/link.graphml"
status=0
"$cli" topo l40s-box --dot "$dir/old.dot" --graphml "$dir/link.graphml" >/dev/null 2>"$dir/err" || status=$?
[ "$status" -eq 2 ] || { echo "a symlink target: status $status"; exit 1; }
[ "$(cat "$dir/old.dot")" = OLD ] || { echo "the DOT file was replaced though the GraphML could not be written"; exit 1; }
grep -q 'is a symbolic link' "$dir/err"
[ -z "$(find "$dir" -name '*.tmp*')" ] || { echo "a temporary file was left"; exit 1; }
echo ok
