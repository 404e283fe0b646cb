#!/usr/bin/env bash
# run_calibrate.sh CLI DATA_DIR: the calibrate command end to end.
#  1. --device cpu --quick --out DIR probes this machine and writes profile.yaml, measurements.json
#     and the CSVs; the profile loads back (--profile ... --compare) and can stand in for a
#     scenario's GPU profile (--scenario).
#  2. Refitting the written measurements.json gives a byte-identical profile twice (the fit is
#     deterministic given its input).
#  3. A torch-probe file fits the attention block.
#  4. Bad input exits with status 2 and names what is wrong.
set -euo pipefail
cli=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" calibrate --device cpu --quick --out "$dir/cpu" >"$dir/cpu.txt"
for f in profile.yaml measurements.json gemm.csv memory.csv collectives.csv; do
  test -s "$dir/cpu/$f"
done
grep -q "GEMM model fit" "$dir/cpu.txt"
grep -Eq "send_recv +- +process" "$dir/cpu.txt"
"$cli" calibrate --profile "$dir/cpu/profile.yaml" --compare h100-sxm5-80gb >"$dir/compare.txt"
grep -q "fitted / shipped" "$dir/compare.txt"
grep -q "^note: --compare h100-sxm5-80gb is a profile of another chip" "$dir/compare.txt"

# A recorded H100 sweep, fitted twice: identical profiles, and the scenario effect is printed.
"$cli" calibrate --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --out "$dir/a" >/dev/null
"$cli" calibrate --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --out "$dir/b" --compare h100-sxm5-80gb \
  --scenario "$data/../../../scenarios/training/llama3-8b-1-node-h100.yaml" >"$dir/effect.txt"
cmp "$dir/a/profile.yaml" "$dir/b/profile.yaml"
grep -q "effect on llama3-8b-1-node-h100 (8 GPUs, " "$dir/effect.txt"
# A scenario on part of a larger topology counts the plan's GPUs.
"$cli" calibrate --profile "$dir/a/profile.yaml" --compare h100-sxm5-80gb \
  --scenario "$data/../../../scenarios/training/llama3-70b-256-h100.yaml" >"$dir/effect70.txt"
grep -q "effect on llama3-70b-256-h100 (256 GPUs of the topology's 1016, " "$dir/effect70.txt"

# The H200's attention kernels (scripts/torch-probe.py): the attention block and attention.csv.
"$cli" calibrate --from-torch-probe "$data/h200-device-2026-12-04/torch-probe.json" --base h200-sxm-141gb --out "$dir/att" >"$dir/att.txt"
grep -q "fused attention fit (14 cudnn kernels of head dim 128" "$dir/att.txt"
grep -q "tail_blocks: 0.785" "$dir/att/profile.yaml"
test -s "$dir/att/attention.csv"
# Refitting the attention records it wrote gives the same constants, and the same input twice the same file.
"$cli" calibrate --from "$dir/att/measurements.json" --base h200-sxm-141gb --out "$dir/att2" >/dev/null
diff <(grep -A3 "^  attention:" "$dir/att/profile.yaml") <(grep -A3 "^  attention:" "$dir/att2/profile.yaml")
"$cli" calibrate --from-torch-probe "$data/h200-device-2026-12-04/torch-probe.json" --base h200-sxm-141gb --out "$dir/att3" >/dev/null
cmp "$dir/att/profile.yaml" "$dir/att3/profile.yaml"

