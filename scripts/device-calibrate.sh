#!/usr/bin/env bash
# Calibrates clustersim on a GPU machine in one go: builds clustersim and clustersim-probe-cuda
# (CLUSTERSIM_CUDA=ON, no tests, all cores), runs the probe's full sweep (its --quick sweep if that
# fails), keeps the measurements, nvidia-smi's report and the log in $OUT, and fits a profile with
# `clustersim calibrate` where that command exists.
#
#   scripts/device-calibrate.sh [--quick] [--base PROFILE] [--budget SECONDS] [--prebuilt DIR]
#   scripts/device-calibrate.sh --fetch-debs [DIR]
#
#   --quick          run only the probe's quick sweep
#   --base PROFILE   the hardware profile the fit starts from (default: picked from the GPU's name,
#                    h200-sxm-141gb when nothing matches)
#   --budget S       wall-clock seconds the whole script keeps within (default 570)
#   --prebuilt DIR   skip the dependencies and the build: run DIR/clustersim-probe-cuda (and fit with
#                    DIR/clustersim where it is there and runs), e.g. binaries built on the development
#                    machine and carried, which saves the GPU machine's minutes
#   --fetch-debs     on a machine WITH network and Debian 12 (the development machine): download the
#                    build dependencies' Debian packages into DIR (default .deps/debs) for a GPU
#                    machine that has no network; see "Dependencies" below
#
# Environment: OUT, the results folder (default ./device-out); DEPS_DEBS, the folder of carried
# Debian packages (default .deps/debs).
#
# Results in $OUT, at most 8 files so that the device tool brings every one back:
#   measurements.json             the probe's measurements ("clustersim-measurements/1")
#   csv/gemm.csv, csv/memory.csv, csv/collectives.csv
#   nvidia-smi.txt                nvidia-smi, nvidia-smi -q and nvidia-smi topo -m
#   device-calibrate.log          everything this script and the programs it ran printed
#   measurements-partial.json     only where the full sweep failed and the quick one stood in
#   profile, or profile.tar.gz    clustersim calibrate's output (a tarball when it is a folder of
#                                 more than two files)
#
# Time: the build takes a minute or two on 16 cores, the full probe 2 to 4 minutes on one to eight
# H200s (stopped at 6 minutes, or earlier when the budget runs short: the probe then writes what it
# has measured), the quick fallback under a minute, the fit seconds.
#
# Dependencies: cmake, ninja (optional), g++ and the CUDA toolkit with cuBLAS(Lt) must be there.
# NCCL is taken from the toolkit, the system, or PyTorch's wheel (nvidia-nccl), in that order. Of
# the Debian packages scripts/setup.sh installs (setup.sh itself cannot be reused: it builds every
# target with CUDA on AUTO), those missing come from $DEPS_DEBS when it holds packages, unpacked
# under /tmp and never into /; else from apt-get when running as root with a reachable registry.
# The GPU machines here reach no registry: run `scripts/device-calibrate.sh --fetch-debs` on the
# development machine first, add `/.deps/` to .git/info/exclude, and name `.deps` in the run's carry.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

quick_only=0
base=""
budget=570
prebuilt=""
fetch_dir=""
fetch=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick_only=1 ;;
    --base) base=${2:?--base needs a profile name}; shift ;;
    --base=*) base=${1#--base=} ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --budget=*) budget=${1#--budget=} ;;
    --prebuilt) prebuilt=${2:?--prebuilt needs a folder}; shift ;;
    --prebuilt=*) prebuilt=${1#--prebuilt=} ;;
    --fetch-debs)
      fetch=1
      if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then fetch_dir=$2; shift; fi ;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-calibrate.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$budget" in ''|*[!0-9]*) echo "device-calibrate.sh: --budget expects whole seconds, not '$budget'" >&2; exit 2 ;; esac

