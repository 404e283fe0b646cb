#!/usr/bin/env bash
# run_plan_mpi.sh CLI DATA_DIR: `mpirun -n 2 clustersim plan` splits a training plan search over two
# ranks and gathers on rank 0: the same plans.csv as one process, and per-rank results files.
set -euo pipefail
cli=$1
data=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# CI runs as root in a container: allow it, and keep OpenMPI to shared memory on this host.
# OpenMPI's own allocations outlive MPI_Finalize (LeakSanitizer reports them under the debug preset):
# leak checking stays on for every other test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
"$cli" plan "$data/plan-small.yaml" --threads 1 --out "$out/one" >/dev/null
mpirun -n 2 --oversubscribe "$cli" plan "$data/plan-small.yaml" --threads 1 --results "$out/r.jsonl" --out "$out/two" >"$out/two.txt"
grep -q 'on 2 MPI ranks' "$out/two.txt" || { echo "rank 0 did not report 2 ranks"; cat "$out/two.txt"; exit 1; }
[ "$(grep -c '^small:' "$out/two.txt")" -eq 1 ] || { echo "only rank 0 prints"; exit 1; }
cmp "$out/one/plans.csv" "$out/two/plans.csv"
[ -s "$out/r.jsonl.rank0-of-2" ] && [ -s "$out/r.jsonl.rank1-of-2" ] || { echo "no per-rank results files"; exit 1; }
# Rerun: every plan comes back from the two files.
mpirun -n 2 --oversubscribe "$cli" plan "$data/plan-small.yaml" --threads 1 --results "$out/r.jsonl" --out "$out/again" >"$out/again.txt"
grep -q '92 simulated (92 resumed)' "$out/again.txt" || { echo "rerun did not resume"; cat "$out/again.txt"; exit 1; }
cmp "$out/one/plans.csv" "$out/again/plans.csv"
# One rank that fails stops every rank, naming itself; the others had waited in the gather for ever.
mkdir "$out/d.jsonl.rank1-of-2"
status=0
timeout 120 mpirun -n 2 --oversubscribe "$cli" plan "$data/plan-small.yaml" --threads 1 --results "$out/d.jsonl" >"$out/fail.txt" 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "a failing rank: status $status (124: the job hung)"; cat "$out/fail.txt"; exit 1; }
grep -q '(MPI rank 1 of 2) --results: expected a file' "$out/fail.txt" || { echo "a failing rank: no message naming it"; cat "$out/fail.txt"; exit 1; }
# Inference sizing is not sharded: under mpirun it is refused (each rank had printed the whole fleet).
if mpirun -n 2 --oversubscribe "$cli" plan "$data/sizing-small.yaml" >"$out/sizing.txt" 2>&1; then
  echo "sizing under mpirun was not refused"; cat "$out/sizing.txt"; exit 1
fi
grep -q 'inference sizing runs in one process' "$out/sizing.txt" || { echo "sizing under mpirun: no reason given"; cat "$out/sizing.txt"; exit 1; }
echo ok
