#!/usr/bin/env bash
# run_report.sh CLI DATA SHARED [browser]: capacity-planning reports from real results.
#  - `--report` on run (training and inference), plan (training and sizing) and cost writes
#    report.html, report.md and report.csv beside the command's own files;
#  - `clustersim report` over all of them (and validate --json) fills every section, writes
#    byte-identical files when run again, and refuses what is not a result, with exit status 2;
#  - with `browser`: Debian's headless Chromium opens the page from disk (tests/report_browser.mjs):
#    no console errors, every chart drawn, a screenshot that is not blank.
set -euo pipefail
cli=$1
data=$2
shared=$3
mode=${4:-content}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$cli" run "$data/cost-small.yaml" --report "$dir/train" >/dev/null
"$cli" run "$data/sizing-small.yaml" --report "$dir/serve" >/dev/null
"$cli" plan "$data/plan-small.yaml" --threads 2 --report "$dir/plan" >/dev/null
"$cli" plan "$data/sizing-small.yaml" --report "$dir/size" >/dev/null
"$cli" cost "$data/cost-small.yaml" --report "$dir/cost" >/dev/null
"$cli" cost "$data/cost-serving.yaml" --report "$dir/fleet" >/dev/null
"$cli" validate "$shared/validation/microbench.yaml" --json >"$dir/accuracy.json"
for d in train serve plan size cost fleet; do
  for f in report.html report.md report.csv; do
    [ -s "$dir/$d/$f" ] || { echo "--report in $d did not write $f"; exit 1; }
  done
done
grep -q '"scaling"' "$dir/train/summary.json" || { echo "run --report: no scaling sweep in summary.json"; exit 1; }
# The degrees the sweep cannot run are named with their reasons (the curve had dropped them without
# a word): DP 1 of cost-small does not fit, DP 8 and 16 need more GPUs than its one node.
grep -q '"scaling_left_out"' "$dir/train/summary.json" || { echo "run --report: the degrees left out of the sweep are not in summary.json"; exit 1; }
grep -q 'not on the curve: DP 1 (2 GPUs): OOM: stage 0 needs .*; DP 8 (16 GPUs): the plan needs .* 16 GPUs; the topology has 8' "$dir/train/report.md" ||
  { echo "run --report: the report does not say which degrees the scaling curve left out and why"; grep -n "curve" "$dir/train/report.md"; exit 1; }
grep -q '"rate_sweep"' "$dir/serve/summary.json" || { echo "run --report: no rate sweep in summary.json"; exit 1; }
grep -q '"scenario_sha256"' "$dir/train/summary.json" || { echo "run: summary.json does not record its scenario's hash"; exit 1; }

"$cli" report "$dir/train" "$dir/serve" "$dir/plan" "$dir/size" "$dir/cost" "$dir/fleet" "$dir/accuracy.json" --out "$dir/all" >/dev/null
md="$dir/all/report.md"
# A result named twice (its directory and its file) counts once.
"$cli" report "$dir/train" "$dir/train/summary.json" --out "$dir/twice" | grep -q "from 1 result$" || { echo "report: a result named twice counted twice"; exit 1; }
for heading in "The scenario" "Headline numbers" "Where the step time goes" "Memory per GPU" "Scaling with the GPU count" "Plans compared" \
               "Spot versus on-demand" "Serving latency and throughput" "Fleet sizing" "Assumptions and defaults applied" \
               "Accuracy on published measurements" "Reproducing this report"; do
  grep -q "^## $heading\$" "$md" || { echo "report.md has no section '$heading'"; exit 1; }
done
if grep -q "Not in these results" "$md"; then
  echo "report.md says some results are missing although every kind was given:"
  grep "Not in these results" "$md"
  exit 1
fi
# A fleet fills the nodes billed for it and names the fewest replicas that met the SLO (it had shown
# 12 GPUs of 16 billed; a review had found "12 | 54.90" reading as twice the GPU-hour price).
grep -q '| 8 | 16 | 54.90 | 0.929 | 100.0% | meets the SLO; fills its billed nodes (6 replicas meet) |' "$md" &&
  grep -q 'GPUs 16, \$54.90/hour, .*; 6 replicas met the SLO, the rest of the billed nodes is headroom' "$md" || { echo "report.md lacks the filled fleet"; exit 1; }
grep -q '^sizing,.*,gpus_billed,16,' "$dir/all/report.csv" || { echo "report.csv lacks gpus_billed"; exit 1; }
# Every input's SHA-256, as sha256sum computes it.
for f in "$dir/train/summary.json" "$dir/cost/cost.json" "$dir/accuracy.json"; do
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  grep -q "$sum" "$md" || { echo "report.md lacks the SHA-256 of $f"; exit 1; }
done
grep -q "trace.json" "$dir/all/report.html" || { echo "report.html does not link the Perfetto trace"; exit 1; }
head -1 "$dir/all/report.csv" | grep -q '^section,subject,metric,value,unit$'
grep -q '^headline,cost-small,step_time,' "$dir/all/report.csv" || { echo "report.csv has no step time"; exit 1; }
# A plan search's headline (fastest and cheapest plans), its cheapest plans and its Pareto front are
# in the CSV as in the page (a probe found only the fastest ten there).
for row in '^headline,small: fastest gpus=[^,]*,step_time,' '^headline,small: cheapest gpus=[^,]*,cost,' '^cheapest_plans,small: gpus=' '^pareto_front,small: gpus='; do
  grep -q "$row" "$dir/all/report.csv" || { echo "report.csv has no row matching $row"; exit 1; }
done
# Self-contained: no script or stylesheet fetched from anywhere.
if grep -Eq '<script[^>]+src=|<link[^>]+stylesheet' "$dir/all/report.html"; then
  echo "report.html loads an external script or stylesheet"
  exit 1
