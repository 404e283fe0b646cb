#!/usr/bin/env bash
# Builds the Release tree and prints the benchmark figures quoted in the README.
#   scripts/bench.sh [PRESET...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" build >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
echo "== topology: load + build, summary (bisection, diameter), routing =="
"$root/build/release/bin/clustersim-bench-topo" "$@"
echo
echo "== engine and collectives =="
"$root/build/release/bin/clustersim-bench-sim"
echo
echo "== clustersim topo h100-clos-16k, whole command (3 runs) =="
TIMEFORMAT='  wall %R s (user %U s, sys %S s)'
for i in 1 2 3; do
  time "$root/build/release/bin/clustersim" topo h100-clos-16k >/dev/null
done
echo
echo "== training: one step (GPT-3 175B on 1,024 A100; Llama 3 405B on 16,384 H100) =="
"$root/build/release/bin/clustersim-bench-training" "$root/scenarios/training/gpt3-175b-1024-a100.yaml"
"$root/build/release/bin/clustersim-bench-training" "$root/scenarios/training/llama3-405b-16k-h100.yaml"
echo "  folded against unfolded (every rank simulated):"
"$root/build/release/bin/clustersim-bench-training" --unfolded "$root/scenarios/training/llama3-8b-1-node-h100.yaml" "$root/scenarios/training/llama3-70b-256-h100.yaml"
echo
echo "== calibration: fits of a probe-sized data set, the CPU probe =="
"$root/build/release/bin/clustersim-bench-calibrate"
echo
echo "== serving: one hour of 20 req/s chat on 16 replicas of Llama 3 70B TP4 on H100 (3 runs) =="
for i in 1 2 3; do
  time "$root/build/release/bin/clustersim" run "$root/scenarios/inference/llama3-70b-tp4-h100.yaml" | grep -E "simulated|requests "
done
echo
echo "== plan search: default spaces of Llama 3 70B on 256 H100 and GPT-3 175B on 1,024 A100 =="
for s in llama3-70b-256-h100 gpt3-175b-1024-a100; do
  time "$root/build/release/bin/clustersim" plan "$root/scenarios/training/$s.yaml" 2>/dev/null | sed -n 1p  # sed reads to the end: head would close the pipe early and, under pipefail, stop the script
done
echo
echo "== plan search: the Calculon-size GPT-3 175B space (branch and bound, top 10 exact; peak memory) =="
wide=("$root/build/release/bin/clustersim" plan "$root/scenarios/training/gpt3-175b-1024-a100-wide.yaml" --bound 10)
if [ -x /usr/bin/time ]; then  # Debian's time package: also the peak memory
  /usr/bin/time -f "wall %e s, peak memory %M KiB" "${wide[@]}" 2>&1 | grep -E "enumerated|^wall|^ +1 "
else
  time "${wide[@]}" 2>/dev/null | grep -E "enumerated|^ +1 "
fi
echo
echo "== plan search: Llama 3 70B on A100, H100, H200 or B200 at 128 to 512 GPUs (branch and bound, top 10 of each) =="
time "$root/build/release/bin/clustersim" plan "$root/scenarios/training/llama3-70b-gpu-types.yaml" --bound 10 2>/dev/null | sed -n 1p  # sed reads to the end: head would close the pipe early and, under pipefail, stop the script
echo
echo "== cost: Monte Carlo of the Llama 3 70B 1T-token run on every offering =="
time "$root/build/release/bin/clustersim" cost "$root/scenarios/training/llama3-70b-256-h100-cost.yaml" | grep "Monte Carlo"
