#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) on its committed corpus for a short while, one per core at a
# time: the CI smoke run.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [BUILD_DIR]     (defaults: 7, build/sanitize)
#
# Needs the sanitize build (scripts/setup.sh test builds it). New inputs that libFuzzer finds go to a
# scratch directory, not into the committed corpus; a crash, a leak, a sanitizer report, a timeout
# (10 s per input) or an error other than InputError stops the run with the reproducer's path.
# To grow the corpus: fuzz/README.md.
set -euo pipefail
seconds=${1:-7}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${2:-$root/build/sanitize}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# One target: its verdict goes to $scratch/NAME.result ("FAILED" on its first line when it failed).
fuzz_one() {
  local name=$1 corpus=$2 target=$3
  mkdir -p "$scratch/$name" "$scratch/artifacts-$name"
  # The targets write each input to a file in $TMPDIR (fuzz/fuzz_common.hpp): keep those in scratch too.
  if ! TMPDIR="$scratch" "$target" "$scratch/$name" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$scratch/artifacts-$name/" -print_final_stats=1 >"$scratch/$name.log" 2>&1; then
    {
      echo "fuzz_$name: FAILED"
      tail -n 40 "$scratch/$name.log"
      for a in "$scratch/artifacts-$name"/*; do
        [ -e "$a" ] && mkdir -p "$root/build/fuzz-findings" && cp "$a" "$root/build/fuzz-findings/" && echo "reproducer: build/fuzz-findings/$(basename "$a")"
      done
    } >"$scratch/$name.result"
    return
  fi
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$scratch/$name.log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz_$name: $runs inputs in ${seconds} s, no findings" >"$scratch/$name.result"
}

# One target per core at a time (each fuzzes on one thread); the verdicts print in corpus order.
names=()
for corpus in "$root"/fuzz/corpus/*/; do
  name=$(basename "$corpus")
  target="$build/bin/fuzz_$name"
  [ -x "$target" ] || { echo "fuzz.sh: $target is not built (configure and build the sanitize preset)"; exit 1; }
  names+=("$name")
  fuzz_one "$name" "$corpus" "$target" &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
done
wait
status=0
for name in "${names[@]}"; do
  cat "$scratch/$name.result"
  if head -n 1 "$scratch/$name.result" | grep -q ': FAILED$'; then status=1; fi
done
exit $status
