#!/usr/bin/env bash
# The GPU track's one check, for a machine with an NVIDIA GPU (built for this
# machine's GPU, -Dgpu_archs=native; GPU_ARCHS overrides), headline numbers
# first, so that a run cut short still has them:
#
#   1. configure a build with -Dcuda=enabled and build it
#   2. the card: copy bandwidth, cuBLAS bf16 GEMM rate
#   3. pdlab bench --device cuda on synthetic:llama-1b in bf16 (prompt 2048,
#      64 decode steps), and the two targets, judged by gpu/dev/targets on it:
#        decode  ms/token <= 1.5 x (weight bytes / measured bandwidth)
#        prefill FLOP/s   >= 0.5 x measured cuBLAS bf16 GEMM rate
#   4. meson test --suite gpu (every kernel vs its CPU twin, GPU vs CPU model),
#      each test's timeout cut to a quarter
#   5. the dev harnesses (validated, then timed): the bf16 and int8 GEMVs of
#      decode's products at M = 1, decode and prefill attention; labs 14 and 13
#   6. the other benches: synthetic:bench-llama-125m (f32, bf16, int8) and the
#      1B decode with the bf16 KV cache (PDLAB_CUDA_KV=bf16), and with CUDA graphs off
#   7. pdlab compare (CPU vs GPU side by side); pdlab serve-sim on the paged engine,
#      and one trace without and with n-gram speculation (--speculative-k 4) on
#      tiny and on bench-llama-125m in bf16: steps, time, same ids
#   8. labs 02, 04 and 05 on both devices, side by side (what ./kit compare NN
#      prints), and lab 12's quantized products on the GPU
#   9. where the 1B prefill's and decode step's time goes: each kernel's time
#      under Nsight Compute, if ncu is there
# and prints one summary table and each step's time. The summary goes to the
# report file (default docs/gpu-results.md), headed by the date, the card, the
# driver and nvcc; every step's full output to REPORT's stem plus -full.md
# (docs/gpu-results-full.md, which git ignores: raw logs carry build paths).
# Both are rewritten after every step, so that they hold each result as soon
# as it exists.
# About 5-8 minutes on a 16-core machine, most of it the build.
#
#   gpu/check.sh [REPORT]
#   env: BUILD=build-gpu  JOBS=$(nproc)
#        GPU_ARCHS=...  -Dgpu_archs for a new build folder (default: native
#                       with a GPU, 90 without)
#        TARGETS="..."  ninja targets to build (default: all)
#        BUILD_LIMIT_S=900  the build step's limit (a GPU machine builds in
#                       about 2 minutes; a loaded 2-core one, uncached, in 30)
#        BUDGET_S=N     stop starting steps after N seconds: a step gets at most
#                       the time left, later steps are skipped and listed (0: none)
#        RESULTS=DIR    keep every log and JSON there (default: a temporary folder)
#        ONLY="..."     only these step groups (default: headline tests harness
#                       bench compare labs profile; the build always)
#        PREBUILT=1     BUILD already holds the programs (gpu/prepare_device_bundle.sh
#                       --prebuilt, unpacked by gpu/device_run.sh): no configure, no
#                       build, and the gpu tests run as programs, without meson;
#                       PROGRAMS_COMMIT names the commit they were built at
#
# A failing step is recorded and the script goes on with the next one; it
# exits 1 if any step failed or a target was missed, 0 otherwise. A step that
# skips (exit 77: no usable GPU) while nvidia-smi sees a GPU counts as failed:
# the card is there and this build cannot use it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

