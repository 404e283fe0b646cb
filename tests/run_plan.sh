#!/usr/bin/env bash
# run_plan.sh CLI DATA_DIR SCENARIOS_DIR: `clustersim plan` on a small inference scenario writes its
# table, sizing.json and sizing.csv, the same bytes twice; on training scenarios it searches plans
# with the same results for 1 or 2 threads and after being killed and rerun.
set -euo pipefail
cli=$1
data=$2
scenarios=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cli" plan "$data/sizing-small.yaml" --out "$out/a" >"$out/a.txt"
"$cli" plan "$data/sizing-small.yaml" --out "$out/b" >/dev/null
# Billed for whole 8-GPU nodes: 12 A100s (6 replicas) meet the SLO and pay for 16, a little less than 4 H100s
# for 8; the fleet reported fills the 16 it pays for.
grep -q '^cheapest: A100-SXM4-80GB x dgx-a100 at TP 2 (8 replicas), 16 GPUs, .*; 6 replicas met the SLO' "$out/a.txt" || { echo "no cheapest line"; cat "$out/a.txt"; exit 1; }
grep -q '"cheapest"' "$out/a/sizing.json" || { echo "sizing.json has no cheapest"; exit 1; }
# max_gpus 6 stops the growth short of the 8 GPUs billed: the verdict says so, not "fills"; rows that
# do not meet the SLO leave the CSV's fewest-meeting columns empty (a probe found the row's own count).
sed 's/max_gpus: 16/max_gpus: 6/' "$data/sizing-small.yaml" >"$out/six.yaml"
"$cli" plan "$out/six.yaml" --out "$out/six" >"$out/six.txt"
grep -q '6 (8) .* meets; grown to max_gpus (2 replicas meet)' "$out/six.txt" || { echo "no grown-to-max_gpus verdict"; cat "$out/six.txt"; exit 1; }
grep -q '^A100-SXM4-80GB,.*,0,[0-9.]*,[0-9.]*,[0-9.]*,[0-9.]*,,$' "$out/six/sizing.csv" || { echo "a row missing the SLO names a fewest count"; cat "$out/six/sizing.csv"; exit 1; }
head -n 1 "$out/a/sizing.csv" | grep -q '^gpu,node,tp,pp,replicas,prefill,decode,gpus,gpus_billed,cost_per_hour' || { echo "bad CSV header"; exit 1; }
grep -q '^  gpu  *node  *TP  *layout' "$out/a.txt" || { echo "no node column though the offers' nodes differ"; cat "$out/a.txt"; exit 1; }
# Replicas of two pipeline stages: the table, the cheapest line and the CSV say PP (a probe found none did).
sed 's/serving: {tp: 1, replicas: 1}/serving: {tp: 1, pp: 2, replicas: 1}/; s/tp: \[1, 2\]/tp: [1]/' "$data/sizing-small.yaml" >"$out/pp.yaml"
"$cli" plan "$out/pp.yaml" --out "$out/pp" >"$out/pp.txt"
grep -q 'TP x PP' "$out/pp.txt" && grep -q '^cheapest: .* at TP 1 x PP 2 ' "$out/pp.txt" || { echo "PP 2 not shown"; cat "$out/pp.txt"; exit 1; }
sed -n 2p "$out/pp/sizing.csv" | grep -q '^[^,]*,[^,]*,1,2,' || { echo "CSV row has no pp 2"; cat "$out/pp/sizing.csv"; exit 1; }
[ "$(wc -l <"$out/a/sizing.csv")" -eq 5 ] || { echo "expected 4 candidates"; exit 1; }
cmp "$out/a/sizing.json" "$out/b/sizing.json"
cmp "$out/a/sizing.csv" "$out/b/sizing.csv"
# Training: the same plans.csv whatever the thread count, and after a kill -9 and a rerun.
"$cli" plan "$data/plan-small.yaml" --threads 1 --out "$out/t1" >"$out/t1.txt"
"$cli" plan "$data/plan-small.yaml" --threads 2 --out "$out/t2" >/dev/null
cmp "$out/t1/plans.csv" "$out/t2/plans.csv"
# With --bound K under the default --top 10, the ranked tables stop at the K rows the bound keeps
# exact (past them a probe found pruned plans cheaper than the rows shown).
"$cli" plan "$data/plan-small.yaml" --bound 3 >"$out/bound3.txt"
grep -q '^fastest (top 3 by throughput):' "$out/bound3.txt" && grep -q 'keeps the top 3 exact' "$out/bound3.txt" || { echo "--bound 3 tables not cut at 3"; cat "$out/bound3.txt"; exit 1; }
# A plan that was not simulated has empty timings, not zeros that sort it first (a probe).
if grep -E ',(constraint|memory|bound),[^,]' "$out/t1/plans.csv" | head -1 | grep -q .; then echo "an unsimulated plan has timings"; exit 1; fi
grep -q ',constraint,,,,,,,,' "$out/t1/plans.csv" || { echo "no constraint row with empty timings and memory"; exit 1; }
# Without train_tokens: no time to train (empty), and one step's GPU-hours and cost in significant
# digits (every plan's had read 0.0 and 0.01, a probe found).
grep -v 'train_tokens' "$data/plan-small.yaml" >"$out/no-budget.yaml"
"$cli" plan "$out/no-budget.yaml" --threads 1 --out "$out/nb" >/dev/null
row=$(grep -m 1 ',simulated,' "$out/nb/plans.csv")
echo "$row" | grep -Eq ',simulated,[0-9.]+,[0-9.]+,[0-9.]+,,0\.00[1-9][0-9]*,0\.00[1-9][0-9]*,' || { echo "no-budget CSV row: $row"; exit 1; }
grep -q '^fastest (top 10 by throughput):' "$out/t1.txt" || { echo "no ranked table"; cat "$out/t1.txt"; exit 1; }
grep -q '^Pareto front' "$out/t1.txt" || { echo "no Pareto front"; exit 1; }
grep -q '^rejected' "$out/t1.txt" || { echo "no rejection reasons"; exit 1; }
"$cli" plan "$scenarios/training/gpt3-175b-1024-a100.yaml" --threads 1 --out "$out/full" >/dev/null
"$cli" plan "$scenarios/training/gpt3-175b-1024-a100.yaml" --threads 1 --results "$out/r.jsonl" >/dev/null &
pid=$!
sleep 0.4
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
"$cli" plan "$scenarios/training/gpt3-175b-1024-a100.yaml" --threads 2 --results "$out/r.jsonl" --out "$out/resumed" >"$out/resumed.txt"
cmp "$out/full/plans.csv" "$out/resumed/plans.csv"
[ "$(tail -n +2 "$out/r.jsonl" | wc -l)" -eq "$(grep -c ',simulated,' "$out/full/plans.csv")" ] || { echo "results file does not hold each simulated plan once"; exit 1; }
# A line whose numbers were edited (a negative step, a step that disagrees with its throughput, a
# string) is not trusted: its plan is simulated again, and the ranking is a fresh run's.
"$cli" plan "$data/plan-small.yaml" --threads 2 --results "$out/small.jsonl" --out "$out/small" >/dev/null
awk 'NR == 2 { sub(/"step_s":[^,]*/, "\"step_s\":-5") } NR == 3 { sub(/"step_s":[^,]*/, "\"step_s\":1e-09") } NR == 4 { sub(/"step_s":[^,]*/, "\"step_s\":\"abc\"") } { print }' \
  "$out/small.jsonl" >"$out/edited.jsonl"