fi
# Deterministic.
"$cli" report "$dir/train" "$dir/serve" "$dir/plan" "$dir/size" "$dir/cost" "$dir/fleet" "$dir/accuracy.json" --out "$dir/again" >/dev/null
for f in report.html report.md report.csv; do cmp "$dir/all/$f" "$dir/again/$f"; done
# A hostile scenario name reaches the page only as text.
mkdir -p "$dir/hostile"
sed 's|"scenario": "cost-small"|"scenario": "</script><script>alert(1)</script><b onmouseover=x>\\"quoted"|' "$dir/train/summary.json" >"$dir/hostile/summary.json"
grep -q 'alert(1)' "$dir/hostile/summary.json" || { echo "the hostile name was not planted"; exit 1; }
"$cli" report "$dir/hostile" --out "$dir/hostile-report" >/dev/null
if grep -q '<script>alert\|<b onmouseover' "$dir/hostile-report/report.html"; then
  echo "report.html lets markup from a result through unescaped"
  exit 1
fi
grep -q '&lt;/script&gt;&lt;script&gt;alert(1)' "$dir/hostile-report/report.html" || { echo "report.html does not show the hostile name as text"; exit 1; }
# A newline in a name neither starts a Markdown heading nor splits a table row.
mkdir -p "$dir/newline"
sed 's,"scenario": "cost-small","scenario": "a\\n# Injected\\n| b",' "$dir/train/summary.json" >"$dir/newline/summary.json"
grep -q 'Injected' "$dir/newline/summary.json" || { echo "the newline name was not planted"; exit 1; }
"$cli" report "$dir/newline" --out "$dir/newline-report" >/dev/null
if grep -q '^# Injected' "$dir/newline-report/report.md"; then echo "report.md lets a name's newline start a heading"; exit 1; fi
grep -q 'a # Injected' "$dir/newline-report/report.md" || { echo "report.md does not show the name on one line"; exit 1; }
# What is not a result is refused with status 2, a message, and no files written.
refused() {  # refused INPUT EXPECTED-MESSAGE WHAT
  local out status
  set +e
  out=$("$cli" report "$1" --out "$dir/bad" 2>&1)
  status=$?
  set -e
  [ $status -eq 2 ] && echo "$out" | grep -q "$2" || { echo "report on $3: status $status: $out"; exit 1; }
  [ ! -e "$dir/bad/report.html" ] || { echo "a refused report ($3) left files behind"; exit 1; }
}
echo '{"hello": 1}' >"$dir/other.json"
refused "$dir/other.json" "not a clustersim result" "a non-result"
# A memory part the result does not hold reads "-", not 0.
mkdir -p "$dir/no-weights"
sed 's|"weights_bytes": [0-9.e+]*|"weights_bytes": null|' "$dir/train/summary.json" >"$dir/no-weights/summary.json"
"$cli" report "$dir/no-weights" --out "$dir/no-weights-report" >/dev/null
grep -q '^| stage 0 | - |' "$dir/no-weights-report/report.md" || { echo "a missing memory part is not shown as '-'"; grep '^| stage 0' "$dir/no-weights-report/report.md"; exit 1; }
# An offering none of whose trials finishes has no curve in the cost CDF: its row and a note say so.
printf 'hours,available\n0,0\n1,0\n' >"$dir/never.csv"
sed -e 's|^    sheet: .*|    sheet: {name: s, offerings: [{name: od, gpu: H100-SXM5-80GB, pricing: on-demand, price_per_gpu_hour: 4, as_of: x, source: x}, {name: dry, gpu: H100-SXM5-80GB, pricing: spot, price_per_gpu_hour: 1, as_of: x, source: x, spot: {preemption: {kind: trace, file: '"$dir"'/never.csv}}}]}|' \
  -e '/^    offerings:/d' -e '/^    deadline:/d' "$data/cost-small.yaml" >"$dir/dry.yaml"
"$cli" cost "$dir/dry.yaml" --report "$dir/dry" >/dev/null
grep -q 'Not drawn: dry (no trial finished)' "$dir/dry/report.md" || { echo "an offering with no finished trial is not named under the cost CDF"; exit 1; }
# A serving fleet's cost (cost on an inference scenario) is reported (it had been refused): its
# cheapest offering per million output tokens in the headline, each offering in the cost section.
grep -q "the fleet's cheapest offering is lambda-h100-on-demand (on-demand): \$31.92/hour for 2 GPUs (billed for their nodes' 8), \$9.319 per million output tokens" "$dir/fleet/report.md" &&
  grep -q '^| aws-p5-on-demand | on-demand | 6.880 | 55.04 | 16.069 | 2.715 |$' "$dir/fleet/report.md" &&
  grep -q '^cost,cost-serving: lambda-h100-on-demand,cost_per_million_output_tokens,9.319' "$dir/fleet/report.csv" || { echo "a serving fleet's cost is not reported"; cat "$dir/fleet/report.md"; exit 1; }