report=${1:-docs/gpu-results.md}
full_report="${report%.md}-full.md"
build=${BUILD:-build-gpu}
jobs=${JOBS:-$(nproc)}
budget=${BUDGET_S:-0}
targets=${TARGETS:-}
if [ -n "${RESULTS:-}" ]; then
    tmp=$RESULTS
    mkdir -p "$tmp"
    # A kept folder from an earlier run: its numbers must not pass for this run's.
    rm -f "$tmp"/*.log "$tmp"/*.json "$tmp"/*.md
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
fi
full="$tmp/full.md"
summary="$tmp/summary.md"
timings="$tmp/timings.md"
: >"$full"
printf '| step | exit | seconds |\n|---|---|---|\n' >"$timings"
failed=0
over_budget=0
started=$(date +%s)

# meson finds the CUDA compiler through PATH, and the toolkit's usual home is
# often not on it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi

# The card, the driver (and the newest CUDA it runs) and the toolkit: a driver
# older than nvcc's runtime is the usual reason a visible GPU cannot be used.
card=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
driver_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n1)
toolkit=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')
gpu_visible=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && gpu_visible=1
[ -n "$card" ] || card="none: nvidia-smi found no GPU"
versions="nvcc ${toolkit:-not found}; driver ${driver:-none} (runs CUDA up to ${driver_cuda:-?})"
echo "card: $card" >&2
echo "$versions" >&2
if [ "$gpu_visible" -eq 0 ]; then
    echo "NO GPU FOUND (nvidia-smi sees none): the build and host tests run; every GPU step skips (exit 77)" >&2
fi

# A message nobody can miss, on the terminal and in the summary.
loud() {
    printf '\n!!!!! %s\n\n' "$*" >&2
    echo "- **$***" >>"$tmp/alerts.md"
}

# Seconds this run may still spend (a large number without a budget).
time_left() {
    [ "$budget" -gt 0 ] || { echo 1000000; return; }
    echo $(( budget - ($(date +%s) - started) ))
}

# Runs a step: its output is shown, kept in $tmp/LOG and appended with the
# command line to the full log; its time goes to the timings table. A non-zero
# exit counts as a failure, except 77 (skip) where no GPU is visible. Within
# a budget, the step gets at most the time left; none left: skipped.
# Usage: step TITLE TIMEOUT_S LOG CMD...
step() {
    local title=$1 limit=$2 out="$tmp/$3" rc t0 left
    shift 3
    left=$(time_left)
    if [ "$left" -le 5 ]; then
        echo "== $title: skipped, the ${budget} s budget is spent" >&2
        echo "| $title | skipped: budget spent | |" >>"$timings"
        over_budget=$((over_budget + 1))
        write_report
        return 1
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $title" >&2
    t0=$(date +%s)
    timeout "$limit" "$@" 2>&1 | tee "$out" >&2
    rc=${PIPESTATUS[0]}
    {
        echo
        echo "### $title"
        echo
        echo '```'
        echo "\$ $*"
        # A long log (a profiler's CSV) in part: all of it is in the results folder.
        if [ "$(wc -l <"$out")" -gt 200 ]; then
            head -n 60 "$out"
            echo "... ($(wc -l <"$out") lines; all of them in $(basename "$out") of the results)"
            tail -n 60 "$out"
        else
            cat "$out"
        fi
        echo "(exit $rc, $(( $(date +%s) - t0 )) s)"
        echo '```'
    } >>"$full"
    echo "| $title | $rc | $(( $(date +%s) - t0 )) |" >>"$timings"
    write_report
    if [ "$rc" -eq 77 ] && [ "$gpu_visible" -eq 1 ]; then
        loud "$title SKIPPED although nvidia-smi sees a GPU: this build cannot use the card (see its log)"
        failed=$((failed + 1))
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
        failed=$((failed + 1))
        echo "   step failed with exit $rc" >&2
    fi
    return "$rc"
}

# The value of "key": number in a JSON file written by nlohmann (one key per line).
json_num() { sed -n "s/^ *\"$2\": \(-\{0,1\}[0-9.eE+-]*\),\{0,1\}$/\1/p" "$1" 2>/dev/null | head -n1; }
# The value of "RESULT key=value" in a log.
result() { sed -n "s/^RESULT $2=\(.*\)$/\1/p" "$1" 2>/dev/null | head -n1; }

# The summary and the report from what exists so far (after every step).
v() { local x; x=$(json_num "$1" "$2"); printf '%s' "${x:-n/a}"; }
r() { local x; x=$(result "$1" "$2"); printf '%s' "${x:-n/a}"; }
# The summary's row for speculation_steps NAME (its label: model and precision).
spec_row() {
    local log="$tmp/spec_$1.log"
    echo "| serve-sim $2 on cuda, 4 requests x 200 tokens, 2 at a time: speculation off / k = 4: steps; seconds; requests with the same ids | $(r "$log" steps); $(r "$log" duration_s); $(r "$log" same_requests) | | |"
}
fmt3() { [ -n "$1" ] && [ "$1" != n/a ] && printf '%.3f' "$1" || printf 'n/a'; }
fmt1() { [ -n "$1" ] && [ "$1" != n/a ] && printf '%.1f' "$1" || printf 'n/a'; }
verdict() { [ "$1" = true ] && echo MET || { [ "$1" = false ] && echo MISSED || echo n/a; }; }
met() { sed -n "s/^ *\"$1\": \(true\|false\),\{0,1\}$/\1/p" "$tmp/roof.json" 2>/dev/null | head -n1; }
write_report() {
local n p f  # not the caller's: lab_both's n is live while its steps write the report
{
    echo "| measurement | value | target | verdict |"
    echo "|---|---|---|---|"
    echo "| gpu test suite | ${tests_line:-n/a} | all Ok | |"
    echo "| copy bandwidth (device to device, read + write) | $(fmt1 "$bw") GB/s | | |"
    echo "| cuBLAS bf16 GEMM, Llama-1B shapes at M = 2048 | $(fmt1 "$gemm") TFLOP/s (square 8192: $(fmt1 "$gemm_sq")) | | |"
    echo "| llama-1b bf16 decode, ms/token (batch 1, after 2048) | $(fmt3 "$(v "$tmp/b1b.json" decode_ms_per_token_median)") | <= 1.5 x floor $(fmt3 "$(v "$tmp/roof.json" decode_floor_ms)") ms | ratio $(fmt3 "$(v "$tmp/roof.json" decode_ratio)"): $(verdict "$(met decode_met)") |"
    echo "| llama-1b bf16 decode with a bf16 KV cache (PDLAB_CUDA_KV=bf16), ms/token (after 2048) | $(fmt3 "$(v "$tmp/b1b_kv16.json" decode_ms_per_token_median)") | | |"
    echo "| llama-1b bf16 decode with CUDA graphs off (PDLAB_CUDA_GRAPHS=0), ms/token (after 2048) | $(fmt3 "$(v "$tmp/b1b_nograph.json" decode_ms_per_token_median)") | | |"
    echo "| llama-1b bf16 prefill of 2048 tokens, ms | $(fmt3 "$(v "$tmp/b1b.json" prefill_ms_median)") ($(fmt1 "$(v "$tmp/roof.json" prefill_tflops)") TFLOP/s) | >= 0.5 x GEMM rate | ratio $(fmt3 "$(v "$tmp/roof.json" prefill_ratio)"): $(verdict "$(met prefill_met)") |"
    echo "| bf16 GEMV, 1B decode step's products (M = 1): warp per row v3 / cuBLAS, ms (x floor) | $(fmt3 "$(result "$tmp/gemv.log" gemv_v3_ms)") ($(fmt3 "$(result "$tmp/gemv.log" gemv_v3_floor_ratio)")) / $(fmt3 "$(result "$tmp/gemv.log" gemv_v4_ms)") ($(fmt3 "$(result "$tmp/gemv.log" gemv_v4_floor_ratio)")) | | |"
    echo "| decode attention, 1B shapes after 2048, 16 layers: engine kernel on an f32 / a bf16 cache, ms (x its floor) | $(fmt3 "$(result "$tmp/att_decode.log" attn_decode_v4_ms)") ($(fmt3 "$(result "$tmp/att_decode.log" attn_decode_v4_floor_ratio)")) / $(fmt3 "$(result "$tmp/att_decode.log" attn_decode_v6_ms)") ($(fmt3 "$(result "$tmp/att_decode.log" attn_decode_v6_floor_ratio)")) | | |"
    echo "| int8 GEMV (group 64), the same products: warp per row v2, ms (x its floor) | $(fmt3 "$(result "$tmp/gemv_int8.log" gemv_int8_v2_ms)") ($(fmt3 "$(result "$tmp/gemv_int8.log" gemv_int8_v2_floor_ratio)")) | | |"
    for p in f32 bf16 int8; do
        f="$tmp/b125_$p.json"
        echo "| bench-llama-125m $p: prefill 960 ms / decode ms per token | $(fmt3 "$(v "$f" prefill_ms_median)") / $(fmt3 "$(v "$f" decode_ms_per_token_median)") | | |"
    done
    echo "| compare bench-llama-125m bf16 (P 512): GPU speed-up prefill / decode | $(fmt1 "$(v "$tmp/compare.json" gpu_speedup_prefill)")x / $(fmt1 "$(v "$tmp/compare.json" gpu_speedup_decode)")x | | |"
    spec_row tiny "tiny f32"
    spec_row 125m "bench-llama-125m bf16"
    echo
    for n in 02 04 05; do
        [ -s "$tmp/lab${n}_compare.log" ] || continue
        printf '```\n%s\n```\n\n' "$(cat "$tmp/lab${n}_compare.log")"
    done
    [ -s "$tmp/lab12_cuda.log" ] && printf '```\n%s\n```\n\n' "$(tail -n 30 "$tmp/lab12_cuda.log")"
    [ -s "$tmp/lab13_cuda.log" ] && printf '```\n%s\n```\n\n' "$(tail -n 20 "$tmp/lab13_cuda.log")"
    [ -s "$tmp/profile_prefill.log" ] && printf 'Prefill of 2048 tokens (and the upload):\n```\n%s\n```\n\n' \
        "$(head -n 25 "$tmp/profile_prefill.log")"
    [ -s "$tmp/profile.log" ] && printf 'Decode steps after 2048:\n```\n%s\n```\n\n' "$(cat "$tmp/profile.log")"
    [ -s "$tmp/lab14_cuda.log" ] && printf '```\n%s\n```\n\n' "$(grep -v '^prefill_gpu: \|^decode_gpu: ' "$tmp/lab14_cuda.log")"
    [ -f "$tmp/alerts.md" ] && cat "$tmp/alerts.md" && echo
    echo "Steps failed: $failed. Steps skipped for the ${budget} s budget: $over_budget. Total time: $(( $(date +%s) - started )) s."
    echo
    cat "$timings"
} >"$summary"
{
    echo "# GPU results, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Card: $card"
    echo "Toolkit and driver: $versions"
    echo "Host: $(uname -n), $(nproc) cores; commit ${PROGRAMS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')}"
    echo "Written by gpu/check.sh (see docs/gpu.md)."
    echo
    echo "## Summary"
    echo
    cat "$summary"
    echo
    echo "Every step's full output: $(basename "$full_report"), beside this file."
} >"$report"
{
    echo "# GPU results, full output of every step"
    cat "$full"
} >"$full_report"
}
mkdir -p "$(dirname "$report")"

# The steps' results, global: the summary reads them after every step.
bw="" gemm="" gemm_sq="" roof_ok=1 tests_line=""

# 1. Build, for this machine's GPU only unless told otherwise: the default
# list of four architectures would quadruple the nvcc time.
archs=${GPU_ARCHS:-}
[ -n "$archs" ] || { [ "$gpu_visible" -eq 1 ] && archs=native || archs=90; }
if [ "${PREBUILT:-0}" = 1 ]; then
    echo "== configure and build: none, $build holds prebuilt programs" >&2
    echo "| build | prebuilt | 0 |" >>"$timings"
elif [ -f "$build/build.ninja" ]; then
    step "configure (existing $build)" 120 configure.log meson configure "$build" -Dcuda=enabled -Dtests=true \
        -Dgpu_archs="$archs"
else
    step "configure" 300 configure.log meson setup "$build" -Dcuda=enabled -Dtests=true --buildtype=release \
        -Dgpu_archs="$archs"
fi
# shellcheck disable=SC2086  # TARGETS is a list of ninja targets
if [ "${PREBUILT:-0}" != 1 ] && ! step "build" "${BUILD_LIMIT_S:-900}" build.log ninja -C "$build" -j"$jobs" $targets; then
    echo "the build failed: see $full_report" >&2
fi
pdlab="$build/src/pdlab/pdlab"
dev="$build/gpu/dev"

# 2. The card, and 3. the 1B bench and the targets: the headline numbers.
headline_steps() {
    step "copy bandwidth" 120 bw.log "$dev/bandwidth" --gib 2
    bw=$(result "$tmp/bw.log" copy_gbs)
    step "cuBLAS bf16 GEMM" 180 gemm.log "$dev/gemm" --m 2048
    gemm=$(result "$tmp/gemm.log" gemm_tflops)
    gemm_sq=$(result "$tmp/gemm.log" gemm_square_tflops)
    step "bench llama-1b bf16" 240 b1b.log "$pdlab" bench --device cuda -m synthetic:llama-1b \
        --precision bf16 -P 2048 -n 64 --json "$tmp/b1b.json"
    if [ -n "$bw" ] && [ -n "$gemm" ] && [ -f "$tmp/b1b.json" ]; then
        step "targets (gpu/dev/targets)" 60 roof.log "$build/gpu/dev/targets" --model synthetic:llama-1b \
            --precision bf16 --bench "$tmp/b1b.json" --bandwidth-gbs "$bw" --gemm-tflops "$gemm" \
            --json "$tmp/roof.json" --strict
        roof_ok=$?
    else
        echo "targets not judged: a measurement is missing" >&2
        failed=$((failed + 1))
    fi
}

# 4. Tests, each with a quarter of its timeout (900 s and 600 s in
# tests/gpu/meson.build, sized for slow cards): a hang must not eat the run.
test_steps() {
    if [ "${PREBUILT:-0}" = 1 ]; then
        prebuilt_test_steps
    else
        # With TARGETS, only those were built: meson test must not build the rest.
        step "meson test --suite gpu" 600 tests.log meson test -C "$build" --suite gpu --print-errorlogs \
            --num-processes 1 --timeout-multiplier 0.25 ${targets:+--no-rebuild}
    fi
    tests_line=$(grep -E "^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):" "$tmp/tests.log" | tr -s ' ' | paste -sd' ' -)
    local skipped
    skipped=$(sed -n 's/^Skipped: *\([0-9][0-9]*\).*/\1/p' "$tmp/tests.log" 2>/dev/null | head -n1)
    if [ "$gpu_visible" -eq 1 ] && [ "${skipped:-0}" -gt 0 ]; then
        loud "nvidia-smi sees a GPU, but $skipped GPU test(s) SKIPPED: this build cannot use the card (driver older than the CUDA runtime, or no kernel image for its architecture: see the test log)"
        failed=$((failed + 1))
    fi
    write_report
}

