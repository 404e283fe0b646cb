#!/usr/bin/env bash
# run_out.sh CLI SCENARIO: `clustersim run --out DIR` writes a summary.json and a trace.json, the
# trace has slices, and a second run writes byte-identical files. (The trace's structure is checked
# by the Catch2 test "the step's Perfetto trace ...".)
set -euo pipefail
cli=$1
scenario=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run "$scenario" --out "$dir/a" >/dev/null
"$cli" run "$scenario" --out "$dir/b" >/dev/null
for f in summary.json trace.json; do
  cmp "$dir/a/$f" "$dir/b/$f"
done
grep -q '"step_time_s"' "$dir/a/summary.json"
# The parts the scenario names are recorded with their SHA-256, as read.
grep -Eq '"file": ".*scenarios/models/[a-z0-9.-]+\.yaml"' "$dir/a/summary.json"
grep -Eq '"sha256": "[0-9a-f]{64}"' "$dir/a/summary.json"
# A trailing slash is not repeated in the files it names.
"$cli" run "$scenario" --out "$dir/c/" | grep -qF "wrote $dir/c/summary.json and $dir/c/trace.json"
grep -q '"ph"' "$dir/a/trace.json"
# An --out that cannot be a directory is a command-line mistake: status 2, naming --out.
touch "$dir/a-file"
for out in "$dir/a-file" ""; do
  set +e
  err=$("$cli" run "$scenario" --out "$out" 2>&1 >/dev/null)
  status=$?
  set -e
  if [ $status -ne 2 ] || [[ "$err" != *"--out: expected a directory to write into"* ]]; then
    echo "run --out '$out': expected status 2 naming --out, got $status: $err"
    exit 1
  fi
done
# A --report directory that cannot be created is named as --report (it also holds --out's files).
touch "$dir/a-file"
set +e
err=$("$cli" run "$scenario" --report "$dir/a-file/report" 2>&1 >/dev/null)
status=$?
set -e
if [ $status -ne 2 ] || [[ "$err" != *"--report $dir/a-file/report: expected a directory to write into, found none that can be created"* ]]; then
  echo "run --report under a file: expected status 2 naming --report, got $status: $err"
  exit 1
fi
# A report file that cannot be written (a directory in its way) is found before the run's own files
# are replaced: a failed run leaves the older summary.json as it was (it had written the new one and
# then failed on the report).
mkdir -p "$dir/c/report.md"
echo old >"$dir/c/summary.json"
set +e
err=$("$cli" run "$scenario" --report "$dir/c" 2>&1 >/dev/null)
status=$?
set -e
if [ $status -ne 2 ] || [[ "$err" != *"report.md: a directory of that name is in the way"* ]] || [ "$(cat "$dir/c/summary.json")" != old ]; then
  echo "run --report with report.md a directory: status $status, summary.json '$(head -c 20 "$dir/c/summary.json")': $err"
  exit 1
fi
