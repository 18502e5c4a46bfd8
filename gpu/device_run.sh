#!/usr/bin/env bash
# The GPU track's run on a lent GPU machine that has CUDA (nvcc, the driver, a
# host compiler) but none of the kit's Debian packages and no package registry.
# gpu/prepare_device_bundle.sh, run beforehand on a Debian 12 machine with a
# network, puts those packages in .device/debs; this script, on the GPU machine:
#
#   0. checks and says what it assumes: CUDA under CUDA_PATH or /usr/local/cuda*,
#      a host g++ that nvcc accepts, dpkg or ar + xz, python3; nvidia-smi and the GPU
#   1. unpacks each .deb into $PREFIX (dpkg -x, or ar + tar: no root, no dpkg
#      database) and points the build's search paths (PATH, PKG_CONFIG_*, CPATH,
#      LIBRARY_PATH) at it; the programs find the bundle's and CUDA's libraries
#      through an rpath, leaving the machine's own tools their own libraries
#   1b. where .device/prebuilt.tar.xz was carried (prepare_device_bundle.sh
#      --prebuilt: the programs built on the Debian 12 machine for sm_90, with
#      an rpath into /tmp/pdlab-prefix), unpacks it into $BUILD (inside this
#      tree, so that they find its data/: src/base/kit_root.hpp), then checks
#      with ldd that every library they need is found. If one
#      is not, it says which and builds here instead (step 2's build)
#   2. runs gpu/check.sh (configure with -Dcuda=enabled for this GPU alone,
#      build only what it runs, or nothing with prebuilt programs; then
#      bandwidth, GEMM, the 1B bench and the
#      targets first, the gpu tests with short timeouts, then the rest) within
#      what is left of the budget: each step gets at most the time left, later
#      ones are skipped. $OUT/report.md is rewritten after every step
#   3. always writes $OUT/report.md (check.sh's report, or what exists of it),
#      $OUT/device_run.log and $OUT/results.tar.gz (every log and JSON)
#
# With the device tool:  run command "gpu/device_run.sh",
# carry [".device/debs", ".device/COMMIT", ".device/prebuilt.tar.xz"] (the last
# only with --prebuilt), timeout_s 600 (not all of .device:
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

# What gpu/check.sh runs, and nothing else (gpu/device_targets): the rest of
# the kit (other labs, the engine's unit tests, tools) would double the build
# for nothing here.
mapfile -t targets < <(grep -v '^#' gpu/device_targets)

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

# The unpacked packages first on the build's search paths. pkg-config reads
# only the bundle's .pc files, and its sysroot turns their /usr paths into
# $prefix/usr. At run time the kit's programs find the bundle's libraries
# through an rpath (LDFLAGS, read by meson setup; gpu/meson.build adds CUDA's),
# not LD_LIBRARY_PATH: bookworm's libraries ahead of the machine's own would be
# loaded by its python3, nvidia-smi and the rest too. DT_RPATH
# (--disable-new-dtags), not DT_RUNPATH, so that it also serves the libraries'
# own dependencies (libdnnl loads libOpenCL). Spelt -Xlinker, which g++ and
# nvcc both take (meson hands LDFLAGS to nvcc too, for the programs it links,
# and nvcc refuses -Wl,: the rehearsal in a clean chroot found that).
bundle_env() {
    local lib="$prefix/usr/lib/x86_64-linux-gnu"
    export PATH="$prefix/bin:$prefix/usr/bin:$PATH"
    export PYTHONPATH="$prefix/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
    # Debian's pkgconf needs the bundle's libpkgconf3, and only it gets the bundle's libraries.
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s/usr/bin/pkgconf "$@"\n' "$lib" "$prefix" >"$prefix/bin/pkgconf"
    chmod +x "$prefix/bin/pkgconf"
    export PKG_CONFIG="$prefix/bin/pkgconf"
    export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$prefix/usr/share/pkgconfig"
    export PKG_CONFIG_SYSROOT_DIR="$prefix"
    # The multiarch folder too: openssl's headers include opensslconf.h from it.
    export CPATH="$prefix/usr/include:$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LDFLAGS="-Xlinker --disable-new-dtags -Xlinker -rpath=$lib${LDFLAGS:+ $LDFLAGS}"
    export PATH="$cuda/bin:$PATH"
}