if grep -q "Not in these results.* cost" "$dir/fleet/report.md"; then echo "a serving fleet's cost report says no cost result"; exit 1; fi
# A serving cost.json whose figures do not hold together is refused, naming the field (a probe's
# hand edits had been printed as given: a $/hour below price x GPUs billed, 1e308 $ per million).
sed 's|"fleet_cost_per_hour": 55.04|"fleet_cost_per_hour": 1.0|' "$dir/fleet/cost.json" >"$dir/fleet-hourly.json"
refused "$dir/fleet-hourly.json" "field 'offerings\[0\].fleet_cost_per_hour': expected 55.04, price_per_gpu_hour x gpus_billed, found 1.0" "a fleet's \$/hour against its price"
grep -v '"sustained_total_token_throughput"' "$dir/fleet/cost.json" >"$dir/fleet-no-total.json"
refused "$dir/fleet-no-total.json" "field 'sustained_total_token_throughput': expected a non-negative number, found nothing" "a fleet's cost without its total rate"
echo '{"scenario": "s", "offerings": [], "output_token_throughput": 1}' >"$dir/fleet-cost.json"
refused "$dir/fleet-cost.json" "field 'offerings': expected a non-empty list of offerings, found \[\]" "a serving fleet's cost without offerings"
printf '{"plans": [' >"$dir/torn.json"
refused "$dir/torn.json" "not JSON" "torn JSON"
echo '{"step_time_s": 1e99999}' >"$dir/overflow.json"
refused "$dir/overflow.json" "not valid JSON" "a number beyond double range"
# A result with a field of the wrong type is refused naming its file, not with a bare JSON error.
mkdir -p "$dir/wrong-type"
sed 's|"memory": {|"memory": null, "memory_was": {|' "$dir/train/summary.json" >"$dir/wrong-type/summary.json"
refused "$dir/wrong-type" "wrong-type/summary.json:16:13: field 'memory': expected a map, found null" "a wrong-typed field"
# Fields the report reads are typed wherever they stand (a probe's strings had printed "nan days",
# been charted as 0, or ended in the JSON library's own words), and one that is missing shows "-".
mkdir -p "$dir/days-text" "$dir/stages-text" "$dir/fits-text" "$dir/no-rate"
sed 's|"days": \([0-9.e+]*\)|"days": "\1"|' "$dir/train/summary.json" >"$dir/days-text/summary.json"
refused "$dir/days-text" "field '[a-z_]*\[0\]\.days': expected a number, found '[0-9.e+]*'" "a number written as text"
sed 's|"stages": \[|"stages": "x", "stages_were": [|' "$dir/train/summary.json" >"$dir/stages-text/summary.json"
refused "$dir/stages-text" "field 'memory.stages': expected a list of every pipeline stage's memory (at least one), found 'x'" "a list written as text"
sed 's|"fits": true|"fits": "yes"|' "$dir/train/summary.json" >"$dir/fits-text/summary.json"
refused "$dir/fits-text" "field 'memory.fits': expected true or false, found 'yes'" "a flag written as text"
# A key written twice is refused, not read as its last value (a hand edit's second "gpus" had been
# reported beside the first's plan).
mkdir -p "$dir/twice"
sed '0,/"fits": true/s//"fits": true, "fits": false/' "$dir/train/summary.json" >"$dir/twice/summary.json"
refused "$dir/twice" "twice/summary.json:18:27: field 'memory.fits': expected each key once in an object (which value is meant?), found 'fits' twice" "a key written twice"
# Text, whole counts, lists of text and kind-dependent fields are typed too (a probe's edits had
# printed "preemption by ,", 4.5 replicas, "none meets the SLO" for cheapest "x", dropped a plan of
# status "weird" while the headline counted it, and ended in the JSON library's words for notes[0]).
edit() {  # edit NAME FILE PYTHON-STATEMENT: a copy of FILE in $dir/NAME with one field changed
  mkdir -p "$dir/$1"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $3; json.dump(d, open(sys.argv[2], 'w'))" "$2" "$dir/$1/$(basename "$2")"
}
edit cheapest-text "$dir/size/sizing.json" 'd["cheapest"] = "x"'
refused "$dir/cheapest-text" "field 'cheapest': expected a map (the cheapest fleet that meets the SLO) or null, found 'x'" "a sizing's cheapest fleet as text"
edit replicas-half "$dir/size/sizing.json" 'd["candidates"][0]["replicas"] = 4.5'
refused "$dir/replicas-half" "field 'candidates\[0\].replicas': expected a whole number, found 4.5" "a fleet of 4.5 replicas"
edit gpu-number "$dir/size/sizing.json" 'd["candidates"][0]["gpu"] = 5'
refused "$dir/gpu-number" "field 'candidates\[0\].gpu': expected text, found 5" "a GPU named by a number"
edit preemption-number "$dir/serve/summary.json" 'd["preemption"] = 5'
refused "$dir/preemption-number" "field 'preemption': expected text, found 5" "a preemption mode as a number"
edit notes-number "$dir/train/summary.json" 'd["notes"] = [5]'
refused "$dir/notes-number" "field 'notes\[0\]': expected text, found 5" "a note as a number"
edit source-number "$dir/train/summary.json" 'd["source"] = 5'
refused "$dir/source-number" "field 'source': expected a map" "a source as a number"
edit plan-status "$dir/plan/plans.json" 'next(p for p in d["plans"] if p["status"] == "simulated")["status"] = "weird"'
refused "$dir/plan-status" "field 'plans\[[0-9]*\].status': expected simulated, constraint, memory or bound, found \"weird\"" "a plan of an unknown status"
edit defaults-text "$dir/accuracy.json" 'd["cases"][0]["defaults_applied"] = "x"'
refused "$dir/defaults-text/accuracy.json" "field 'cases\[0\].defaults_applied': expected a list of text" "a case's defaults as text"
# Two validation results count their defaults apart (they had been summed: 72 uses over 36 cases),
# a training run without a sweep beside a plan search's curve is said to have none, and the HTML
# shows commands as code, not between backticks.
"$cli" validate "$shared/validation/microbench.yaml" --json >"$dir/accuracy2.json"
"$cli" report "$dir/accuracy.json" "$dir/accuracy2.json" "$dir/plan" --out "$dir/two-validations" >/dev/null
[ "$(grep -c '^| default applied to published cases (' "$dir/two-validations/report.md")" = 2 ] ||
  { echo "two validation results: their defaults are not counted apart"; grep "default applied" "$dir/two-validations/report.md"; exit 1; }
