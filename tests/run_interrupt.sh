#!/usr/bin/env bash
# run_interrupt.sh CLI SCENARIO: an interrupted run leaves no partial file behind. The scenario's
# `run --out` is interrupted (SIGINT, as Ctrl-C, and SIGTERM) at several moments; afterwards every
# output present is byte-identical to an uninterrupted run's (outputs are deterministic), and no
# temporary file is left.
set -euo pipefail
cli=$1
scenario=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run "$scenario" --out "$dir/reference" >/dev/null
interrupted=0
for delay in 0.3 0.9 1.5 2.1 2.7; do
  for sig in INT TERM; do
    out="$dir/cut-$delay-$sig"
    # A background job of a script starts with SIGINT ignored; give it the default, as a terminal would.
    env --default-signal=INT,TERM "$cli" run "$scenario" --out "$out" >/dev/null 2>&1 &
    pid=$!
    sleep "$delay"
    kill -s "$sig" "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null && status=0 || status=$?
    [ "$status" -ne 0 ] && interrupted=$((interrupted + 1))
    [ -d "$out" ] || continue
    if ls -A "$out" | grep -q '\.tmp\.'; then
      echo "SIG$sig after $delay s left a temporary file: $(ls -A "$out")"
      exit 1
    fi
    for f in "$out"/*; do
      [ -e "$f" ] || continue
      cmp -s "$f" "$dir/reference/$(basename "$f")" || { echo "SIG$sig after $delay s left a partial $(basename "$f")"; exit 1; }
    done
  done
done
# Interrupted as soon as its first output replaces an older run's: the rest of its outputs and its
# report are still written (the interrupt waits for them), so the directory holds one run's files,
# not a new summary.json beside the older run's trace and report.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$cli" run "$here/data/plan-small.yaml" --report "$dir/older" >/dev/null
for attempt in 1; do
  rm -rf "$dir/mixed"
  cp -a "$dir/older" "$dir/mixed"
  inode=$(stat -c %i "$dir/mixed/summary.json")
  env --default-signal=INT "$cli" run "$scenario" --report "$dir/mixed" >/dev/null 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ "$(stat -c %i "$dir/mixed/summary.json" 2>/dev/null)" = "$inode" ]; do :; done
  kill -s INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null && status=0 || status=$?
  # 130: the interrupt was taken, after the outputs (0 would mean it came too late to test anything).
  [ "$status" -eq 130 ] || { echo "the run interrupted after its summary.json ended with status $status, not 130"; exit 1; }
  name=$(grep -m1 -o '"scenario": "[^"]*"' "$dir/mixed/summary.json" | cut -d'"' -f4)
  for f in report.md report.html; do
    grep -q "$name" "$dir/mixed/$f" || { echo "interrupted after its summary.json ($name), the run left an older $f"; exit 1; }
  done
  for f in requests.csv trace.json; do
    [ "$dir/mixed/$f" -nt "$dir/older/summary.json" ] || { echo "interrupted after its summary.json, the run left an older or no $f"; ls -la "$dir/mixed"; exit 1; }
  done
done
# The check means something only if some runs were cut short.
[ "$interrupted" -gt 0 ] || { echo "no run was interrupted: the scenario runs too fast for this test"; exit 1; }
echo "$interrupted of 10 runs interrupted; no partial or temporary file left"
