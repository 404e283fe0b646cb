#!/usr/bin/env bash
# run_cost.sh CLI DATA_DIR: `clustersim cost` prices a small training run (table, cost.json and every
# trial in distributions.csv, the same bytes twice, --trials and --seed honoured) and a serving fleet.
set -euo pipefail
cli=$1
data=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cli" cost "$data/cost-small.yaml" --out "$out/a" >"$out/a.txt"
"$cli" cost "$data/cost-small.yaml" --out "$out/b" >/dev/null
cmp "$out/a/cost.json" "$out/b/cost.json"
cmp "$out/a/distributions.csv" "$out/b/distributions.csv"
for row in aws-p5-on-demand gcp-a3-high-spot owned-h100 'gcp-a3-high-spot + aws-p5-on-demand'; do
  grep -q "^  $row " "$out/a.txt" || { echo "no row for $row"; cat "$out/a.txt"; exit 1; }
done
# 50 trials of each of the 4 rows, all finished, plus the header.
[ "$(wc -l <"$out/a/distributions.csv")" -eq 201 ] || { echo "expected 200 trials in distributions.csv"; exit 1; }
"$cli" cost "$data/cost-small.yaml" --trials 10 --seed 7 --json >"$out/c.json"
grep -q '"trials": 10' "$out/c.json" || { echo "--trials not honoured"; exit 1; }
grep -q '"seed": 7' "$out/c.json" || { echo "--seed not honoured"; exit 1; }
"$cli" cost "$data/cost-serving.yaml" >"$out/s.txt"
grep -q 'lambda-h100-on-demand' "$out/s.txt" || { echo "no serving row"; cat "$out/s.txt"; exit 1; }
# A vanishing failure rate: the MTBF in exponent form and no checkpoint ("never"), not the 300-digit
# numbers they were printed as.
sed 's/^  cost:$/  cost:\n    reliability: {failures_per_1000_node_days: 1e-300}/' "$data/cost-small.yaml" >"$out/rare.yaml"
"$cli" cost "$out/rare.yaml" --trials 5 >"$out/rare.txt"
grep -q 'MTBF 2.4e+304 h for the job' "$out/rare.txt" || { echo "MTBF not in exponent form"; cat "$out/rare.txt"; exit 1; }
grep -q '^  aws-p5-on-demand .* never ' "$out/rare.txt" || { echo "no 'never' checkpoint interval"; cat "$out/rare.txt"; exit 1; }
if grep -q "cannot finish" "$out/rare.txt"; then echo "a rare failure read as one that stops the run"; cat "$out/rare.txt"; exit 1; fi
if awk 'length($0) > 200 { bad = 1 } END { exit !bad }' "$out/rare.txt"; then echo "a line over 200 characters"; cat "$out/rare.txt"; exit 1; fi
echo ok
# Command-line mistakes name their option, with status 2: a negative seed (the range it printed was
# a 300-digit number), an --out that is a file.
touch "$out/a-file"
for args in "--seed -1|--seed: expected a seed of 0 to 18446744073709551615, found -1" \
  "--seed 99999999999999999999|--seed: expected a seed of 0 to 18446744073709551615, found 99999999999999999999" \
  "--out $out/a-file|--out: expected a directory to write into"; do
  set +e
  err=$("$cli" cost "$data/cost-small.yaml" ${args%%|*} 2>&1 >/dev/null)
  status=$?
  set -e
  if [ $status -ne 2 ] || [[ "$err" != *"${args##*|}"* ]]; then
    echo "cost ${args%%|*}: expected status 2 and '${args##*|}', got $status: $err"
    exit 1
  fi
done
# An offering a typo away from the scenario's GPU is left out with a note, not in silence; another GPU
# whose name is near a shipped profile's (GH200 beside GB200), or a shipped profile's GPU a letter from
# the scenario's (H800 beside H100), is left out without a word.
cat >"$out/near.yaml" <<'YAML'
scenario:
  name: near
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 8}
  batch: {micro: 1, global: 8}
  train_tokens: 1e9
  cost:
    sheet:
      name: s
      offerings:
        - {name: near, gpu: H100-SXM5-80G, pricing: on-demand, price_per_gpu_hour: 1, as_of: x, source: y}
        - {name: other, gpu: GH200, pricing: on-demand, price_per_gpu_hour: 1, as_of: x, source: y}
        - {name: h800, gpu: H800-SXM5-80GB, pricing: on-demand, price_per_gpu_hour: 1, as_of: x, source: y}
        - {name: od, gpu: H100-SXM5-80GB, pricing: on-demand, price_per_gpu_hour: 2, as_of: x, source: y}
    checkpoint: {write_bandwidth: 10GB/s}
YAML
"$cli" cost "$out/near.yaml" --trials 5 >"$out/near.txt"
grep -q "^note: offering 'near' rents H100-SXM5-80G, not this scenario's H100-SXM5-80GB: left out" "$out/near.txt" || { echo "no note for a near GPU name"; cat "$out/near.txt"; exit 1; }
if grep -q "'other'\|'h800'" "$out/near.txt"; then echo "another GPU's offering was noted"; cat "$out/near.txt"; exit 1; fi
# An offering of the scenario's GPU in nodes of another size (4-GPU instances under 8-GPU DGX nodes)
# is left out with a note: its failures and preemptions would strike nodes the scenario does not have.
sed -e 's/name: near, gpu: H100-SXM5-80G,/name: quad, gpu: H100-SXM5-80GB, gpus_per_node: 4,/' "$out/near.yaml" >"$out/shape.yaml"
"$cli" cost "$out/shape.yaml" --trials 5 >"$out/shape.txt"
grep -q "^note: offering 'quad' rents nodes of 4 GPUs, but the scenario's nodes hold 8: .*: left out" "$out/shape.txt" || { echo "no note for another node size"; cat "$out/shape.txt"; exit 1; }
if grep -q "^  quad " "$out/shape.txt"; then echo "an offering of another node size was priced"; cat "$out/shape.txt"; exit 1; fi
grep -q "^  od " "$out/shape.txt" || { echo "the matching offering is missing"; cat "$out/shape.txt"; exit 1; }
# Offerings rent whole nodes: a plan of 4 GPUs on an 8-GPU node pays for all 8 (it had paid for 4).
sed -e 's/parallelism: {tp: 8}/parallelism: {tp: 4}/' -e 's/global: 8}/global: 4}/' "$out/near.yaml" >"$out/half.yaml"
"$cli" cost "$out/half.yaml" --trials 5 --json >"$out/half.json"
grep -q '^  "gpus": 4,$' "$out/half.json" && grep -q '^  "gpus_billed": 8,$' "$out/half.json" || { echo "expected 4 GPUs used, 8 billed"; cat "$out/half.json"; exit 1; }
"$cli" cost "$out/half.yaml" --trials 5 | grep -q "on 4 GPUs (1 nodes, billed for their 8 GPUs)" || { echo "the billed GPUs are not said"; exit 1; }