mkdir -p "$dir/no-sweep"
"$cli" run "$data/cost-small.yaml" --out "$dir/no-sweep" >/dev/null
"$cli" report "$dir/no-sweep" "$dir/plan" --out "$dir/no-sweep-report" >/dev/null
grep -q "cost-small: no scaling sweep (the run was made without --report" "$dir/no-sweep-report/report.md" ||
  { echo "a run without a sweep beside a plan's curve is not said to have none"; exit 1; }
grep -q '<code>clustersim run SCENARIO --report DIR</code>' "$dir/no-sweep-report/report.html" || { echo "the HTML shows a command between backticks"; exit 1; }
# validate's other outputs are named as such (they had been refused as results missing a field).
echo '{"cases": [], "unknowns": [], "measured_inside": 0}' >"$dir/unknowns.json"
refused "$dir/unknowns.json" "the output of validate --unknowns, which a report does not read" "validate --unknowns output"
# report.csv holds what report.md's headline and memory tables show: GPU-hours to train and each
# stage's total (they had been in the Markdown only).
grep -q '^headline,[^,]*,gpu_hours_to_train,[0-9.e+]*,GPU-hours$' "$dir/all/report.csv" || { echo "report.csv: no GPU-hours to train"; exit 1; }
grep -q '^memory,[^,]* stage 0,total,[0-9.e+]*,GiB$' "$dir/all/report.csv" || { echo "report.csv: no stage total"; exit 1; }
# No report file may replace a result it reads (a result named report.md in --out had been
# overwritten, exit 0).
mkdir -p "$dir/over"
cp "$dir/accuracy.json" "$dir/over/report.md"
set +e
out=$("$cli" report "$dir/over/report.md" --out "$dir/over" 2>&1)
status=$?
set -e
[ $status -eq 2 ] && echo "$out" | grep -q "is a file this command read: writing there would replace it" || { echo "report --out over its input: status $status: $out"; exit 1; }
cmp -s "$dir/accuracy.json" "$dir/over/report.md" || { echo "report --out replaced its input"; exit 1; }
grep -v '"rate_rps"' "$dir/size/sizing.json" >"$dir/no-rate/sizing.json"
"$cli" report "$dir/no-rate" --out "$dir/no-rate-report" >/dev/null
grep -q "to serve - requests/s" "$dir/no-rate-report/report.md" || { echo "a sizing without its rate does not show '-'"; grep "to serve" "$dir/no-rate-report/report.md"; exit 1; }
if grep -qw "nan" "$dir/no-rate-report/report.md"; then echo "report.md shows nan"; exit 1; fi
# One scaling point without its days (a hand-edited null) shows "-" there; the others keep theirs
# (the whole column had gone blank).
mkdir -p "$dir/null-day"
sed '0,/"days": [0-9.e+]*/s//"days": null/' "$dir/train/summary.json" >"$dir/null-day/summary.json"
"$cli" report "$dir/null-day" --out "$dir/null-day-report" >/dev/null
scaling_rows=$(sed -n '/^| GPUs | step s | MFU | days to train/,/^$/p' "$dir/null-day-report/report.md")
echo "$scaling_rows" | grep -Eq '^\| [0-9,]+ \| [0-9.]+ \| [0-9.]+% \| - \|' || { echo "a scaling point without days does not show '-'"; echo "$scaling_rows"; exit 1; }
echo "$scaling_rows" | grep -Eq '^\| [0-9,]+ \| [0-9.]+ \| [0-9.]+% \| [0-9.]+ \|' || { echo "one scaling point without days blanked the others' days"; echo "$scaling_rows"; exit 1; }
# A result nested deeper than any clustersim writes (a probe's 100,000 levels crashed the check).
mkdir -p "$dir/deep"
{ printf '{"breakdown_s": {}, "step_time_s": 1, "memory": {}, "x": '; head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; printf '}'; } >"$dir/deep/summary.json"
refused "$dir/deep" "deep/summary.json: not a result clustersim wrote: it nests more than 64 levels deep" "a result nested 100,000 deep"
# Headline figures that are not finite, non-negative numbers are refused by field, not shown as "nan s".
mkdir -p "$dir/bad-step" "$dir/bad-ttft"
sed 's|"step_time_s": [0-9.e+-]*|"step_time_s": "x"|' "$dir/train/summary.json" >"$dir/bad-step/summary.json"
refused "$dir/bad-step" "field 'step_time_s': expected a positive number, found 'x'" "a step time that is not a number"
sed 's|"p99_ms": [0-9.e+-]*|"p99_ms": -1|' "$dir/serve/summary.json" >"$dir/bad-ttft/summary.json"
refused "$dir/bad-ttft" "_ms': expected a non-negative number, found -1" "a negative latency"
# Figures that contradict each other or clustersim's ranges are refused too (a probe's hand edits: an
# HBM of 0 beside "fits", 2^64 GPUs, a fullest stage past the stages, no stages, an MFU of 1e300).
mkdir -p "$dir/zero-hbm" "$dir/huge-gpus" "$dir/worst-past" "$dir/no-stages" "$dir/huge-mfu" "$dir/fits-wrong"
sed 's|"capacity_bytes": [0-9.e+]*|"capacity_bytes": 0|' "$dir/train/summary.json" >"$dir/zero-hbm/summary.json"
refused "$dir/zero-hbm" "field 'memory.capacity_bytes': expected a positive number, found 0" "an HBM of 0"
sed '0,/"gpus": [0-9]*/s//"gpus": 18446744073709551616/' "$dir/train/summary.json" >"$dir/huge-gpus/summary.json"
refused "$dir/huge-gpus" "field 'gpus': expected a positive whole number up to 2147483647" "2^64 GPUs"
# ... but tokens a step past 2^31 are a double clustersim writes (global 16384 x 131072 tokens).
mkdir -p "$dir/many-tokens"
sed 's|"tokens_per_step": [0-9.e+]*|"tokens_per_step": 2147483648.0|' "$dir/train/summary.json" >"$dir/many-tokens/summary.json"
"$cli" report "$dir/many-tokens" --out "$dir/many-tokens-report" >/dev/null || { echo "report refused 2^31 tokens a step"; exit 1; }
sed 's|"worst_stage": [0-9]*|"worst_stage": 99|' "$dir/train/summary.json" >"$dir/worst-past/summary.json"
refused "$dir/worst-past" "field 'memory.worst_stage': expected the index of one of the" "a fullest stage past the stages"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['memory']['stages']=[]; json.dump(d,open(sys.argv[2],'w'))" "$dir/train/summary.json" "$dir/no-stages/summary.json"
refused "$dir/no-stages" "field 'memory.stages': expected a list of every pipeline stage's memory (at least one)" "no stages"
sed '0,/"mfu": [0-9.e+-]*/s//"mfu": 1e300/' "$dir/train/summary.json" >"$dir/huge-mfu/summary.json"
refused "$dir/huge-mfu" "field 'mfu': expected a fraction of the GPUs' peak (at most 2)" "an MFU of 1e300"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['memory']['fits']=not d['memory']['fits']; json.dump(d,open(sys.argv[2],'w'))" "$dir/train/summary.json" "$dir/fits-wrong/summary.json"
refused "$dir/fits-wrong" "field 'memory.fits': expected" "a verdict against the numbers"
# So is any other number of a result, wherever it sits: a price, a goodput (each had been printed
# as "$-4.0 k" or "-1.00 within the SLO").
mkdir -p "$dir/bad-cost" "$dir/bad-goodput"
sed 's|"expected_cost_usd": [0-9.e+]*|"expected_cost_usd": -4000.0|' "$dir/cost/cost.json" >"$dir/bad-cost/cost.json"
refused "$dir/bad-cost" "field 'offerings\[0\].expected_cost_usd': expected a non-negative number, found -4000.0" "a negative cost"
sed 's|"request_goodput": [0-9.e+]*|"request_goodput": -1|' "$dir/serve/summary.json" >"$dir/bad-goodput/summary.json"
refused "$dir/bad-goodput" "request_goodput': expected a non-negative number, found -1" "a negative goodput"
# The counts and names the scenario paragraph prints are refused by field too, not printed as
# "on -3 GPUs" or "with the plan 5".
mkdir -p "$dir/bad-gpus" "$dir/bad-plan"
sed 's|"gpus": [0-9]*|"gpus": -3|' "$dir/train/summary.json" >"$dir/bad-gpus/summary.json"
refused "$dir/bad-gpus" "field 'gpus': expected a positive whole number up to 2147483647, found -3" "a negative GPU count"
sed 's|"plan": "[^"]*"|"plan": 5|' "$dir/train/summary.json" >"$dir/bad-plan/summary.json"
refused "$dir/bad-plan" "field 'plan': expected text, found 5" "a plan that is not text"
# A bad figure in a plans.json is named by the plan's place in the file's list, though only the
# simulated plans are kept (a probe was sent to plans[0], a plan rejected by constraints).
mkdir -p "$dir/bad-plans"
first=$(grep -n '"plans": \[' "$dir/plan/plans.json" | cut -d: -f1)
sim=$(grep -n -m1 '"status":"simulated"' "$dir/plan/plans.json" | cut -d: -f1)
[ "$((sim - first - 1))" -gt 0 ] || { echo "plan-small's first simulated plan is its first: the check below tells nothing"; exit 1; }
sed "${sim}s|\"step_s\":[0-9.e+-]*|\"step_s\":-1|" "$dir/plan/plans.json" >"$dir/bad-plans/plans.json"
refused "$dir/bad-plans" "field 'plans\[$((sim - first - 1))\]\.step_s': expected a positive number, found -1" "a negative step in a plan"
# A zero or missing step time, or a key that is not text, is refused too (a probe's 0 s plan had
# ranked first, one without a step had taken its GPU count's scaling point, a numeric key showed 0 GPUs).
mkdir -p "$dir/zero-plan" "$dir/stepless-plan" "$dir/key-plan"
sed "${sim}s|\"step_s\":[0-9.e+-]*|\"step_s\":0|" "$dir/plan/plans.json" >"$dir/zero-plan/plans.json"
refused "$dir/zero-plan" "step_s': expected a positive number, found 0" "a zero step in a plan"
sed "${sim}s|\"step_s\":[0-9.e+-]*,||" "$dir/plan/plans.json" >"$dir/stepless-plan/plans.json"
refused "$dir/stepless-plan" "step_s': expected a positive number, found nothing (the key is missing)" "a plan without its step"
sed "${sim}s|\"key\":\"[^\"]*\"|\"key\":5|" "$dir/plan/plans.json" >"$dir/key-plan/plans.json"
refused "$dir/key-plan" "key': expected text, found 5" "a plan key that is not text"
# The fastest, the cheapest and the Pareto front must be the plans listed's (a probe's edited picks
# made the headline and the front contradict the tables).
mkdir -p "$dir/pick-fast" "$dir/pick-cheap" "$dir/pick-front"
sed 's|^  "fastest": "[^"]*"|  "fastest": "nonsense"|' "$dir/plan/plans.json" >"$dir/pick-fast/plans.json"
refused "$dir/pick-fast" "field 'fastest': expected '.*', the fastest of the plans listed, found 'nonsense'" "a fastest plan that is not the fastest"
sed 's|^  "cheapest": "[^"]*"|  "cheapest": "nonsense"|' "$dir/plan/plans.json" >"$dir/pick-cheap/plans.json"
refused "$dir/pick-cheap" "field 'cheapest': expected '.*', the cheapest of the plans listed, found 'nonsense'" "a cheapest plan that is not the cheapest"
# (the front's first entry dropped: the fastest plan is always on it)
awk '/^  "pareto_front": \[$/ { print; getline; next } { print }' "$dir/plan/plans.json" >"$dir/pick-front/plans.json"
refused "$dir/pick-front" "field 'pareto_front': expected the [0-9]* plans of the plans listed that no other is both faster and cheaper than" "a Pareto front that is not the plans'"
"$cli" report "$dir/plan" --out "$dir/pick-ok" >/dev/null || { echo "the unedited plans.json is refused"; exit 1; }
# A result missing a field that tells its kind names the field, not "not a clustersim result".
mkdir -p "$dir/no-step"
sed 's|"step_time_s": [0-9.e+-]*,||' "$dir/train/summary.json" >"$dir/no-step/summary.json"
refused "$dir/no-step" "field 'step_time_s': expected it in a summary.json of run" "a run result without its step time"
# Two results of one scenario (runs at two plans) keep their CSV rows apart: no section, subject and
# metric twice (a probe found 14 such keys).
mkdir -p "$dir/train-copy"
cp "$dir/train/summary.json" "$dir/train-copy/summary.json"
"$cli" report "$dir/train" "$dir/train-copy" --out "$dir/twice" >/dev/null
dups=$(tail -n +2 "$dir/twice/report.csv" | awk -F, '{print $1 FS $2 FS $3}' | sort | uniq -d | head -3)
[ -z "$dups" ] || { echo "report.csv repeats keys: $dups"; exit 1; }
# Two accuracy results (one file validated twice, say at --tp-overlap on and off) keep their CSV rows
# apart too (a probe found every accuracy key twice).
cp "$dir/accuracy.json" "$dir/accuracy-copy.json"
"$cli" report "$dir/accuracy.json" "$dir/accuracy-copy.json" --out "$dir/two-acc" >/dev/null
dups=$(tail -n +2 "$dir/two-acc/report.csv" | awk -F, '{print $1 FS $2 FS $3}' | sort | uniq -d | head -3)
[ -z "$dups" ] || { echo "report.csv of two accuracy results repeats keys: $dups"; exit 1; }
# A run's scaling sweep and a plan search of the same scenario keep their scaling rows apart (a
# probe found each GPU count's mfu and time to train twice, with different values).
"$cli" run "$data/plan-small.yaml" --report "$dir/plan-run" >/dev/null
"$cli" report "$dir/plan-run" "$dir/plan" --out "$dir/run-and-plan" >/dev/null
dups=$(tail -n +2 "$dir/run-and-plan/report.csv" | awk -F, '{print $1 FS $2 FS $3}' | sort | uniq -d | head -3)
[ -z "$dups" ] || { echo "report.csv of a run and a plan search of one scenario repeats keys: $dups"; exit 1; }
# Counts are printed whole: a seed of 123456 had read 1.235e+05 (another Monte Carlo when rerun).
"$cli" cost "$data/cost-small.yaml" --seed 123456 --trials 100 --report "$dir/seeded" >/dev/null
grep -q "seed 123456" "$dir/seeded/report.md" || { echo "the report does not give the seed whole: $(grep -o 'seed [^)]*' "$dir/seeded/report.md" | head -1)"; exit 1; }
# Two results without a scenario name are told apart by their files too (a review found both as "-").
mkdir -p "$dir/nameless-a" "$dir/nameless-b"
grep -v '^  "scenario": ' "$dir/train/summary.json" >"$dir/nameless-a/summary.json"
cp "$dir/nameless-a/summary.json" "$dir/nameless-b/summary.json"
"$cli" report "$dir/nameless-a" "$dir/nameless-b" --out "$dir/nameless" >/dev/null
dups=$(tail -n +2 "$dir/nameless/report.csv" | awk -F, '{print $1 FS $2 FS $3}' | sort | uniq -d | head -3)
[ -z "$dups" ] || { echo "report.csv of two nameless results repeats keys: $dups"; exit 1; }
# ... and the page tells them apart in every section, the scenario and headline ones too.
name=$(sed -n 's/^  "scenario": "\([^"]*\)",$/\1/p' "$dir/train/summary.json" | head -1)
[ -n "$name" ] || { echo "no scenario name in summary.json"; exit 1; }
if grep -q "^$name: " "$dir/twice/report.md"; then echo "report.md has a paragraph of '$name' without its file:"; grep "^$name: " "$dir/twice/report.md"; exit 1; fi
# A validate --json result is checked against itself (a probe's tampered files printed "+nan%", a
# status "weird", and a MAPE or case count the cases did not give).
acc="$dir/accuracy.json"
sed '0,/"error_pct": [^,]*/s//"error_pct": "x"/' "$acc" >"$dir/acc-errstr.json"
sed '0,/"status": "ok"/s//"status": "weird"/' "$acc" >"$dir/acc-status.json"
sed 's/"mape_pct": [0-9.]*/"mape_pct": 0.01/' "$acc" >"$dir/acc-mape.json"
sed 's/"cases": [0-9][0-9]*/"cases": 99/' "$acc" >"$dir/acc-count.json"
sed '0,/"predicted": {/{/"predicted": {/{n;s/: [0-9.e+-]*/: 1000000000/}}' "$acc" >"$dir/acc-pred.json"
refused "$dir/acc-errstr.json" "field 'cases\[0\].error_pct': expected a number, found 'x'" "an error that is not a number"
refused "$dir/acc-status.json" "field 'cases\[0\].status': expected ok, unsupported or failed, found 'weird'" "an unknown status"
refused "$dir/acc-mape.json" "mape_pct': expected [0-9.]*, as the ok cases' errors give, found 0.01" "a MAPE its cases do not give"
refused "$dir/acc-count.json" "cases': expected [0-9]*, as the cases listed give, found 99" "a case count the cases do not give"
refused "$dir/acc-pred.json" "field 'cases\[0\].error_pct': expected [0-9.]*, as its measured and predicted" "an error its values do not give"
# Two cases of one id (which validate refuses) would share a CSV key (a probe).
cat >"$dir/acc-dup.json" <<'EOF'
{"cases": [{"id": "g", "kind": "gemm", "status": "ok", "primary_metric": "tflops", "predicted": {"tflops": 90}, "measured": {"tflops": 100},
  "error_pct": -10.0, "errors_pct": {"tflops": -10.0}, "defaults_applied": []},
  {"id": "g", "kind": "gemm", "status": "ok", "primary_metric": "tflops", "predicted": {"tflops": 90}, "measured": {"tflops": 100},
  "error_pct": -10.0, "errors_pct": {"tflops": -10.0}, "defaults_applied": []}],
 "summary": {"gemm": {"cases": 2, "failed": 0, "mape_pct": 10.0, "max_abs_error_pct": 10.0, "ok": 2, "unsupported": 0}}}