# The packages scripts/setup.sh installs that the build needs (Catch2 only builds the tests); to carry,
# with the Debian 12 packages they need (Boost.Graph's CMake package needs Boost.Regex's, and its
# library ICU 72). Checked: CMake finds all of them in the unpacked prefix alone.
dev_packages=(libyaml-cpp-dev libboost-graph-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libeigen3-dev libcli11-dev)
carried_packages=("${dev_packages[@]}" libyaml-cpp0.7 libfmt9 libspdlog1.10 libboost1.74-dev libboost-graph1.74-dev
                  libboost-graph1.74.0 libboost-regex1.74-dev libboost-regex1.74.0 libicu72)

if [ "$fetch" -eq 1 ]; then
  dir=${fetch_dir:-.deps/debs}
  mkdir -p "$dir"
  (cd "$dir" && apt-get download "${carried_packages[@]}") || { echo "device-calibrate.sh: apt-get download failed" >&2; exit 1; }
  echo "device-calibrate.sh: $(ls "$dir"/*.deb | wc -l) packages, $(du -sh "$dir" | cut -f1), in $dir"
  echo "device-calibrate.sh: now add '/.deps/' to .git/info/exclude and carry '.deps' in the device run"
  exit 0
fi

OUT=${OUT:-$root/device-out}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
log="$OUT/device-calibrate.log"
: >"$log"
work=$(mktemp -d /tmp/clustersim-calibrate.XXXXXX)
start=$SECONDS

say() { echo "device-calibrate: $*" | tee -a "$log" >&2; }
left() { echo $((budget - (SECONDS - start))); }
# Runs a command with its output in the log; returns the command's status.
logged() {
  "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}
min() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }

say "start $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores, budget ${budget} s, results in $OUT"

# ---- GPU report (before anything loads the GPUs) -------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  { nvidia-smi; echo; nvidia-smi -q; echo; echo "== nvidia-smi topo -m"; nvidia-smi topo -m; } >"$OUT/nvidia-smi.txt" 2>&1
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  say "GPUs: $(nvidia-smi -L 2>/dev/null | wc -l) x ${gpu_name:-unknown}"
else
  gpu_name=""
  say "nvidia-smi is not on PATH: no GPU report"
fi
if [ -z "$base" ]; then
  case "$gpu_name" in
    *H100*) base=h100-sxm5-80gb ;;
    *A100*) base=a100-sxm4-80gb ;;
    *B200*) base=b200-sxm-180gb ;;
    *) base=h200-sxm-141gb ;;
  esac
fi

# use_prebuilt: the probe and clustersim in $prebuilt, checked to start on this machine.
use_prebuilt() {
  local dir
  dir=$(cd "$prebuilt" 2>/dev/null && pwd) || { say "--prebuilt: $prebuilt is not a folder"; exit 1; }
  probe=$dir/clustersim-probe-cuda
  cs=$dir/clustersim
  # Libraries carried beside the binaries (libfmt, yaml-cpp, ...) are found there.
  export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -x "$probe" ] || { say "--prebuilt: $prebuilt/clustersim-probe-cuda is not an executable"; exit 1; }
  if ! "$probe" --help >/dev/null 2>>"$log"; then
    say "--prebuilt: $probe does not run here (see $log; ldd follows)"
    ldd "$probe" >>"$log" 2>&1
    exit 1
  fi
  say "using the prebuilt $probe"
  if [ -x "$cs" ] && ! "$cs" --help >/dev/null 2>>"$log"; then
    say "--prebuilt: $cs does not run here, so no fit (see $log; ldd follows)"
    ldd "$cs" >>"$log" 2>&1
  fi
}

