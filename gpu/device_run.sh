#!/usr/bin/env bash
# The GPU track's run on a lent GPU machine that has CUDA (nvcc, the driver, a
# host compiler) but none of the kit's Debian packages and no package registry.
# gpu/prepare_device_bundle.sh, run beforehand on a Debian 12 machine with a
# network, puts those packages in .device/debs; this script, on the GPU machine:
#
#   1. unpacks each .deb into $PREFIX (dpkg -x, or ar + tar: no root, no dpkg database) and
#      points PATH, PKG_CONFIG_*, CPATH, LIBRARY_PATH and LD_LIBRARY_PATH at it
#   2. runs gpu/check.sh (configure with -Dcuda=enabled for sm_90, build only
#      what it runs, tests/gpu, the gpu/dev harnesses, the 125M and 1B benches,
#      pdlab compare, labs 02 and 05 on both devices) within what is left of
#      the budget: each step gets at most the time left, later ones are skipped
#   3. always writes $OUT/report.md (check.sh's report, or what exists of it),
#      $OUT/device_run.log and $OUT/results.tar.gz (every log and JSON)
#
# With the device tool:  run command "gpu/device_run.sh",
# carry [".device/debs", ".device/COMMIT"], timeout_s 600 (not all of .device:
# a dry run's build folder there belongs to this checkout's path). A second
# call on a still-warm machine reuses the build folder it left there. Where no GPU is visible it says so, the build and the host
# tests still run, and every GPU step skips (exit 77).
#
#   env: OUT=.device/out     where the report goes (the device tool sets it)
#        BUDGET_S=480        the whole run's budget, in seconds
#        PREFIX=/tmp/pdlab-prefix  JOBS=$(nproc)  BUILD=.device/build
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

started=$(date +%s)
budget=${BUDGET_S:-480}
out=${OUT:-.device/out}
prefix=${PREFIX:-/tmp/pdlab-prefix}
build=${BUILD:-.device/build}
results="$build/results"
mkdir -p "$out" "$results"
log="$out/device_run.log"
: >"$log"

say() { echo "device_run: $*" | tee -a "$log" >&2; }
elapsed() { echo $(( $(date +%s) - started )); }

# What gpu/check.sh runs, and nothing else: the rest of the kit (other labs,
# the engine's unit tests, tools) would double the build for nothing here.
targets=(
    src/pdlab/pdlab
    gpu/dev/targets gpu/dev/attention_decode gpu/dev/attention_prefill gpu/dev/bandwidth gpu/dev/gemm
    gpu/dev/gemv_bf16 gpu/dev/gemv_int8
    tests/gpu/gpu_tests tests/gpu/gpu_host_tests tests/gpu/gpu_pair_tests
    labs/track1/02-prefill-and-decode/02-prefill-and-decode
    labs/track1/05-length-and-batch/05-length-and-batch
    labs/track3/13-speculative-decoding/13-speculative-decoding
    labs/track3/14-attention-kernels/14-attention-kernels
)

# One package's files into $prefix: dpkg -x, or ar and tar where there is no dpkg.
extract_deb() {
    if command -v dpkg >/dev/null 2>&1; then
        dpkg -x "$1" "$prefix"
        return
    fi
    local data
    data=$(ar t "$1" | grep '^data\.tar') || return 2
    case "$data" in
        *.xz) ar p "$1" "$data" | tar -xJ -C "$prefix" ;;
        *.zst) ar p "$1" "$data" | tar --zstd -x -C "$prefix" ;;
        *.gz) ar p "$1" "$data" | tar -xz -C "$prefix" ;;
        *) ar p "$1" "$data" | tar -x -C "$prefix" ;;
    esac
}

# 1. The packages, unpacked into $prefix.
unpack_bundle() {
    local debs=(.device/debs/*.deb)
    if [ ! -f "${debs[0]}" ]; then
        say "no .device/debs/*.deb: run gpu/prepare_device_bundle.sh on a Debian 12 machine first, then carry .device"
        return 2
    fi
    rm -rf "$prefix"
    mkdir -p "$prefix/bin"
    for f in "${debs[@]}"; do extract_deb "$f" || { say "cannot unpack $f"; return 2; }; done
    # Debian's meson is a Python package; run it with whatever python3 is here.
    printf '#!/bin/sh\nexec python3 %s/usr/bin/meson "$@"\n' "$prefix" >"$prefix/bin/meson"
    chmod +x "$prefix/bin/meson"
    say "unpacked ${#debs[@]} packages into $prefix in $(elapsed) s"
}

# The unpacked packages first on every search path. pkg-config reads only the
# bundle's .pc files, and its sysroot turns their /usr paths into $prefix/usr.
bundle_env() {
    local lib="$prefix/usr/lib/x86_64-linux-gnu"
    export PATH="$prefix/bin:$prefix/usr/bin:$PATH"
    export PYTHONPATH="$prefix/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
    export PKG_CONFIG="$prefix/usr/bin/pkgconf"
    export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$prefix/usr/share/pkgconfig"
    export PKG_CONFIG_SYSROOT_DIR="$prefix"
    # The multiarch folder too: openssl's headers include opensslconf.h from it.
    export CPATH="$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"
}

# The machine as found: the tools the build needs and where they come from.
describe_machine() {
    say "host $(uname -n): $(nproc) cores, $(uname -r); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    say "meson $(meson --version 2>&1 | head -n1) ($(command -v meson)); ninja $(ninja --version 2>&1) ($(command -v ninja))"
    say "c++: $(c++ --version 2>&1 | head -n1); nvcc: $(nvcc --version 2>&1 | tail -n2 | head -n1)"
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n1)"
    else
        say "NO GPU FOUND: nvidia-smi sees none. The build and host tests run; every GPU step skips (77)."
    fi
}

# 3. What comes back: at most 8 files under $OUT, so the many logs travel as one archive.
collect() {
    local report="$out/report.md"
    if [ ! -s "$report" ]; then
        { echo "# GPU results (incomplete: gpu/check.sh did not finish)"; echo
          cat "$results/summary.md" "$results/timings.md" "$results/full.md" 2>/dev/null; } >"$report"
    fi
    [ -f .device/COMMIT ] && sed -i "2i Bundle prepared at commit $(cat .device/COMMIT)." "$report"
    tar -czf "$out/results.tar.gz" -C "$results" . 2>>"$log"
    say "done in $(elapsed) s: $out/report.md, $out/results.tar.gz, $out/device_run.log"
}

# A build folder configured in another checkout (its paths are absolute) cannot be reused.
drop_foreign_build() {
    if [ -f "$build/build.ninja" ] && ! grep -qF -- "--internal regenerate $PWD " "$build/build.ninja"; then
        say "$build was configured in another checkout: starting it afresh"
        rm -rf "$build"
        mkdir -p "$results"
    fi
}

main() {
    drop_foreign_build
    unpack_bundle || { collect; return 2; }
    bundle_env
    describe_machine
    local left=$(( budget - $(elapsed) - 15 ))  # 15 s for collect()
    say "gpu/check.sh with $left s left of the $budget s budget"
    BUILD="$build" TARGETS="${targets[*]}" BUDGET_S="$left" RESULTS="$results" \
        timeout $(( left + 30 )) gpu/check.sh "$out/report.md" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    say "gpu/check.sh exited $rc after $(elapsed) s"
    collect
    return "$rc"
}

main