EOF
refused "$dir/acc-dup.json" "field 'cases\\[1\\].id': expected an id no other case has (cases\\[0\\] has it), found 'g'" "a repeated case id"
# A case's error is shown from its full-precision figures: validate's -16.349 (written -16.35) is
# -16.3% as validate prints it, not -16.35 rounded again to -16.4% (a probe).
cat >"$dir/acc-round.json" <<'EOF'
{"cases": [{"id": "g", "kind": "gemm", "status": "ok", "primary_metric": "tflops", "predicted": {"tflops": 83.651}, "measured": {"tflops": 100},
  "error_pct": -16.35, "errors_pct": {"tflops": -16.35}, "defaults_applied": []}],
 "summary": {"gemm": {"cases": 1, "failed": 0, "mape_pct": 16.35, "max_abs_error_pct": 16.35, "ok": 1, "unsupported": 0}}}
EOF
"$cli" report "$dir/acc-round.json" --out "$dir/acc-round" >/dev/null
grep -q '| g | tflops | 100 | 83.65 | -16.3% |' "$dir/acc-round/report.md" || { echo "report rounds a validation error twice"; exit 1; }
# A plan search in which nothing runs: the report says so, with the counts, not empty tables.
# (plan exits 3 there, after writing the report: tests/run_infeasible.sh)
status=0
"$cli" plan "$data/plan-nothing-fits.yaml" --report "$dir/nofit" >/dev/null 2>&1 || status=$?
[ $status -eq 3 ] || { echo "plan of a space where nothing runs: expected status 3, got $status"; exit 1; }
grep -q 'no plan of the 49 in the space runs: 19 break a constraint and 30 do not fit in memory' "$dir/nofit/report.md" || { echo "no-plan report lacks its reasons"; exit 1; }
grep -q 'The plan search simulated no plan' "$dir/nofit/report.md" || { echo "no-plan report claims no search ran"; exit 1; }
# An offering that cannot finish shows "never", not a cost of zero.
mkdir -p "$dir/never"
sed 's|"can_finish": true|"can_finish": false|' "$dir/cost/cost.json" >"$dir/never/cost.json"
"$cli" report "$dir/never" --out "$dir/never-report" >/dev/null
grep -q "never finishes" "$dir/never-report/report.md" || { echo "report.md does not say an offering never finishes"; exit 1; }
if grep -q '\$0\.00' "$dir/never-report/report.md"; then echo "report.md prices an offering that never finishes at \$0.00"; exit 1; fi
grep -q "nothing to draw" "$dir/never-report/report.md" || { echo "report.md draws a cost chart with no finished offering"; exit 1; }
# Trials that did not finish count after every one that did: the cost CDF levels off at the share
# that finished and its P90 is never, as cost.json's is (the chart had reached 1 over the finished
# trials alone, with a P90 in dollars).
"$cli" cost "$data/cost-partial.yaml" --report "$dir/partial" >/dev/null
finished=$(grep -o '"finished_trials": [0-9]*' "$dir/partial/cost.json" | grep -o '[0-9]*$')
[ "$finished" -gt 0 ] && [ "$finished" -lt 40 ] || { echo "cost-partial.yaml should leave some of its 40 trials unfinished, not $finished"; exit 1; }
grep -q "^| aws-p5-on-demand | \$[0-9.]* k | \$[0-9.]* k | never | $finished of 40 |$" "$dir/partial/report.md" ||
  { echo "the cost CDF table does not count the unfinished trials"; grep aws-p5 "$dir/partial/report.md"; exit 1; }