[ "$(grep -c '"step_s":-5' "$out/edited.jsonl")" -eq 1 ] || { echo "the edit of the results file did not take"; exit 1; }
"$cli" plan "$data/plan-small.yaml" --threads 2 --results "$out/edited.jsonl" --out "$out/edited" >"$out/edited.txt"
cmp "$out/small/plans.csv" "$out/edited/plans.csv" || { echo "edited results: ranking differs from a fresh run"; exit 1; }
grep -q "simulated ($(( $(tail -n +2 "$out/small.jsonl" | wc -l) - 3 )) resumed)" "$out/edited.txt" || { echo "edited results: the three edited lines were resumed"; head -1 "$out/edited.txt"; exit 1; }
# A narrower rerun on the same file keeps the plans outside its space: the full space then resumes them all.
sed 's/ tp: \[1, 2, 4, 8\],/ tp: [2],/' "$data/plan-small.yaml" >"$out/narrow.yaml"
grep -q ' tp: \[2\],' "$out/narrow.yaml" || { echo "the narrowing edit did not take"; exit 1; }
n=$(tail -n +2 "$out/small.jsonl" | wc -l)
"$cli" plan "$out/narrow.yaml" --threads 2 --results "$out/small.jsonl" >/dev/null
"$cli" plan "$data/plan-small.yaml" --threads 2 --results "$out/small.jsonl" >"$out/wide.txt"
grep -q "$n simulated ($n resumed)" "$out/wide.txt" || { echo "a narrower rerun dropped results"; head -1 "$out/wide.txt"; exit 1; }
# The same file on a changed scenario: refused (status 2), saying what changed, and kept as it was.
cp "$out/r.jsonl" "$out/r.before"
sed 's/precision: bf16/precision: fp16/' "$scenarios/training/gpt3-175b-1024-a100.yaml" >"$out/fp16.yaml"
status=0
"$cli" plan "$out/fp16.yaml" --threads 2 --results "$out/r.jsonl" >/dev/null 2>"$out/fp16.err" || status=$?
[ "$status" -eq 2 ] || { echo "changed scenario: expected status 2, got $status"; cat "$out/fp16.err"; exit 1; }
grep -q 'r.jsonl:1: these results were simulated for other inputs than this search.s (.*precision: "bf16" in the file, "fp16" now' "$out/fp16.err" || { echo "changed scenario: no message"; cat "$out/fp16.err"; exit 1; }
cmp "$out/r.jsonl" "$out/r.before"
# The scenario's own plan is ranked even when the search's lists leave its values out, and said to be
# out of the ranking, with the reason, when it cannot be simulated.
sed 's/^  search: .*/  search: {gpus: [8], tp: [4], micro: [2]}/' "$data/plan-small.yaml" >"$out/own.yaml"
"$cli" plan "$out/own.yaml" --threads 2 >"$out/own.txt"
grep -q "^the scenario's plan ranks [0-9]* of [0-9]* simulated" "$out/own.txt" || { echo "the scenario's plan is not ranked"; cat "$out/own.txt"; exit 1; }
grep -q "(scenario's)" "$out/own.txt" || { echo "the scenario's plan is not marked"; cat "$out/own.txt"; exit 1; }
sed -e 's/^  batch: .*/  batch: {micro: 16, global: 32}/' -e 's/^  parallelism: .*/  parallelism: {tp: 1, dp: 2}/' -e 's/^  search: .*/  search: {gpus: [8], tp: [2], micro: [1]}/' \
  "$data/plan-small.yaml" >"$out/oom.yaml"