# The assumptions this script makes about the machine, checked: CUDA under
# CUDA_PATH or /usr/local/cuda*, a host g++ its nvcc accepts, dpkg or ar + xz
# to unpack the bundle, python3 for meson. Sets $cuda. Fails (2) with the
# reason when one does not hold; nvidia-smi is only reported (describe_machine).
check_assumptions() {
    local c
    cuda=""
    for c in "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
        [ -n "$c" ] && [ -x "$c/bin/nvcc" ] && { cuda=$c; break; }
    done
    if [ -z "$cuda" ] && [ -f .device/prebuilt.tar.xz ]; then
        cuda=/usr/local/cuda
        say "no nvcc under CUDA_PATH or /usr/local/cuda*: only the prebuilt programs can run"
        return 0
    fi
    [ -n "$cuda" ] || { say "no CUDA Toolkit: no nvcc under CUDA_PATH or /usr/local/cuda*; set CUDA_PATH"; return 2; }
    say "CUDA: $cuda ($("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
    if command -v dpkg >/dev/null 2>&1; then
        say "unpacking with dpkg"
    elif command -v ar >/dev/null 2>&1 && command -v xz >/dev/null 2>&1; then
        say "unpacking with ar + xz (no dpkg)"
    else
        say "neither dpkg nor ar + xz: cannot unpack the bundle"
        return 2
    fi
    command -v python3 >/dev/null 2>&1 || { say "no python3: Debian's meson needs one"; return 2; }
    # nvcc refuses host compilers newer than it knows; try one tiny file.
    local probe
    probe=$(mktemp -d)
    echo '__global__ void k() {} int main() { k<<<1, 1>>>(); }' >"$probe/p.cu"
    if ! "$cuda/bin/nvcc" -c "$probe/p.cu" -o "$probe/p.o" >"$probe/log" 2>&1; then
        say "nvcc cannot compile with this host compiler ($(c++ --version 2>&1 | head -n1)): $(head -n3 "$probe/log")"
        rm -rf "$probe"
        [ -f .device/prebuilt.tar.xz ] && { say "only the prebuilt programs can run"; return 0; }
        return 2
    fi
    say "host compiler nvcc accepts: $(c++ --version 2>&1 | head -n1)"
    rm -rf "$probe"
}

# The machine as found: the tools the build needs and where they come from.
describe_machine() {
    say "host $(uname -n): $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1)), $(uname -r); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    say "meson $(meson --version 2>&1 | head -n1) ($(command -v meson)); ninja $(ninja --version 2>&1) ($(command -v ninja))"
    say "python3: $(python3 --version 2>&1) ($(command -v python3))"
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

# Each "BINARY: libX.so => not found" of the programs in $build.
missing_libraries() {
    local bin
    for bin in $(find "$build" -type f -perm -u+x); do
        ldd "$bin" 2>&1 | grep 'not found' | sed "s|^|$bin: |"
    done
}

# 1b. The prebuilt programs into $build, if they were carried. Their rpath
# names the prefix they expect, which must be this machine's. Returns 1 (build
# here instead) when there is no archive or a library is not found.
use_prebuilt() {
    local archive=.device/prebuilt.tar.xz env_file="$build/prebuilt.env" missing
    [ -f "$archive" ] || return 1
    rm -rf "$build"
    mkdir -p "$build"
    if ! tar -xJf "$archive" 2>>"$log" &&
        ! python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(".")' "$archive" 2>>"$log"; then
        say "cannot unpack $archive: building here instead"
        return 1
    fi
    mkdir -p "$results"
    # shellcheck disable=SC1090  # written by prepare_device_bundle.sh: PREFIX, COMMIT
    . "$env_file" || { say "$env_file is missing: building here instead"; return 1; }
    [ "$PREFIX" = "$prefix" ] || { say "the prebuilt programs look for libraries in $PREFIX, not $prefix: building here instead"; return 1; }
    missing=$(missing_libraries)
    if [ -n "$missing" ] && [ -z "${LD_LIBRARY_PATH:-}" ]; then
        # Built where CUDA lives in /usr/local/cuda: elsewhere, its libraries
        # (or a Python wheel's copy of them) on LD_LIBRARY_PATH; CUDA's only.
        local dirs
        dirs=$(find "$cuda" /usr/local /opt -maxdepth 7 \( -name 'libcublas.so.*' -o -name 'libcudart.so.*' \) \
            -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
        if [ -n "$dirs" ]; then
            export LD_LIBRARY_PATH=$dirs
            say "libraries missing with the built-in rpath; trying LD_LIBRARY_PATH=$dirs"
            missing=$(missing_libraries)
        fi
    fi
    if [ -n "$missing" ]; then
        say "prebuilt programs miss libraries: building here instead"$'\n'"$missing"
        return 1
    fi
    say "prebuilt programs of commit $COMMIT (sm_90) unpacked into $build; every library found ($(elapsed) s)"
    say "$(ldd "$build/src/pdlab/pdlab" | grep -E 'dnnl|cublas|cudart|stdc|gomp' | tr -s ' \t' ' ' | paste -sd';' -)"
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
    local prebuilt=0
    drop_foreign_build
    check_assumptions || { collect; return 2; }
    unpack_bundle || { collect; return 2; }
    if use_prebuilt; then
        prebuilt=1
    elif [ -f .device/prebuilt.tar.xz ]; then
        rm -rf "$build"
        mkdir -p "$results"
    fi
    bundle_env
    describe_machine
    local left=$(( budget - $(elapsed) - 15 ))  # 15 s for collect()
    say "gpu/check.sh with $left s left of the $budget s budget"
    PROGRAMS_COMMIT=$( ((prebuilt)) && echo "$COMMIT (prebuilt)") PREBUILT=$prebuilt BUILD="$build" TARGETS="${targets[*]}" BUDGET_S="$left" RESULTS="$results" \
        timeout $(( left + 30 )) gpu/check.sh "$out/report.md" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    say "gpu/check.sh exited $rc after $(elapsed) s"
    collect
    return "$rc"
}

main
