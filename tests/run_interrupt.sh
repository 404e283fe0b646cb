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
# The check means something only if some runs were cut short.
[ "$interrupted" -gt 0 ] || { echo "no run was interrupted: the scenario runs too fast for this test"; exit 1; }
echo "$interrupted of 10 runs interrupted; no partial or temporary file left"
