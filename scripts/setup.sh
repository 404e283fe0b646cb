#!/usr/bin/env bash
# Installs the Debian packages clustersim needs (only those missing), configures with a CMake preset
# and builds on all cores. `scripts/setup.sh test` also runs the whole test suite; with no --preset
# it then builds the `sanitize` preset (clang, AddressSanitizer and UndefinedBehaviorSanitizer, the
# libFuzzer targets), runs the suite again under the sanitizers (all but the 9 tests labelled `long`,
# which repeat the simulations over every published case, or plan a million flows, and take minutes
# there), and runs each fuzzer on its corpus for a few seconds (scripts/fuzz.sh). This is what CI runs.
#
#   scripts/setup.sh [build|test] [--preset release|debug|sanitize]
#
# Idempotent: apt-get update runs only when a package is missing; a configured build tree is reused.
set -euo pipefail

action=build
preset=release
explicit_preset=0
while [ $# -gt 0 ]; do
  case "$1" in
    build|test) action=$1 ;;
    --preset) preset=${2:?--preset needs a name (release, debug or sanitize)}; explicit_preset=1; shift ;;
    --preset=*) preset=${1#--preset=}; explicit_preset=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (expected build, test, --preset NAME)" >&2; exit 2 ;;
  esac
  shift
done

packages=(cmake ninja-build g++ git libyaml-cpp-dev libboost-graph-dev libfmt-dev libspdlog-dev
          nlohmann-json3-dev libeigen3-dev catch2 libcli11-dev libopenmpi-dev openmpi-bin libssl-dev)
# Node.js and npm fetch the report's charting library from the npm registry (reports/web); a machine
# that already has them (any packaging) keeps its own.
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
# The test suite opens a report in Debian's headless Chromium; the sanitizer and fuzzing build is clang's.
if [ "$action" = test ]; then packages+=(chromium); fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
updated=0
sanitize=0
if [ "$preset" = sanitize ] || { [ "$action" = test ] && [ "$explicit_preset" = 0 ]; }; then
  sanitize=1
  # clang's runtime (the sanitizers, libFuzzer) is packaged per LLVM version, that of Debian's clang:
  # libclang-rt-14-dev on Debian 12, libclang-rt-19-dev on Debian 13.
  llvm_of_clang() { apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1; }
  llvm=$(llvm_of_clang)
  if [ -z "$llvm" ]; then
    $sudo apt-get update -qq
    updated=1
    llvm=$(llvm_of_clang)
  fi
  if [ -z "$llvm" ]; then
    echo "setup.sh: cannot tell which LLVM version Debian's clang package is (apt-cache depends clang names no clang-N)" >&2
    exit 1
  fi
  packages+=(clang "libclang-rt-$llvm-dev")
fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  [ "$updated" = 1 ] || $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit is optional: when nvcc is not on PATH but installed in the usual place, use it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Apache ECharts (inlined into every HTML report at build time) and, for the tests, playwright-core,
# at the versions package-lock.json pins; reinstalled only when the lock file changes.
web="$root/reports/web"
if [ ! -f "$web/node_modules/echarts/dist/echarts.min.js" ] || [ "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]; then
  echo "setup.sh: installing the report's npm packages (reports/web)"
  (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"

if [ "$action" = test ]; then
  ctest --preset "$preset" -j "$(nproc)"
fi
# The whole suite again under AddressSanitizer and UndefinedBehaviorSanitizer, then the fuzz smoke run.
if [ "$action" = test ] && [ "$explicit_preset" = 0 ]; then
  cmake --preset sanitize >/dev/null
  cmake --build --preset sanitize -j "$(nproc)"
  ctest --preset sanitize -j "$(nproc)"
  "$root/scripts/fuzz.sh" 7
elif [ "$action" = test ] && [ "$preset" = sanitize ]; then
  "$root/scripts/fuzz.sh" 7
fi