# 4, without meson (PREBUILT): tests/gpu/meson.build's gpu tests run as
# programs, with the same arguments and short timeouts, and
# tests.log gets meson's count lines, which the summary reads.
prebuilt_test_steps() {
    local t="$build/tests/gpu" ok=0 fail=0 skip=0 timeout_n=0 rc
    prebuilt_test() {  # prebuilt_test NAME TIMEOUT_S PROGRAM ARGS...
        local name=$1 limit=$2
        shift 2
        step "test $name" "$limit" "test_$name.log" "$@"
        rc=$?
        case $rc in
            0) ok=$((ok + 1)) ;;
            77) skip=$((skip + 1)) ;;
            124|137) timeout_n=$((timeout_n + 1)) ;;
            *) fail=$((fail + 1)) ;;
        esac
    }
    prebuilt_test gpu.host 30 "$t/gpu_host_tests" --no-intro
    prebuilt_test gpu.kernels 150 "$t/gpu_tests" '--test-case=gpu.kernels.*' --no-intro
    prebuilt_test gpu.model 180 "$t/gpu_tests" '--test-case=gpu.model.*' --no-intro
    prebuilt_test gpu.pair 120 "$t/gpu_pair_tests" --no-intro
    printf 'Ok: %d\nFail: %d\nSkipped: %d\nTimeout: %d\n' "$ok" "$fail" "$skip" "$timeout_n" >"$tmp/tests.log"
}