"$cli" plan "$out/oom.yaml" --threads 2 >"$out/oom.txt"
grep -q "^the scenario's plan (TP1 PP1 DP2 mb16 .*) is not simulated: OOM: " "$out/oom.txt" || { echo "no word on the scenario's plan"; cat "$out/oom.txt"; exit 1; }
# --results that cannot be a file: refused up front (status 2, naming the option), nothing left beside it.
mkdir "$out/dir"
before=$(ls -A "$out")
status=0
"$cli" plan "$data/plan-small.yaml" --results "$out/dir" >/dev/null 2>"$out/dir.err" || status=$?
[ "$status" -eq 2 ] || { echo "--results DIR: expected status 2, got $status"; cat "$out/dir.err"; exit 1; }
grep -q -- "--results: expected a file (JSON lines), found the directory $out/dir" "$out/dir.err" || { echo "--results DIR: no message"; cat "$out/dir.err"; exit 1; }
# Nothing in the directory, and beside it only the error output (no .dir.tmp.XXXXXX temporary).
[ -z "$(ls -A "$out/dir")" ] && [ "$(ls -A "$out" | grep -vx dir.err)" = "$(printf '%s\n' "$before" | grep -vx dir.err)" ] || { echo "--results DIR left files"; ls -la "$out"; exit 1; }
status=0
"$cli" plan "$data/plan-small.yaml" --results "$out/missing/r.jsonl" >/dev/null 2>"$out/missing.err" || status=$?
[ "$status" -eq 2 ] && grep -qF "$out/missing (its directory) does not exist" "$out/missing.err" || { echo "--results in a missing directory: status $status"; cat "$out/missing.err"; exit 1; }
# A file where its directory should be: named as that, not as a missing directory.
: >"$out/plain"
status=0
"$cli" plan "$data/plan-small.yaml" --results "$out/plain/r.jsonl" >/dev/null 2>"$out/plain.err" || status=$?
[ "$status" -eq 2 ] && grep -qF "$out/plain is not a directory" "$out/plain.err" || { echo "--results under a file: status $status"; cat "$out/plain.err"; exit 1; }
rm -f "$out/plain" "$out/plain.err"
# Training options on an inference scenario: refused (status 2, naming them), not ignored.
status=0
# A system where no plan runs is named under "cheapest on each topology" (a probe found it left out);
# with --bound, the scenario's rank says that pruned plans are not ranked.
"$cli" plan "$data/plan-fp8-two-gpus.yaml" --bound 2 >"$out/fp8.txt"
grep -q '^  no plan simulated on a100: of its 18 plans, 18 break a constraint' "$out/fp8.txt" || { echo "the A100 system is not named"; cat "$out/fp8.txt"; exit 1; }
"$cli" plan "$data/plan-small.yaml" --bound 1 >"$out/bound1.txt"
grep -q "^the scenario's plan ranks [0-9]* of [0-9]* simulated.*(the [0-9]* plans the bound pruned are not ranked" "$out/bound1.txt" || { echo "rank without the pruning caveat"; cat "$out/bound1.txt"; exit 1; }
# Within the top K no pruned plan can be faster: no caveat then.
"$cli" plan "$data/plan-small.yaml" --bound 20 >"$out/bound20.txt"
grep -q "^the scenario's plan ranks 13 of" "$out/bound20.txt" && ! grep -q "plans the bound pruned" "$out/bound20.txt" || { echo "caveat within the top K"; cat "$out/bound20.txt"; exit 1; }
"$cli" plan "$data/sizing-small.yaml" --bound 3 --top 4 >/dev/null 2>"$out/training-only.err" || status=$?
[ "$status" -eq 2 ] && grep -q -- "--bound, --top apply to training scenarios only" "$out/training-only.err" || { echo "--bound on an inference scenario: status $status"; cat "$out/training-only.err"; exit 1; }
status=0
"$cli" run "$data/sizing-small.yaml" --ops >/dev/null 2>"$out/ops.err" || status=$?
[ "$status" -eq 2 ] && grep -q -- "--ops applies to training scenarios only" "$out/ops.err" || { echo "--ops on an inference scenario: status $status"; cat "$out/ops.err"; exit 1; }
echo ok