# build_from_source: install what the build lacks, then build the probe and clustersim.
build_from_source() {
  # ---- toolchain and dependencies -----------------------------------------------------------------
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  export CMAKE_POLICY_VERSION_MINIMUM=3.5  # CMake 4 refuses package files written for older policies otherwise
  for tool in cmake g++ nvcc; do
    command -v "$tool" >/dev/null 2>&1 || { say "$tool is not installed: cannot build"; exit 1; }
  done

  missing=()
  if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${dev_packages[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
  fi
  debs=${DEPS_DEBS:-$root/.deps/debs}
  if [ ${#missing[@]} -gt 0 ]; then
    say "missing Debian packages: ${missing[*]}"
    if compgen -G "$debs/*.deb" >/dev/null && command -v dpkg-deb >/dev/null 2>&1; then
      # Carried packages first: they need no network (apt-get can wait long for a registry it cannot reach).
      prefix=/tmp/clustersim-deps
      rm -rf "$prefix" && mkdir -p "$prefix"
      for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$prefix" || say "could not unpack $f"; done
      export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
      # Where the linker and the built programs find the carried libraries and the ones they need.
      export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      say "using $(ls "$debs"/*.deb | wc -l) carried packages from $debs, unpacked in $prefix"
    elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      if timeout 60 apt-get update -qq >>"$log" 2>&1 &&
         DEBIAN_FRONTEND=noninteractive timeout 180 apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
        say "installed them with apt-get"
      else
        say "apt-get could not install them (no registry reachable?) and $debs holds no packages; configure will name what it misses"
      fi
    else
      say "not root or no apt-get, and $debs holds no packages; configure will name what it misses"
    fi
  fi

  # NCCL: the toolkit's or the system's; else the one in PyTorch's nvidia-nccl wheel (which has no
  # unversioned libnccl.so, so CMake is given the paths).
  nccl_args=()
  have_nccl=0
  for d in /usr/local/cuda /usr/local/cuda/targets/x86_64-linux /usr; do
    [ -f "$d/include/nccl.h" ] || continue
    for l in "$d/lib/libnccl.so" "$d/lib64/libnccl.so" "$d/lib/x86_64-linux-gnu/libnccl.so"; do
      [ -e "$l" ] && have_nccl=1
    done
    [ "$have_nccl" -eq 1 ] && break
  done
  if [ "$have_nccl" -eq 0 ] && [ -z "${NCCL_HOME:-}" ] && command -v python3 >/dev/null 2>&1; then
    wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
    lib=$(ls "$wheel"/lib/libnccl.so* 2>/dev/null | head -n1)
    if [ -n "$wheel" ] && [ -f "$wheel/include/nccl.h" ] && [ -n "$lib" ]; then
      nccl_args=(-DNCCL_INCLUDE_DIR="$wheel/include" -DNCCL_LIBRARY="$lib")
      say "NCCL from the Python wheel: $lib"
    else
      say "NCCL was not found in the toolkit, the system or a Python wheel; the configure step will fail"
    fi
  fi

  # ---- build --------------------------------------------------------------------------------------
  build="$root/build/device-cuda"
  generator=()
  keep_going=(-- -k)
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); keep_going=(-- -k 0); fi
  say "configuring $build"
  if ! logged cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCLUSTERSIM_CUDA=ON \
       -DCLUSTERSIM_BUILD_TESTS=OFF "${nccl_args[@]}" >/dev/null; then
    say "configure failed (see $log)"
    exit 1
  fi
  say "building clustersim-probe-cuda and clustersim on $(nproc) cores"
  logged cmake --build "$build" --target clustersim-probe-cuda clustersim -j "$(nproc)" "${keep_going[@]}" >/dev/null
  probe="$build/bin/clustersim-probe-cuda"
  cs="$build/bin/clustersim"
  if [ ! -x "$probe" ]; then
    say "clustersim-probe-cuda did not build (see $log)"
    exit 1
  fi
  [ -x "$cs" ] || say "clustersim did not build; the measurements are kept without a fit"
  say "built in $((SECONDS - start)) s"
}

if [ -n "$prebuilt" ]; then
  use_prebuilt
else
  build_from_source
fi

# ---- probe ---------------------------------------------------------------------------------------
# run_probe NAME LIMIT [ARGS...]: the probe's measurements in $work/NAME; returns its status.
run_probe() {
  local name=$1 limit=$2
  shift 2
  mkdir -p "$work/$name/csv"
  say "probe ($name), limit ${limit} s: $probe $*"
  local t=$SECONDS
  # SIGTERM at the limit: the probe stops at the next point and writes what it has (status 1).
  logged timeout -k 30 "$limit" "$probe" "$@" --out "$work/$name/measurements.json" --csv "$work/$name/csv"
  local rc=$?
  say "probe ($name) ended with status $rc after $((SECONDS - t)) s"
  return "$rc"
}

full_rc=none
quick_rc=none
if [ "$quick_only" -eq 0 ]; then
  limit=$(min 360 $(($(left) - 150)))
  if [ "$limit" -ge 60 ]; then
    run_probe full "$limit"
    full_rc=$?
  else
    say "too little time left for the full sweep ($(left) s)"
  fi
fi
if [ "$full_rc" != 0 ]; then
  limit=$(min 120 $(($(left) - 45)))
  if [ "$limit" -ge 20 ]; then
    run_probe quick "$limit" --quick
    quick_rc=$?
  else
    say "too little time left for the quick sweep ($(left) s)"
  fi
fi

chosen=""
if [ "$full_rc" = 0 ]; then
  chosen=full
elif [ "$quick_rc" = 0 ]; then
  chosen=quick
  [ -f "$work/full/measurements.json" ] && cp "$work/full/measurements.json" "$OUT/measurements-partial.json"
elif [ -f "$work/full/measurements.json" ]; then
  chosen=full
elif [ -f "$work/quick/measurements.json" ]; then
  chosen=quick
fi
if [ -z "$chosen" ] || [ ! -f "$work/$chosen/measurements.json" ]; then
  say "no measurements were written (see $log)"
  exit 1
fi
cp "$work/$chosen/measurements.json" "$OUT/measurements.json"
mkdir -p "$OUT/csv" && cp "$work/$chosen/csv/"*.csv "$OUT/csv/" 2>/dev/null
say "kept the $chosen sweep's measurements (full: status $full_rc, quick: status $quick_rc)"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$OUT/measurements.json" <<'EOF' 2>&1 | tee -a "$log"
import json, sys
d = json.load(open(sys.argv[1]))
errors = "; ".join("%s: %s" % (k, v) for k, v in sorted(d["meta"].items()) if k.endswith("_error"))
print("device-calibrate: %d gemm, %d memory, %d collective samples; %s" % (
    len(d["gemm"]), len(d["memory"]), len(d["collectives"]), errors or "no section failed"))
EOF
fi

# ---- fit -----------------------------------------------------------------------------------------
if [ -x "$cs" ] && "$cs" calibrate --help >/dev/null 2>&1; then
  limit=$(min 120 $(($(left) - 5)))
  if [ "$limit" -ge 10 ]; then
    say "fitting: clustersim calibrate --from measurements.json --base $base"
    if logged timeout -k 10 "$limit" "$cs" calibrate --from "$OUT/measurements.json" --base "$base" --out "$OUT/profile"; then
      say "profile written to $OUT/profile"
    else
      say "clustersim calibrate failed; the measurements are kept"
    fi
  else
    say "too little time left for the fit ($(left) s)"
  fi
else
  say "clustersim calibrate is not available in this build; the measurements are kept without a fit"
fi
# The device tool brings back 8 files at most: a profile folder of more than two files goes as one tarball.
if [ -d "$OUT/profile" ] && [ "$(find "$OUT/profile" -type f | wc -l)" -gt 2 ]; then
  tar -czf "$OUT/profile.tar.gz" -C "$OUT" profile && rm -rf "$OUT/profile"
fi

rm -rf "$work"
say "done in $((SECONDS - start)) s: $(cd "$OUT" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
# 0 when the kept measurements come from a probe run that ended well; 1 otherwise (they are kept all the same).
case "$chosen:$full_rc:$quick_rc" in
  full:0:*|quick:*:0) exit 0 ;;
  *) exit 1 ;;
esac