# 5. The dev harnesses and the GPU labs.
harness_steps() {
    step "gemv_bf16 (1B decode step's products, M = 1)" 120 gemv.log "$dev/gemv_bf16" ${bw:+--bandwidth-gbs "$bw"}
    step "gemv_int8 (1B decode step's products, M = 1, group 64)" 120 gemv_int8.log "$dev/gemv_int8" \
        ${bw:+--bandwidth-gbs "$bw"}
    step "attention_decode (1B shapes, 2048 cached, 16 layers)" 120 att_decode.log "$dev/attention_decode" \
        --heads 32 --kv-heads 8 --len 2048 --layers 16 --repeats 5 ${bw:+--bandwidth-gbs "$bw"}
    step "attention_prefill (16 heads, 2048 tokens)" 180 att_prefill.log "$dev/attention_prefill" \
        --heads 16 --kv-heads 4 --len 2048 --tf32
    # Lab 14's GPU pair (naive scores in memory, flash on tensor cores), 256 .. 8192 tokens.
    step "lab 14 on cuda" 180 lab14_cuda.log "$build/labs/track3/14-attention-kernels/14-attention-kernels" \
        --device cuda --sweeps prefill,decode --no-plot --out "$tmp/lab14" --json "$tmp/lab14_cuda.json"
    # Lab 13 with tiny on the GPU, where a step is launch-bound and k + 1 verify rows
    # should cost about one: the 1.5x speculation target of issue #17 (on the CPU the
    # tiny model sits in L3 and each extra row costs its arithmetic).
    step "lab 13 on cuda" 180 lab13_cuda.log "$build/labs/track3/13-speculative-decoding/13-speculative-decoding" \
        --device cuda --no-plot --out "$tmp/lab13" --json "$tmp/lab13_cuda.json"
}

