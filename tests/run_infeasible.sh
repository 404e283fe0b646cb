#!/usr/bin/env bash
# run_infeasible.sh CLI DATA_DIR: exit status 3, results that say nothing runs. A training plan that
# does not fit in memory: `run` and `cost` still print and write their results (the memory table says
# what overflows), then exit with status 3 and say on stderr that the plan does not fit, so that a
# script cannot take the figures for a plan that runs (both had exited 0, the verdict one line of the
# output). Likewise `plan` of a training search in which no plan runs, and of an inference sizing in
# which no configuration meets the SLO (both had exited 0).
set -euo pipefail
cli=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect_status3() {  # NAME MESSAGE COMMAND...: status 3, MESSAGE on stderr; NAME.out and NAME.err kept
  local name=$1 message=$2
  shift 2
  set +e
  "$@" >"$dir/$name.out" 2>"$dir/$name.err"
  local status=$?
  set -e
  if [ $status -ne 3 ] || ! grep -q "$message" "$dir/$name.err"; then
    echo "$name: expected status 3 and '$message' on stderr, got $status"
    cat "$dir/$name.err"
    exit 1
  fi
}
expect_unfit() {  # NAME COMMAND...: status 3, the OOM verdict on stderr
  local name=$1
  shift
  expect_status3 "$name" "run-oom.yaml: the plan does not fit in memory (OOM: stage 0 needs" "$@"
}
expect_unfit run "$cli" run "$data/run-oom.yaml" --out "$dir/run"
grep -q "^  OOM: stage 0 needs" "$dir/run.out" || { echo "run: no OOM line in the memory table"; cat "$dir/run.out"; exit 1; }
grep -q "^  step time" "$dir/run.out" || { echo "run: the step was not printed"; exit 1; }
grep -q '"fits": false' "$dir/run/summary.json" || { echo "run: summary.json not written with fits false"; exit 1; }
expect_unfit run-json "$cli" run "$data/run-oom.yaml" --json
grep -q '"fits": false' "$dir/run-json.out" || { echo "run --json: no JSON printed"; exit 1; }
expect_unfit cost "$cli" cost "$data/run-oom.yaml" --out "$dir/cost"
grep -q "note: the plan does not fit in memory, so no offering can run it as priced" "$dir/cost.out" || { echo "cost: no note"; cat "$dir/cost.out"; exit 1; }
grep -q '"fits_in_memory": false' "$dir/cost/cost.json" || { echo "cost: cost.json not written"; exit 1; }
expect_unfit cost-json "$cli" cost "$data/run-oom.yaml" --json
grep -q '"marginal": false' "$dir/run/summary.json" || { echo "run: summary.json does not say the plan is not marginal"; exit 1; }
grep -q '"marginal_in_memory": false' "$dir/cost/cost.json" || { echo "cost: cost.json does not say the plan is not marginal"; exit 1; }
# A marginal plan (over only through the assumed fragmentation allowance; NeMo ran this one) exits 0,
# and its summary.json says marginal beside fits false, so that a script can tell it from an OOM.
"$cli" run "$(dirname "$0")/../validate/extra/nemo-24.07-fp8/llama3-8b-8gpu.yaml" --out "$dir/marginal" >/dev/null
grep -q '"fits": false' "$dir/marginal/summary.json" && grep -q '"marginal": true' "$dir/marginal/summary.json" ||
  { echo "a marginal plan's summary.json lacks fits false and marginal true"; exit 1; }
# A plan that fits exits 0.
"$cli" run "$data/run-tiny.yaml" >/dev/null
nothing="plan-nothing-fits.yaml: no plan in the space runs: of its 49 plans, 19 break a constraint and 30 do not fit in memory"
expect_status3 plan-none "$nothing" "$cli" plan "$data/plan-nothing-fits.yaml" --out "$dir/none"
grep -q '^no plan in the space runs' "$dir/plan-none.out" || { echo "plan: no line saying nothing runs"; cat "$dir/plan-none.out"; exit 1; }
[ -s "$dir/none/plans.csv" ] || { echo "plan: plans.csv not written"; exit 1; }
expect_status3 plan-none-json "$nothing" "$cli" plan "$data/plan-nothing-fits.yaml" --json
grep -q '"simulated": 0' "$dir/plan-none-json.out" || { echo "plan --json: no JSON printed"; exit 1; }
# A sizing whose only offer cannot meet the SLO within max_gpus: the table is printed, then status 3.
sed 's/max_gpus: 16/max_gpus: 1/; s/tp: \[1, 2\]/tp: [1]/' "$data/sizing-small.yaml" >"$dir/sizing-none.yaml"
expect_status3 sizing-none "sizing-none.yaml: no configuration meets the SLO for 90% of requests within max_gpus 1" "$cli" plan "$dir/sizing-none.yaml" --out "$dir/sizing"
grep -q '^cheapest: none of the configurations meets the SLO' "$dir/sizing-none.out" || { echo "sizing: no cheapest line"; cat "$dir/sizing-none.out"; exit 1; }
[ -s "$dir/sizing/sizing.json" ] || { echo "sizing: sizing.json not written"; exit 1; }
# A sizing that finds a fleet exits 0.
"$cli" plan "$data/sizing-small.yaml" >/dev/null
echo ok