expect_bad() {  # expect_bad TEXT ARGS...: exit status 2 and TEXT on stderr
  local text=$1
  shift
  set +e
  err=$("$cli" calibrate "$@" 2>&1 >/dev/null)
  status=$?
  set -e
  if [ $status -ne 2 ] || [[ "$err" != *"$text"* ]]; then
    echo "calibrate $*: expected status 2 and '$text', got $status: $err"
    exit 1
  fi
}
expect_bad "nothing to fit"
expect_bad "--quick shortens the probes of --device" --quick --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb
# Copies whose time falls as their size grows give no bandwidth: left out, and the output says so.
echo '{"format": "clustersim-measurements/1", "memory": [{"kind": "h2d", "bytes": 1024, "seconds": 5.1e-3}, {"kind": "h2d", "bytes": 2147483648, "seconds": 5.2e-6}]}' >"$dir/copies.json"
"$cli" calibrate --from "$dir/copies.json" --base h100-sxm5-80gb >"$dir/copies.txt"
grep -q "h2d copies (2 samples) left out of the profile" "$dir/copies.txt" || { echo "falling copy times were dropped without a note"; cat "$dir/copies.txt"; exit 1; }
# A CPU profile (fp32 only) cannot run a bf16 scenario: refused as bad input, naming the scenario's
# precision and the profile (it had ended in an internal error, status 1).
expect_bad "llama3-8b-1-node-h100.yaml: precision bf16: the fitted profile" --profile "$dir/cpu/profile.yaml" --compare h100-sxm5-80gb \
  --scenario "$data/../../../scenarios/training/llama3-8b-1-node-h100.yaml"
echo '{"format": "clustersim-measurements/1", "gemm": [{"dtype": "bf16", "m": 64, "n": 64, "k": -1, "seconds": 1e-6}]}' >"$dir/bad.json"
expect_bad "field 'gemm[0].k': expected a positive integer, found -1" --from "$dir/bad.json" --base h100-sxm5-80gb
# A GEMM faster than the GPU can run (a probe's unit slip gave a 19 PFLOP/s H100 profile): refused, named.
echo '{"format": "clustersim-measurements/1", "gemm": [{"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "seconds": 1e-5}]}' >"$dir/fast.json"
expect_bad "gemm[0], bf16 4096x4096x4096 in 10 us, runs at 13.74 PFLOP/s, more than 1.5 times H100-SXM5-80GB's bf16 peak of 989.4 TFLOP/s" --from "$dir/fast.json" --base h100-sxm5-80gb
expect_bad "--base PROFILE is needed" --from "$data/h100-cublas-waynehacking8.json"
# One file given twice (here by two spellings of its path) would count its samples twice.
expect_bad "expected each measurements file once, found it again" --from "$data/h100-cublas-waynehacking8.json" \
  --from "$data/../calibrate/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb
echo '{"format": "clustersim-measurements/1", "gemm": [{"dtype": "fp4", "m": 64, "n": 64, "k": 64, "seconds": 1e-6}]}' >"$dir/fp4.json"
expect_bad "fp4.json: gemm[0].dtype: expected a dtype with a peak in --base H100-SXM5-80GB, found fp4" --from "$dir/fp4.json" --base h100-sxm5-80gb
# A key written twice (named with its record), and a file of empty lists, are refused naming the file.
echo '{"format": "clustersim-measurements/1", "gemm": [{"dtype": "bf16", "m": 64, "n": 64, "k": 64, "seconds": 1e-5, "seconds": 2e-5}]}' >"$dir/twice.json"
expect_bad "twice.json:1:123: field 'gemm[0].seconds': expected each key once in an object (which value is meant?), found 'seconds' twice" --from "$dir/twice.json" --base h100-sxm5-80gb
echo '{"format": "clustersim-measurements/1", "gemm": []}' >"$dir/none.json"
expect_bad "none.json: the gemm, memory, collectives and attention lists are all empty" --from "$dir/none.json" --base h100-sxm5-80gb
expect_bad "GPU profile" --device cpu --base h100-sxm5-80gb
expect_bad "'clustersim-torch-probe/1'" --from-torch-probe "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb
expect_bad "the measurements hold none" --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --attention-head-dim 64
expect_bad "found 0 and 0" --from-torch-probe "$data/h200-device-2026-12-04/torch-probe.json" --base h200-sxm-141gb --attention-backend triton
expect_bad "found an empty string" --from-torch-probe "$data/h200-device-2026-12-04/torch-probe.json" --base h200-sxm-141gb --attention-backend ""
# No probe measures attention kernels: the options are refused before it runs.
expect_bad "the measurements hold none" --device cpu --attention-backend cudnn
# nccl-tests output without its device list: the given ranks must divide evenly over the given nodes.
grep -v '^#  Rank' "$data/../nccl-tests/all_reduce_perf-2x8-h100-gcp-a3mega.txt" >"$dir/all_reduce_perf-nodev.txt"
expect_bad "all_reduce_perf-nodev.txt:8:12: 16 ranks do not divide evenly over 3 nodes: expected the same number of ranks on every node" \
  --from-nccl-tests "$dir/all_reduce_perf-nodev.txt" --ranks 16 --nodes 3 --base h100-sxm5-80gb