# 6. The other benches. bench-llama-125m's context is 1024 positions: prompt 960 + 64 steps.
bench_steps() {
    step "bench bench-llama-125m f32" 300 b125_f32.log "$pdlab" bench --device cuda -m synthetic:bench-llama-125m \
        --precision f32 -P 960 -n 64 --json "$tmp/b125_f32.json"
    step "bench bench-llama-125m bf16" 300 b125_bf16.log "$pdlab" bench --device cuda -m synthetic:bench-llama-125m \
        --precision bf16 -P 960 -n 64 --json "$tmp/b125_bf16.json"
    step "bench bench-llama-125m int8" 300 b125_int8.log "$pdlab" bench --device cuda -m synthetic:bench-llama-125m \
        --precision int8 -P 960 -n 64 --json "$tmp/b125_int8.json"
    # The 1B decode reading a bf16 KV cache (half the cache's bytes), once, short.
    step "bench llama-1b bf16, bf16 KV cache" 300 b1b_kv16.log env PDLAB_CUDA_KV=bf16 "$pdlab" bench --device cuda \
        -m synthetic:llama-1b --precision bf16 -P 2048 -n 32 --warmup 1 --repeats 1 --json "$tmp/b1b_kv16.json"
    # And with every kernel launched (no CUDA graph): what the graph saves per step.
    step "bench llama-1b bf16, CUDA graphs off" 300 b1b_nograph.log env PDLAB_CUDA_GRAPHS=0 "$pdlab" bench \
        --device cuda -m synthetic:llama-1b --precision bf16 -P 2048 -n 32 --warmup 1 --repeats 1 \
        --json "$tmp/b1b_nograph.json"
}

