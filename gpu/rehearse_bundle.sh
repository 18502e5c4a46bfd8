#!/usr/bin/env bash
# A rehearsal of the lent GPU machine's run, in a clean chroot: proves that
# the bundle gpu/prepare_device_bundle.sh makes is all gpu/device_run.sh needs
# on a machine with CUDA, a compiler and python3 but none of the kit's
# packages, no package registry and no network (see docs/gpu.md, "A run on a
# lent GPU machine"). Needs root (chroot, mounts) and about 3 GiB of disk.
#
#   gpu/rehearse_bundle.sh [--base TARBALL] [--dir DIR] [--keep]
#
# Stages, each timed:
#   system   a Debian minbase tarball (default: tools/chroot/test's trixie one)
#            unpacked afresh into DIR, plus only what the GPU machine's image
#            has beside CUDA: g++ and python3 (apt-get, with the network)
#   tree     what the device tool sends: the tracked and untracked-not-ignored
#            files (no .git), .device/debs, .device/COMMIT and, where
#            prepare_device_bundle.sh --prebuilt made it, .device/prebuilt.tar.xz,
#            into /kit
#   run      gpu/device_run.sh in /kit, chrooted, with no network (a network
#            namespace of its own), a minimal environment, no ccache, and this
#            machine's CUDA Toolkit bind-mounted read-only at /usr/local/cuda,
#            where the GPU machine has it. With no GPU it builds for sm_90 only
#            (check.sh's choice) and the GPU steps skip (exit 77)
#   verdict  passes when the configure, the build and `meson test --suite gpu`
#            (host tests run, GPU tests skip) succeeded; with prebuilt
#            programs, when they were used (every library found) and the host
#            tests passed
#
# The report, log and results archive land in .device/rehearsal/. Exit status:
# 0 passed, 1 a step failed (the verdict names it), 2 the rehearsal itself
# could not run. env: BUDGET_S=3600 (device_run.sh's, and check.sh's limit
# for the build: this machine builds uncached, and a loaded 2-core one takes
# half an hour), JOBS=$(nproc), CUDA_PATH (default: the nvcc on PATH).
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$PWD

base=""
dir=/var/tmp/pdlab-rehearse
keep=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
while (($#)); do
    case "$1" in
        --base) base=${2:?}; shift 2 ;;
        --dir) dir=${2:?}; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) usage ;;
        *) echo "gpu/rehearse_bundle.sh: unknown argument $1" >&2; usage ;;
    esac
done
fail() { echo "gpu/rehearse_bundle.sh: $*" >&2; exit 2; }

# tools/chroot/test keeps its minbase tarball in /var/cache/pdlab-ci, else in DIR/cache.
if [[ -z "$base" ]]; then
    for b in /var/cache/pdlab-ci/trixie-minbase.tar /var/tmp/pdlab-chroot/cache/trixie-minbase.tar; do
        [[ -f "$b" ]] && { base=$b; break; }
    done
fi
[[ $(id -u) -eq 0 ]] || fail "needs root (chroot, mounts, a network namespace)"
[[ -f "$base" ]] || fail "no minbase tarball: pass --base FILE, or make one with" \
    "debootstrap --variant=minbase trixie DIR && tar -C DIR -cf trixie-minbase.tar ."