"$cli" calibrate --from-nccl-tests "$dir/all_reduce_perf-nodev.txt" --ranks 16 --nodes 2 --base h100-sxm5-80gb | grep -Eq "2 x 8 +31 "
# A data row with a size that is not a byte count is an error at its line, not a size the fit drops.
sed 's/^    33554432 /    -33554432 /' "$data/../nccl-tests/all_reduce_perf-2x8-h100-gcp-a3mega.txt" >"$dir/all_reduce_perf-negative.txt"
expect_bad "all_reduce_perf-negative.txt:46:5: field 'size': expected a size in bytes, found '-33554432'" \
  --from-nccl-tests "$dir/all_reduce_perf-negative.txt" --base h100-sxm5-80gb
touch "$dir/a-file"
expect_bad "expected a directory to write into" --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --out "$dir/a-file"
# validate --hardware with a profile no case uses is an error, not a silent no-op.
set +e
err=$("$cli" validate "$data/../../../../shared/validation/microbench.yaml" --hardware l40s 2>&1 >/dev/null)
status=$?
set -e
if [ $status -ne 2 ] || [[ "$err" != *"no case runs on a GPU named L40S"* ]]; then
  echo "validate --hardware l40s: expected status 2 and a message, got $status: $err"
  exit 1
fi

# --out may not replace a file the command reads (a torch-probe file named measurements.json in
# --out had been overwritten, exit 0), and a refused input leaves no empty --out behind.
mkdir -p "$dir/own"
cp "$data/h200-device-2026-12-04/torch-probe.json" "$dir/own/measurements.json"
expect_bad "--out: $dir/own/measurements.json is a file this command read" \
  --from-torch-probe "$dir/own/measurements.json" --base h200-sxm-141gb --out "$dir/own"
cmp "$dir/own/measurements.json" "$data/h200-device-2026-12-04/torch-probe.json"
echo '{}' >"$dir/empty.json"
expect_bad "empty.json" --from "$dir/empty.json" --base h100-sxm5-80gb --out "$dir/never-made"
[ ! -e "$dir/never-made" ] || { echo "calibrate: a refused input left its --out directory behind"; exit 1; }
# --scenario is read before the fit: an inference scenario is refused before any file is written.
expect_bad "expected one of training" --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --out "$dir/sc" \
  --compare h100-sxm5-80gb --scenario "$data/../../../scenarios/inference/llama3-70b-sizing.yaml"
[ ! -e "$dir/sc" ] || { echo "calibrate: an inference --scenario was refused only after the fit was written"; exit 1; }
# A fit into a directory with an earlier fit's attention.csv removes it when this one has no kernels.
"$cli" calibrate --from "$data/h100-cublas-waynehacking8.json" --base h100-sxm5-80gb --out "$dir/att" | grep -q "removed $dir/att/attention.csv"
[ ! -e "$dir/att/attention.csv" ] || { echo "calibrate: an earlier fit's attention.csv stayed beside measurements that hold none"; exit 1; }
# A whole sweep in another time unit is refused for copies and collectives, as for GEMMs (it had
# fitted memory_efficiency 0.0008 and an NVLink of 313 KB/s, exit 0).
python3 - "$data/h200-device-2026-12-04/measurements.json" "$dir/d2d-ms.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["gemm"] = []
for s in d["memory"]:
    if s["kind"] == "d2d":
        s["seconds"] *= 1000