# 9. Where the 1B model's time goes, kernel by kernel, timed by Nsight Compute
# (clocks as found, caches not flushed, so a kernel sees what the one before
# left in L2 as in a real run; kernels serialized): the prefill of 2048 tokens
# (every launch of a run of one prefill and one decode step: the upload's
# conversions show under their own names), and a window of about four decode
# steps after the upload and the prefill (under 1500 launches). Beside the
# bench's times, the rest is time between kernels. embed_kernel runs once a
# decode step: its launches count the window's steps.
profile_steps() {
    local ncu
    ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
    [ -n "$ncu" ] || { echo "== profiles: skipped, no ncu on this machine" >&2; return 0; }
    local run=("$ncu" --csv --clock-control none --cache-control none --metrics gpu__time_duration.sum)
    local bench=("$pdlab" bench --device cuda -m synthetic:llama-1b --precision bf16 -P 2048 --warmup 0 --repeats 1)
    step "prefill profile (ncu, llama-1b bf16, 2048 tokens)" 180 ncu_prefill.log "${run[@]}" "${bench[@]}" -n 1 &&
        step "prefill profile, per kernel" 30 profile_prefill.log python3 gpu/dev/profile_summary.py \
            "$tmp/ncu_prefill.log"
    step "decode profile (ncu, llama-1b bf16)" 180 ncu.log "${run[@]}" --launch-skip 1500 --launch-count 600 \
        "${bench[@]}" -n 24 &&
        step "decode profile, per kernel" 30 profile.log python3 gpu/dev/profile_summary.py "$tmp/ncu.log" \
            --step-kernel embed_kernel
}