grep -q "^| aws-p5-on-demand | on-demand | \$[0-9.]* k | never | [0-9.]* | never |" "$dir/partial/report.md" ||
  { echo "the cost table does not say never for a P90 past the finished trials"; grep aws-p5 "$dir/partial/report.md"; exit 1; }
# distributions.csv is checked against cost.json: a torn, foreign or unreadable one is refused, not
# drawn from what is left.
mkdir -p "$dir/torn" "$dir/foreign" "$dir/garbled"
for d in torn foreign garbled; do cp "$dir/partial/cost.json" "$dir/$d/"; done
head -n 10 "$dir/partial/distributions.csv" >"$dir/torn/distributions.csv"
refused "$dir/torn" "torn/distributions.csv: holds 9 trials of aws-p5-on-demand where cost.json says $finished finished" "a torn distributions.csv"
{ cat "$dir/partial/distributions.csv"; echo "ghost,0,1.0,100"; } >"$dir/foreign/distributions.csv"
refused "$dir/foreign" "foreign/distributions.csv:$((finished + 2)): expected 4 fields: an offering of cost.json, a trial number under 40 above the offering's last, a finish time in days and a cost in dollars, found 'ghost,0,1.0,100'" "a trial of another offering"
# Every field of a row is checked: a finish time that is not a number or negative, a fifth
# field, a trial number repeated (they had been drawn, with exit 0). Found by a probe.
# Each bad row keeps line 3's own trial number, so only the field under test is wrong; the last
# repeats line 2's.
second=$(sed -n 2p "$dir/partial/distributions.csv")
third=$(sed -n 3p "$dir/partial/distributions.csv")
IFS=, read -r name trial days dollars <<<"$third"
IFS=, read -r _ trial2 _ _ <<<"$second"
for bad in "$name,$trial,nan,$dollars" "$name,$trial,-5,$dollars" "$third,extra" "$name,$trial2,$days,$dollars"; do
  mkdir -p "$dir/row"
  cp "$dir/partial/cost.json" "$dir/row/"
  { head -n 2 "$dir/partial/distributions.csv"; echo "$bad"; tail -n +4 "$dir/partial/distributions.csv"; } >"$dir/row/distributions.csv"
  refused "$dir/row" "row/distributions.csv:3: expected 4 fields" "the row '$bad'"