json.dump(d, open(sys.argv[2], "w"))
PY
expect_bad "more than 100 times slower than any GPU copies" --from "$dir/d2d-ms.json" --base h200-sxm-141gb
cat >"$dir/coll-slow.json" <<'JSON'
{"format": "clustersim-measurements/1", "collectives": [
 {"op": "all_gather", "link": "nvlink", "ranks": 8, "nodes": 1, "bytes": 1073741824, "seconds": 3000},
 {"op": "all_gather", "link": "nvlink", "ranks": 8, "nodes": 1, "bytes": 2147483648, "seconds": 6000}]}
JSON
expect_bad "more than 100 times below what H100-SXM5-80GB's links carry" --from "$dir/coll-slow.json" --base h100-sxm5-80gb
# A bus bandwidth no profile can hold (between processes, where no link bounds it) is refused, not
# written into a profile.yaml that cannot be loaded.
cat >"$dir/coll-fast.json" <<'JSON'
{"format": "clustersim-measurements/1", "collectives": [
 {"op": "all_reduce", "link": "process", "ranks": 2, "nodes": 1, "bytes": 8, "seconds": 1e-9},
 {"op": "all_reduce", "link": "process", "ranks": 2, "nodes": 1, "bytes": 1073741824, "seconds": 1e-8}]}
JSON
expect_bad "outside a profile's 1 KB/s to 1 PB/s" --from "$dir/coll-fast.json" --base h100-sxm5-80gb
# Metadata a profile cannot hold: a control character (a terminal colour code in a log's device
# name) or a byte that is not UTF-8 is refused where it is read, with its line.
sed 's/NVIDIA A100-SXM4-40GB/&\x1b[31m/' "$data/../nccl-tests/all_reduce_perf-2x8-a100-oci.txt" >"$dir/all_reduce_perf-colour.txt"
expect_bad "the GPU's name: expected text without control characters, found 'NVIDIA A100-SXM4-40GB\x1b[31m' (it holds the control character \x1b)" \
  --from-nccl-tests "$dir/all_reduce_perf-colour.txt" --base a100-sxm4-40gb
sed 's/NVIDIA A100-SXM4-40GB/&\xff/' "$data/../nccl-tests/all_reduce_perf-2x8-a100-oci.txt" >"$dir/all_reduce_perf-byte.txt"
expect_bad "(it holds the byte \xff, which is not UTF-8)" --from-nccl-tests "$dir/all_reduce_perf-byte.txt" --base a100-sxm4-40gb --out "$dir/byte"
python3 - "$data/h100-cublas-waynehacking8.json" "$dir/meta-control.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d.setdefault("meta", {})["note"] = "a\u0001b"
json.dump(d, open(sys.argv[2], "w"))
PY
expect_bad "field 'meta.note': expected text without control characters" --from "$dir/meta-control.json" --base h100-sxm5-80gb
# A torch-probe file's fields are typed (a number for the GPU's name had turned the GPU-model check
# off), and an H100's attention kernels are not merged with an H200's sweep whatever the base's name.
python3 - "$data/h200-device-2026-12-04/torch-probe.json" "$dir/tp-gpu-number.json" "$dir/tp-h100.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["gpu"] = 5
json.dump(d, open(sys.argv[2], "w"))
d["gpu"] = "NVIDIA H100 80GB HBM3"
json.dump(d, open(sys.argv[3], "w"))
PY
expect_bad "field 'gpu': expected a string, found number" --from-torch-probe "$dir/tp-gpu-number.json" --base h200-sxm-141gb
sed 's/^  name: H200-SXM-141GB/  name: mygpu/' "$data/../../../scenarios/hardware/h200-sxm-141gb.yaml" >"$dir/mygpu.yaml"
grep -q "name: mygpu" "$dir/mygpu.yaml"
expect_bad "are of two devices (meta.device and meta.torch_probe_gpu" \
  --from "$data/h200-device-2026-12-04/measurements.json" --from-torch-probe "$dir/tp-h100.json" --base "$dir/mygpu.yaml"