# 7b. Track 2's n-gram speculation on the GPU: one trace (4 requests of 200
# tokens, 2 at a time, EOS ignored) served without and then with up to 4
# proposed tokens a decode row, and the two side by side
# (gpu/dev/speculation_pair.py: steps, time, whether the ids stayed the same).
# tiny retells its story, so many proposals are kept, and a step is
# launch-bound; bench-llama-125m in bf16 is where a step's weights dominate.
speculation_steps() {  # speculation_steps NAME MODEL PRECISION
    local n=$1 what="$2 $3" run=("$pdlab" serve-sim --device cuda --model "$2" --precision "$3" --engine paged
        --quiet --seed 7 --rate inf --num-requests 4 --max-seqs 2 --prompt-len fixed:8 --output-len fixed:200
        --ignore-eos)
    step "serve-sim $what on cuda, speculation off" 120 "spec_${n}_off.log" "${run[@]}" \
        --json "$tmp/spec_${n}_off.json" &&
        step "serve-sim $what on cuda, --speculative-k 4" 120 "spec_${n}_on.log" "${run[@]}" \
            --speculative-k 4 --ngram-min 1 --json "$tmp/spec_${n}_on.json" &&
        step "serve-sim $what on cuda, speculation side by side" 30 "spec_${n}.log" python3 \
            gpu/dev/speculation_pair.py "$tmp/spec_${n}_off.json" "$tmp/spec_${n}_on.json"
}

# 8. A lab on both devices (./kit compare's recipe, without its setup).
# Usage: lab_both NN-name ARGS...: the lab program with --device cuda, then
# --device cpu (same ARGS), then tools/lab_compare.py side by side.
lab_both() {
    local lab=$1 n=${1%%-*}
    shift
    local prog="$build/labs/track1/$lab/$lab"
    step "lab $n on cuda" 240 "lab${n}_cuda.log" "$prog" "$@" --device cuda --json "$tmp/lab${n}_cuda.json" &&
        step "lab $n on cpu" 240 "lab${n}_cpu.log" "$prog" "$@" --device cpu --json "$tmp/lab${n}_cpu.json" &&
        step "lab $n side by side" 30 "lab${n}_compare.log" python3 tools/lab_compare.py "$n" \
            "$tmp/lab${n}_cpu.json" "$tmp/lab${n}_cuda.json"
}

# ONLY: a subset of the step groups, for a short run (default: all).
only=" ${ONLY:-headline tests harness bench compare labs profile} "
want() { [[ $only == *" $1 "* ]]; }
[ "$gpu_visible" -eq 1 ] && want headline && headline_steps
want tests && test_steps
if [ "$gpu_visible" -eq 1 ]; then
    want harness && harness_steps
    want bench && bench_steps
    # 7. CPU vs GPU.
    want compare && step "compare bench-llama-125m bf16" 600 compare.log "$pdlab" compare \
        -m synthetic:bench-llama-125m --precision bf16 -P 512 -n 32 --warmup 1 --repeats 3 --json "$tmp/compare.json"
    # Track 2 on the GPU: the paged engine (block tables, prefix cache, mixed steps) on a trace.
    want compare && step "serve-sim paged on cuda" 180 serve_sim.log "$pdlab" serve-sim --device cuda --engine paged \
        --model synthetic:bench-llama-125m --quiet --seed 7 --rate 8 --num-requests 32 --shared-prefix-fraction 0.5 \
        --prefix-len 256 --prompt-len fixed:64 --output-len fixed:32 --ignore-eos --max-seqs 16
    if want compare; then
        speculation_steps tiny tiny f32
        speculation_steps 125m synthetic:bench-llama-125m bf16
    fi
    if want labs; then
        lab_both 02-prefill-and-decode --model synthetic:bench-llama-125m -P 256 -n 32
        lab_both 04-ttft-and-tpot --requests 16 --threads 1
        lab_both 05-length-and-batch --sweeps prefill,batch --threads 1 --no-plot --out "$tmp/lab05"
        # Lab 12's section 2 (the quantized rows' products) on the GPU: int8's GEMV; int4 is CPU-only.
        step "lab 12 on cuda" 180 lab12_cuda.log "$build/labs/track3/12-quantization/12-quantization" \
            --device cuda --model synthetic:bench-llama-125m --json "$tmp/lab12_cuda.json"
    fi
    want profile && profile_steps
else
    loud "NO GPU FOUND: the card, the benches, the targets, the harnesses, compare and labs 02 and 05 need one and did not run"
fi

write_report
echo
cat "$summary"
echo "report: $report (full output: $full_report)"
[ "$failed" -eq 0 ] && [ "$roof_ok" -eq 0 ]