done
tr ',' ';' <"$dir/partial/distributions.csv" >"$dir/garbled/distributions.csv"
refused "$dir/garbled" "garbled/distributions.csv:1: expected the header" "a distributions.csv of another format"
# cost.json's percentiles and mean are those of the trials beside it: a hand-edited P50, or a trial's
# cost changed in the CSV, is refused (the report had shown the edited P50 beside the CDF of the
# trials, which said otherwise).
mkdir -p "$dir/p50-edited" "$dir/trial-edited"
cp "$dir/cost/distributions.csv" "$dir/p50-edited/"
awk '/"cost_usd": \{/ {inside = 1} inside && /"p50":/ && !done {sub(/"p50": [0-9.e+]*/, "\"p50\": 1.5"); done = 1} {print}' "$dir/cost/cost.json" >"$dir/p50-edited/cost.json"
refused "$dir/p50-edited" "p50-edited/distributions.csv: offering '[^']*' cost_usd.p50 is [0-9.e+]* over its trials in distributions.csv, but cost.json says 1.5: the two files are not from one run" "an edited P50"
cp "$dir/cost/cost.json" "$dir/trial-edited/"
awk -F, -v OFS=, 'NR == 2 {$4 = $4 * 3} {print}' "$dir/cost/distributions.csv" >"$dir/trial-edited/distributions.csv"
refused "$dir/trial-edited" "trial-edited/distributions.csv: offering '[^']*' cost_usd.[a-z0-9]* is [0-9.e+]* over its trials" "a trial's cost edited"
# The partial run's own files (null P90 and mean beside unfinished trials) are accepted.
"$cli" report "$dir/partial" --out "$dir/partial-again" >/dev/null
# An offering's fields of the wrong type are refused by field (they had been shown as "-" or blank).
mkdir -p "$dir/price-text" "$dir/finished-over"
sed 's|"price_per_gpu_hour": [0-9.e+]*|"price_per_gpu_hour": "abc"|' "$dir/cost/cost.json" >"$dir/price-text/cost.json"
refused "$dir/price-text" "field 'offerings\[0\].price_per_gpu_hour': expected a number, found 'abc'" "a price that is not a number"
sed 's|"finished_trials": [0-9]*|"finished_trials": 5000|' "$dir/cost/cost.json" >"$dir/finished-over/cost.json"
refused "$dir/finished-over" "field 'offerings\[0\].finished_trials': expected a whole number up to the trials run, found 5000" "more trials finished than run"
# Every figure of report.csv has its own (section, subject, metric): the sizing rows had named only
# the GPU and TP, so an aggregated and a disaggregated fleet of one GPU shared their keys.
dups=$(sed -E 's/,[^,]*,[^,]*$//' "$dir/all/report.csv" | sort | uniq -d)
[ -z "$dups" ] || { echo "report.csv repeats keys: $dups"; exit 1; }
grep -q '^sizing,"sizing: [^"]* on [^"]* TP[0-9]*, [0-9]* replicas*",meets_slo,[01],' "$dir/all/report.csv" || { echo "report.csv gives no sizing fleet's SLO verdict"; exit 1; }
# The trace link is a relative, URL-safe reference.
grep -q 'href="\./\.\./train/trace\.json"' "$dir/all/report.html" || { echo "report.html's trace link is not ./../train/trace.json"; grep -o 'href="[^"]*"' "$dir/all/report.html"; exit 1; }

if [ "$mode" = browser ]; then
  command -v node >/dev/null || { echo "the browser test needs Node.js (scripts/setup.sh test installs it)"; exit 1; }
  [ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "the browser test needs Debian's chromium (scripts/setup.sh test installs it)"; exit 1; }
  [ -d "$here/../reports/web/node_modules/playwright-core" ] || { echo "the browser test needs playwright-core: npm ci in reports/web (scripts/setup.sh does it)"; exit 1; }
  node "$here/report_browser.mjs" "$dir/all/report.html" "$dir/screenshot.png"
  node "$here/report_browser.mjs" "$dir/hostile-report/report.html" "$dir/hostile.png"
fi
