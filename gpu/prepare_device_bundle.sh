#!/usr/bin/env bash
# Prepares, on a Debian 12 machine with a network, what gpu/device_run.sh needs
# on a GPU machine that has CUDA but none of the kit's Debian packages and no
# package registry (see docs/gpu.md, "A run on a lent GPU machine"):
#
#   .device/debs/*.deb   the packages below (apt-get download: nothing is installed)
#   .device/COMMIT       the commit they were prepared at
#   .device/prebuilt.tar.xz  with --prebuilt: gpu/device_targets built here for
#                        sm_90 (the lent H200), release, in .device/build, with
#                        an rpath into /tmp/pdlab-prefix where device_run.sh
#                        unpacks the bundle; stripped. A lent machine's minutes
#                        then go to measuring, not to a build of minutes
#
# .device/ is ignored by git; the device tool carries the paths above
# (carry [".device/debs", ".device/COMMIT", ".device/prebuilt.tar.xz"]), within
# its 64 MiB limit for the working tree and carried paths together.
#
#   gpu/prepare_device_bundle.sh [--prebuilt] [--dry-run]
#
# --dry-run then runs gpu/device_run.sh here as the GPU machine would, with
# only the bundle: inside bubblewrap, every file of the bundled packages that
# this machine has installed is hidden (an empty file in its place), PATH holds
# only /usr/bin, /bin and CUDA, and ccache is off, so the configure and build
# must find everything in the unpacked bundle and the build time is what an
# uncached build costs. Its report lands in .device/dry-run/. With no GPU
# here, the GPU steps skip (77) and the report says no GPU was found.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2

# The build's packages (meson, ninja, pkg-config; the -dev libraries with their
# runtime libraries) and what those need at run time beyond a CUDA image:
# libdnnl2 loads libOpenCL. libgomp1 and libpcre2-8-0 come along in case the
# machine lacks them; python3 (for meson and lab_compare.py) is assumed there.
# cpp-httplib (pdlab serve, built into pdlab) names openssl, zlib and brotli in
# its pkg-config file, so their -dev packages must be there for the configure
# to find it, and their libraries for the link.
packages=(
    meson ninja-build pkgconf pkgconf-bin libpkgconf3
    libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev doctest-dev
    libhwy-dev libhwy1 libdnnl-dev libdnnl2 ocl-icd-libopencl1
    libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libgomp1
    libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev zlib1g libbrotli-dev libbrotli1
)
# Left visible in the dry run: this machine's own tools (gcc, grep, python3,
# git) need them.
keep_visible=(libgomp1 libpcre2-8-0 libpkgconf3 libssl3 zlib1g libbrotli1)
carry_limit=$((64 << 20))

say() { echo "prepare_device_bundle: $*" >&2; }

download() {
    rm -rf .device/debs
    mkdir -p .device/debs
    (cd .device/debs && apt-get download "${packages[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed')
    echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')" >.device/COMMIT
}

# Bytes that would travel: the tracked and untracked-not-ignored files, plus .device/debs.
measure() {
    local tree debs
    tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -n1 | cut -f1)
    debs=$(du -cb .device/debs/*.deb .device/prebuilt.tar.xz 2>/dev/null | tail -n1 | cut -f1)
    say "bundle: $(ls .device/debs | wc -l) packages, $((debs >> 20)) MiB; working tree $((tree >> 20)) MiB;" \
        "together $(((tree + debs) >> 20)) MiB of the $((carry_limit >> 20)) MiB the device tool carries"
    if [ $((tree + debs)) -ge "$carry_limit" ]; then
        say "OVER the carry limit: the device tool would refuse this working tree"
        return 1
    fi
}

# bubblewrap arguments hiding every installed file of the bundled packages.
hide_installed() {
    local deb name path
    for deb in .device/debs/*.deb; do
        name=$(dpkg-deb -f "$deb" Package)
        [[ " ${keep_visible[*]} " == *" $name "* ]] && continue
        dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | while read -r path; do
            if [ -f "$path" ] && [ ! -L "$path" ]; then printf -- '--ro-bind\0/dev/null\0%s\0' "$path"; fi
        done
    done
}

# The programs gpu/check.sh runs, built here for the H200 and packed with what
# device_run.sh needs to place them: the prefix their rpath names. (They find
# the kit's data/ from where they lie: src/base/kit_root.hpp.)
prebuilt() {
    local build=.device/build prefix=/tmp/pdlab-prefix targets
    mapfile -t targets < <(grep -v '^#' gpu/device_targets)
    if [ ! -f "$build/build.ninja" ]; then
        LDFLAGS="-Xlinker --disable-new-dtags -Xlinker -rpath=$prefix/usr/lib/x86_64-linux-gnu" \
            meson setup "$build" -Dcuda=enabled -Dtests=true --buildtype=release -Dgpu_archs=90 >/dev/null
    fi
    say "building ${#targets[@]} programs for sm_90 in $build"
    # Meson 1.0 asks nvcc for no dependency file, so an edited .cuh alone
    # would rebuild nothing: the CUDA objects are compiled again every time
    # (ccache, which hashes every included file, keeps the unchanged ones cheap).
    find "$build" -name '*.cu.o' -delete
    ninja -C "$build" "${targets[@]}" >/dev/null
    printf 'PREFIX=%q\nCOMMIT=%q\n' "$prefix" "$(cat .device/COMMIT)" >"$build/prebuilt.env"
    local files=("$build/prebuilt.env") t
    for t in "${targets[@]}"; do
        strip -o "$build/$t.stripped" "$build/$t"
        files+=("$build/$t.stripped")
    done
    # Each program under its own name, stripped (the build keeps the unstripped one).
    tar -cJf .device/prebuilt.tar.xz --transform 's/\.stripped$//' "${files[@]}"
    find "$build" -name '*.stripped' -delete
    say "prebuilt: .device/prebuilt.tar.xz, $(( $(stat -c %s .device/prebuilt.tar.xz) >> 20 )) MiB"
}

dry_run() {
    command -v bwrap >/dev/null || { say "--dry-run needs bubblewrap (apt-get install bubblewrap)"; exit 2; }
    local hide=()
    mapfile -d '' hide < <(hide_installed)
    say "dry run: $(( ${#hide[@]} / 3 )) installed files of the bundled packages hidden"
    rm -rf .device/dry-run .device/dry-run-build
    bwrap --ro-bind / / --dev /dev --proc /proc --bind /tmp /tmp --bind "$PWD" "$PWD" "${hide[@]}" -- \
        env -i HOME="$HOME" TERM=dumb PATH=/usr/bin:/bin:/usr/local/cuda/bin CCACHE_DISABLE=1 \
        OUT=.device/dry-run BUILD=.device/dry-run-build BUDGET_S="${BUDGET_S:-3000}" JOBS="${JOBS:-2}" \
        gpu/device_run.sh || true
    say "dry run done: .device/dry-run/report.md, .device/dry-run/device_run.log"
}

with_prebuilt=0 with_dry_run=0
for a in "$@"; do
    case $a in
        --prebuilt) with_prebuilt=1 ;;
        --dry-run) with_dry_run=1 ;;
        *) say "unknown argument $a (use --prebuilt, --dry-run)"; exit 2 ;;
    esac
done
download
((with_prebuilt)) && prebuilt
measure
((with_dry_run)) && dry_run
exit 0