ls .device/debs/*.deb >/dev/null 2>&1 || fail "no bundle in .device/debs: run gpu/prepare_device_bundle.sh first"
cuda=${CUDA_PATH:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")}
[[ -x "$cuda/bin/nvcc" ]] || fail "no CUDA Toolkit: no nvcc on PATH or under /usr/local/cuda; set CUDA_PATH"

start=$SECONDS
stage_start=$SECONDS
stage() {  # stage NAME: closes the previous stage's clock, opens NAME's
    ((SECONDS > start)) && echo "-- time: $((SECONDS - stage_start)) s"
    stage_start=$SECONDS
    echo "-- $1"
}
target="$dir/root"
debs_cache="$(dirname "$base")/debs-$(basename "$base" -minbase.tar)"

# chroot_sh NET SHELL-LINE: the line as root in the chroot, with /proc, /dev
# and /sys mounted in a private mount namespace (they vanish with it); NET
# "no" gives it a network namespace of its own (loopback only, and down).
chroot_sh() {
    local net=()
    [[ $1 == no ]] && net=(--net)
    unshare --mount --propagation private "${net[@]}" bash -c '
        set -e
        t=$1 cuda=$2 debs=$3; shift 3
        mount -t proc proc "$t/proc"; mount --rbind /dev "$t/dev"; mount -t sysfs sys "$t/sys"
        mkdir -p "$t/usr/local/cuda" "$debs/partial"
        mount --bind -o ro "$cuda" "$t/usr/local/cuda"
        mount --bind "$debs" "$t/var/cache/apt/archives"
        exec chroot "$t" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c "$*"' \
        _ "$target" "$cuda" "$debs_cache" "$2"
}

stage "system: $(basename "$base") into $target, with g++ and python3"
rm -rf "$target"
mkdir -p "$target"
tar -C "$target" -xf "$base"
cp /etc/resolv.conf "$target/etc/resolv.conf"
install="DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ python3"
chroot_sh yes "apt-get update -qq && $install >/dev/null" || fail "installing g++ and python3 in the chroot failed"
chroot_sh yes '. /etc/os-release; echo "$PRETTY_NAME: $(g++ --version | head -n1), $(python3 --version)"'

stage "tree: the working tree as the device tool sends it, and the bundle, into /kit"
mkdir -p "$target/kit"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [[ -e "$f" ]] && printf '%s\0' "$f"  # a deleted tracked file does not travel
done | tar --null -T - -cf - | tar -C "$target/kit" -xf -
prebuilt_archive=()
[[ -f .device/prebuilt.tar.xz ]] && prebuilt_archive=(.device/prebuilt.tar.xz)
tar -cf - .device/debs .device/COMMIT "${prebuilt_archive[@]}" | tar -C "$target/kit" -xf -
echo "$(du -sm "$target/kit" | cut -f1) MiB, $(ls .device/debs | wc -l) packages, bundle of $(cat .device/COMMIT)"

stage "run: gpu/device_run.sh, no network, CUDA $cuda at /usr/local/cuda"
rc=0
budget=${BUDGET_S:-3600}
chroot_sh no "cd /kit && OUT=.device/rehearsal BUDGET_S=$budget BUILD_LIMIT_S=$budget JOBS=${JOBS:-$(nproc)} \
    gpu/device_run.sh" || rc=$?
rm -rf "$root/.device/rehearsal"
cp -r "$target/kit/.device/rehearsal" "$root/.device/rehearsal"

stage "verdict (device_run.sh exited $rc; with no GPU its measurements are missing, so not 0)"
timings="$target/kit/.device/build/results/timings.md"
cat "$timings"
passed=1
# With prebuilt programs: they ran (host tests passed, GPU tests skipped)
# with nothing but the bundle's libraries, from a source root not their own.
required=("configure" "build" "meson test --suite gpu")
grep -q "^| build | prebuilt |" "$timings" && required=("test gpu.host")
for s in "${required[@]}"; do
    grep -q "^| $s | 0 |" "$timings" || { echo "FAILED: $s (see .device/rehearsal/device_run.log)"; passed=0; }
done
if ((${#prebuilt_archive[@]})) && [[ ${required[0]} != "test gpu.host" ]]; then
    echo "FAILED: the prebuilt programs were carried but not used (see .device/rehearsal/device_run.log)"
    passed=0
fi
grep -E "^(Ok|Fail|Skipped|Timeout):" "$target/kit/.device/build/results/tests.log" || true
((keep)) || rm -rf "$target"
verdict=FAILED
((passed)) && verdict=PASSED
stage "done: rehearsal $verdict, total $((SECONDS - start)) s; report in .device/rehearsal/"
((passed))
