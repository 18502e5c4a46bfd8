// gpu.host: the CPU-side parts of the GPU track, which run everywhere (with or
// without the CUDA backend, with or without a GPU): the arithmetic check.sh
// judges the two targets with, the query chunking of prefill attention, the
// flash kernel's shared memory, the decode kernel's head grouping, the
// staging of a step plan against the CPU's rows, the attention scratch and KV bytes the memory check
// counts, and the device seam's answer when no GPU can be used.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "common.hpp"
#include "io/config.hpp"
#include "engine/engine.hpp"
#include "load/model_source.hpp"
#include "dev/targets.hpp"

#ifdef PDLAB_HAVE_CUDA
#include "attention.cuh"
#include "attention_pair.cuh"
#include "cuda_engine.hpp"
#include "cuda_presence.hpp"
#include "matmul.cuh"
#include "model.cuh"
#include "plan_staging.hpp"
#endif

using namespace pd;

namespace {

Config preset(const std::string& spec) {
    unsigned long long seed = 0;
    return synthetic_config(spec, seed);
}

}  // namespace

TEST_CASE("gpu.host.targets.decode_floor") {
    const Config c = preset("llama-1b");
    // 16 layers x (2048 x 3072 + 2048 x 2048 + 2048 x 16384 + 8192 x 2048) + 128256 x 2048 (head).
    const double params = 16.0 * (2048.0 * 3072 + 2048.0 * 2048 + 2048.0 * 16384 + 8192.0 * 2048) + 128256.0 * 2048;
    auto v = targets::judge(c, Precision::bf16, 2048, 1, 1, 4000, 500);
    CHECK(v.weight_bytes == doctest::Approx(2 * params));
    CHECK(v.weight_bytes == doctest::Approx(2471493632.0));
    CHECK(targets::judge(c, Precision::f32, 2048, 1, 1, 4000, 500).weight_bytes == doctest::Approx(4 * params));
    // 2.4715 GB at 4000 GB/s: 0.6179 ms.
    CHECK(v.decode_floor_ms == doctest::Approx(0.617873).epsilon(1e-5));
    CHECK(targets::decode_floor_ms(2471493632.0, 4000) == doctest::Approx(0.617873).epsilon(1e-5));
    CHECK(targets::decode_floor_ms(1e9, 0) == 0);
}

TEST_CASE("gpu.host.targets.prefill_flops") {
    const Config c = preset("llama,dim=64,ffn=128,layers=2,heads=4,kv_heads=2,head_dim=16,vocab=100,ctx=64");
    // Per layer: qkv 64 x (64 + 2 x 32), out 64 x 64, mlp 3 x 64 x 128.
    const double layer = 64.0 * 128 + 64.0 * 64 + 3 * 64.0 * 128;
    const double head = 100.0 * 64;
    // P = 3: causal (query, key) pairs 1 + 2 + 3 = 6 per head and layer, 4 x head_dim FLOPs each.
    const double expect = 2 * 3 * (2 * layer) + 2 * head + 4.0 * 16 * 4 * 2 * 6;
    CHECK(targets::prefill_flops(c, Precision::bf16, 3) == doctest::Approx(expect));
    CHECK(targets::tflops(2e12, 1000) == doctest::Approx(2.0));
}

TEST_CASE("gpu.host.targets.judge") {
    const Config c = preset("llama-1b");
    const double floor = targets::decode_floor_ms(2471493632.0, 4000);
    const double flops = targets::prefill_flops(c, Precision::bf16, 2048);
    // Decode at 1.4x the floor and prefill at 0.6 of a 500 TFLOP/s GEMM: both met.
    auto v = targets::judge(c, Precision::bf16, 2048, flops / 300e12 * 1e3, 1.4 * floor, 4000, 500);
    CHECK(v.decode_ratio == doctest::Approx(1.4));
    CHECK(v.prefill_ratio == doctest::Approx(0.6));
    CHECK(v.decode_ok);
    CHECK(v.prefill_ok);
    // 1.6x and 0.4: both missed.
    v = targets::judge(c, Precision::bf16, 2048, flops / 200e12 * 1e3, 1.6 * floor, 4000, 500);
    CHECK_FALSE(v.decode_ok);
    CHECK_FALSE(v.prefill_ok);
    // No measurement: never "met".
    v = targets::judge(c, Precision::bf16, 2048, 0, 0, 0, 0);
    CHECK_FALSE(v.decode_ok);
    CHECK_FALSE(v.prefill_ok);
}

TEST_CASE("gpu.host.seam_without_gpu") {
    std::string why;
    if (cuda_available(&why)) {
#ifdef PDLAB_HAVE_CUDA
        MESSAGE("a GPU is present: " << cuda_device_summary());
        CHECK_FALSE(cuda_device_summary().empty());
#endif
        return;
    }
    CHECK_FALSE(why.empty());
    auto lm = load_model("synthetic:llama,dim=64,ffn=96,layers=1,heads=4,kv_heads=2,vocab=50,ctx=16",
                         Precision::f32, false);
    EngineOptions o;
    o.device = Device::cuda;
    try {
        make_engine(lm.model, o);
        FAIL("make_engine(cuda) must refuse without a GPU");
    } catch (const UserError& e) {
        const std::string msg = e.what();
        CHECK(msg.find("--device cuda is not available") != std::string::npos);
        CHECK(msg.find(why) != std::string::npos);
    }
    // The paged serving engine's device half says the same.
    const PagedKVCache off_host = make_paged_kv_cache(*lm.model, 4, 8, {}, /*on_host=*/false);
    CHECK(off_host.k.empty());
    CHECK_THROWS_WITH_AS(make_paged_forward(lm.model, off_host, Device::cuda),
                         doctest::Contains("--device cuda is not available"), UserError);
#ifdef PDLAB_HAVE_CUDA
    CHECK(cuda_device_summary().empty());
    CHECK_FALSE(cuda_device_present());
    // Without a driver (this kit's CI machine) the student reads that, by name.
    if (gpu::probe_cuda().driver_version == 0) CHECK(why.find("no NVIDIA driver found") != std::string::npos);
#endif
}

#ifdef PDLAB_HAVE_CUDA
// Every reason --device cuda can be refused, from the runtime's answers: the
// sentence names what is missing, with the versions or the card.
TEST_CASE("gpu.host.why_cuda_unusable") {
    const auto why = [](const gpu::CudaFacts& f) { return gpu::why_cuda_unusable(f, "80,86,89,90"); };
    gpu::CudaFacts ok;
    ok.runtime_version = 13000, ok.driver_version = 13000, ok.device_count = 1;
    ok.name = "NVIDIA H200", ok.major = 9, ok.minor = 0;
    CHECK(why(ok).empty());

    gpu::CudaFacts f = ok;
    f.driver_version = 0, f.count_error = cudaErrorInsufficientDriver, f.device_count = 0;
    CHECK(why(f).find("no NVIDIA driver found") != std::string::npos);
    CHECK(why(f).find("CUDA 13.0 runtime") != std::string::npos);

    f = ok;
    f.driver_version = 12040, f.count_error = cudaErrorInsufficientDriver, f.device_count = 0;
    CHECK(why(f).find("driver is too old") != std::string::npos);
    CHECK(why(f).find("CUDA up to 12.4") != std::string::npos);
    CHECK(why(f).find("built with CUDA 13.0") != std::string::npos);

    f = ok;
    f.count_error = cudaErrorNoDevice, f.device_count = 0;
    CHECK(why(f).find("no NVIDIA GPU found") != std::string::npos);
    f.count_error = cudaSuccess;
    CHECK(why(f).find("no NVIDIA GPU found") != std::string::npos);

    f = ok;
    f.name = "Tesla T4", f.major = 7, f.minor = 5;
    CHECK(why(f).find("GPU 0 (Tesla T4) has compute capability 7.5") != std::string::npos);
    CHECK(why(f).find("need 8.0 or newer") != std::string::npos);

    f = ok;
    f.name = "NVIDIA GeForce RTX 5090", f.major = 12, f.minor = 0, f.kernels_load = false;
    f.kernel_error = "no kernel image is available for execution on the device";
    CHECK(why(f).find("compute capability 12.0) cannot run this build's kernels") != std::string::npos);
    CHECK(why(f).find("-Dgpu_archs=80,86,89,90") != std::string::npos);
    CHECK(why(f).find("add 120") != std::string::npos);
}
#endif

#ifdef PDLAB_HAVE_CUDA
TEST_CASE("gpu.host.prefill_chunking") {
    // The default budget holds a 2048-token prompt of 32 heads in two chunks.
    CHECK(gpu::attention_prefill_chunk(2048, 0, 32, gpu::kPrefillScoreBudget) == 1024);
    CHECK(gpu::attention_prefill_chunk(17, 0, 8, gpu::kPrefillScoreBudget) == 17);
    CHECK(gpu::attention_prefill_chunk(300, 1000, 8, 5 * 8 * 1300) == 5);
    CHECK(gpu::attention_prefill_chunk(10, 0, 8, 1) == 1);  // never below one query
    // Scratch: 6 pointer arrays rounded to 256 bytes, then heads x chunk x keys floats.
    CHECK(gpu::attention_prefill_scratch(2048, 0, 32) == 384 + std::size_t(32) * 1024 * 2048);
    CHECK(gpu::attention_prefill_scratch(300, 1000, 8, 5 * 8 * 1300) == 128 + std::size_t(8) * 5 * 1300);
    // Decode: splits of 64 keys (64 of them for 4096); partial outputs plus (max, sum) per split.
    CHECK(gpu::attention_decode_scratch(2, 32, 4096, 64) == std::size_t(2) * 32 * 64 * 66);
    CHECK(gpu::attention_decode_scratch(1, 8, 1, 64) == std::size_t(8) * 1 * 66);
}

TEST_CASE("gpu.host.decode_heads_per_block") {
    // A block serves a whole GQA group of up to 8 query heads (reading each key once for all of them),
    // else the largest divisor of the group that is at most 8.
    CHECK(gpu::decode_heads_per_block(32, 8) == 4);   // llama-1b
    CHECK(gpu::decode_heads_per_block(8, 8) == 1);    // MHA
    CHECK(gpu::decode_heads_per_block(8, 1) == 8);    // MQA
    CHECK(gpu::decode_heads_per_block(9, 3) == 3);    // bench-llama-125m: GQA 3
    CHECK(gpu::decode_heads_per_block(32, 1) == 8);
    CHECK(gpu::decode_heads_per_block(12, 1) == 6);
    CHECK(gpu::decode_heads_per_block(11, 1) == 1);
}

// The GPU's staging of a step plan against the rows the CPU ran: each CPU
// pass leaves its plan in the run state; staged for the GPU, the same plan
// must give the device the same rows in the same order, the same kept run
// (the rows whose logits come back), the prefill's slot and start, and a
// batch step's block tables padded to the device's rows.
TEST_CASE("gpu.host.plan_staging_runs_the_cpu_rows") {
    auto lm = load_model("synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=2,vocab=97,ctx=32", Precision::f32,
                         false);
    const Model& m = *lm.model;
    auto same_rows = [](const gpu::StagedStep& s, const StepPlan& cpu) {
        CHECK(s.args.rows == cpu.rows);
        CHECK(std::vector<int>(s.token.begin(), s.token.end()) == cpu.token);
        CHECK(std::vector<int>(s.slot.begin(), s.slot.end()) == cpu.slot);
        CHECK(std::vector<int>(s.pos.begin(), s.pos.end()) == cpu.pos);
    };
    gpu::StagedStep s;
    KVCache kc = make_kv_cache(m, 2, 32);
    RunState ks = make_run_state(m.config, 2);
    const std::vector<int> prompt = {5, 6, 7}, slots = {1, 0}, next = {8, 9};
    prefill(m, kc, ks, 1, prompt);
    gpu::stage_plan(s, ks.plan, /*max_blocks=*/1);
    same_rows(s, ks.plan);
    CHECK(s.args.phase == gpu::Phase::prefill);
    CHECK((s.args.slot == 1 && s.args.start == 0 && s.args.first_kept == 2 && s.args.n_kept == 1));
    prefill(m, kc, ks, 0, prompt, Keep::all);
    gpu::stage_plan(s, ks.plan, 1);
    same_rows(s, ks.plan);
    CHECK((s.args.first_kept == 0 && s.args.n_kept == 3));
    decode(m, kc, ks, slots, next);
    gpu::stage_plan(s, ks.plan, 1);
    same_rows(s, ks.plan);
    CHECK(std::vector<int>(s.pos.begin(), s.pos.end()) == std::vector<int>{3, 3});
    CHECK((s.args.phase == gpu::Phase::decode && s.args.first_kept == 0 && s.args.n_kept == 2));

    // A mixed batch: a keeps its last row, b none, c its one decode row;
    // the kept rows are the last two, a's then c's.
    PagedKVCache pool = make_paged_kv_cache(m, /*block_size=*/4, /*total_blocks=*/16);
    RunState ps = make_run_state(m.config, 2);
    BlockTable a{{7, 2}, 0}, b{{5}, 0}, c{{1, 9, 4}, 0};
    const std::vector<int> ta = {11, 12, 13, 14}, tb = {20, 21, 22}, tc = {30};
    const std::span<const int> first2(ta.data(), 2), first1(tb.data(), 1);
    forward_batch(m, pool, ps, std::vector<BatchItem>{{&a, ta, 0}, {&b, tb, 0}, {&c, tc, 0}});
    forward_batch(m, pool, ps, std::vector<BatchItem>{{&a, first2, 1}, {&b, first1, 0}, {&c, tc, 1}});
    gpu::stage_plan(s, ps.plan, /*max_blocks=*/4);
    same_rows(s, ps.plan);
    CHECK(ps.plan.token == std::vector<int>{11, 20, 12, 30});
    CHECK(ps.plan.slot == std::vector<int>{0, 1, 0, 2});
    CHECK(ps.plan.pos == std::vector<int>{4, 3, 5, 1});
    CHECK((s.args.phase == gpu::Phase::decode && s.args.first_kept == 2 && s.args.n_kept == 2));
    CHECK(s.tables == std::vector<int>{7, 2, 0, 0, 5, 0, 0, 0, 1, 9, 4, 0});
    // No logits wanted: the device still computes one row's (the last), never read.
    forward_batch(m, pool, ps, std::vector<BatchItem>{{&c, tc, 0}});
    gpu::stage_plan(s, ps.plan, 4);
    CHECK((s.args.first_kept == 0 && s.args.n_kept == 1));
    // A table longer than the device's rows is the engine's error, said as such.
    CHECK_THROWS_WITH_AS(gpu::stage_plan(s, ps.plan, /*max_blocks=*/0), doctest::Contains("internal error"),
                         std::exception);
}
#endif

#ifdef PDLAB_HAVE_CUDA
// The flash kernel's block holds its tiles in shared memory: every head_dim
// it accepts must fit sm_90's opt-in limit per block (227 KiB on H100 and
// H200), or its launch fails on the card; the rest it refuses up front.
TEST_CASE("gpu.host.flash_shared_memory") {
    const std::size_t sm90_optin = 227 * 1024;
    int accepted = 0;
    for (int D = 1; D <= 512; D++) {
        INFO("head_dim " << D);
        if (!gpu::tiled_attention_supports(D)) continue;
        accepted++;
        CHECK(D % 16 == 0);
        CHECK(gpu::tiled_attention_smem_bytes(D) <= sm90_optin);
        CHECK(gpu::tiled_attention_smem_bytes(D) > gpu::tiled_attention_smem_bytes(D - 16));  // grows with D
    }
    CHECK(accepted == 16);  // 16, 32, ..., 256
    CHECK(gpu::attention_prefill_flash_supports(64));
    CHECK_FALSE(gpu::attention_prefill_flash_supports(72));
}
#endif

#ifdef PDLAB_HAVE_CUDA
TEST_CASE("gpu.host.run_state_bytes") {
    // What the engine counts against free memory before it allocates: per row
    // the residual, the [q | k | v] projections, the attention output and the
    // MLP hidden (f32), the product inputs (xn and mlp_act in f32, or one bf16
    // buffer as wide as the widest input and, for Llama, the bf16 SwiGLU
    // output the MLP-in GEMV writes apart from it) and token / slot / pos; per row of
    // logits the kept row and the logits; then the attention scratch.
    gpu::DeviceShape c;
    c.dim = 64, c.hidden_dim = 172, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 16, c.vocab_size = 100;
    const std::size_t f32_row = (64 + 64 + (64 + 2 * 32) + 64 + 2 * 172 + 172) * 4 + 3 * 4;
    const std::size_t bf16_row = (64 + (64 + 2 * 32) + 64 + 2 * 172) * 4 + (172 + 172) * 2 + 3 * 4;
    const std::size_t logits_row = (64 + 100) * 4;
    INFO("rows x per-row bytes + logits rows x (dim + vocab) floats + scratch floats");
    CHECK(gpu::run_state_bytes(c, false, 10, 2, 1000) == 10 * f32_row + 2 * logits_row + 4000);
    CHECK(gpu::run_state_bytes(c, true, 10, 2, 1000) == 10 * bf16_row + 2 * logits_row + 4000);
}

// The attention scratch a pass needs, decided in one place for the run state
// and the memory check: a prefill on cuBLAS keeps its scores, the flash
// kernel none; a decode keeps its splits' partials whichever prefill runs.
TEST_CASE("gpu.host.attention_scratch") {
    gpu::DeviceShape c;
    c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64;
    CHECK(gpu::attention_scratch_floats(c, false, 2048, 2048, 2048, 0) == gpu::attention_prefill_scratch(2048, 0, 32));
    CHECK(gpu::attention_scratch_floats(c, false, 17, 4096, 17, 283) == gpu::attention_prefill_scratch(17, 283, 32));
    CHECK(gpu::attention_scratch_floats(c, true, 2048, 2048, 2048, 0) == 0);
    for (bool flash : {false, true})
        CHECK(gpu::attention_scratch_floats(c, flash, 4, 4096) == gpu::attention_decode_scratch(4, 32, 4096, 64));
}

// The element size a paged pool's KV byte budget (--kv-mb) is divided by:
// the settings' KV precision picks it for the GPU (read without one), the CPU
// keeps f32. The serving engine, whose options name a Device only, gets the
// environment's settings, and a value they do not know is the user's error.
TEST_CASE("gpu.host.kv_elem_bytes") {
    CudaSettings s;
    CHECK(kv_elem_bytes(Device::cpu, s) == 4);
    CHECK(kv_elem_bytes(Device::cuda, s) == 4);
    s.kv = KvPrecision::bf16;
    CHECK(kv_elem_bytes(Device::cuda, s) == 2);
    CHECK(kv_elem_bytes(Device::cpu, s) == 4);
    unsetenv("PDLAB_CUDA_KV");
    CHECK(kv_elem_bytes(Device::cuda) == 4);
    setenv("PDLAB_CUDA_KV", "bf16", 1);
    CHECK(kv_elem_bytes(Device::cuda) == 2);
    setenv("PDLAB_CUDA_KV", "fp8", 1);
    CHECK_THROWS_WITH_AS(kv_elem_bytes(Device::cuda), doctest::Contains("PDLAB_CUDA_KV=fp8"), UserError);
    unsetenv("PDLAB_CUDA_KV");
}

// A pool's K and V: 2 x layers x blocks x KV heads x positions x head_dim
// elements, of 4 bytes (f32) or 2 (PDLAB_CUDA_KV=bf16).
TEST_CASE("gpu.host.device_kv_bytes") {
    const std::size_t elems = std::size_t(2) * 16 * 3 * 8 * 2048 * 64;
    CHECK(gpu::device_kv_bytes(16, 8, 64, 2048, 3, gpu::KVPrecision::f32) == elems * 4);
    CHECK(gpu::device_kv_bytes(16, 8, 64, 2048, 3, gpu::KVPrecision::bf16) == elems * 2);
}
#endif

#ifdef PDLAB_HAVE_CUDA
// The kernel each product runs (matmul.cuh): the warp-per-row GEMV for 1 to
// 4 rows of x when it can read the weight rows 16 bytes at a time (8 bf16,
// or 16 int8 in groups of a power of two times 16), cuBLAS otherwise.
TEST_CASE("gpu.host.linear_kernel") {
    using gpu::LinearKernel;
    gpu::DeviceLinear L;
    L.in = 2048, L.out = 3072;
    CHECK(gpu::linear_kernel(L, 1) == LinearKernel::cublas);  // f32 weights
    L.bf16 = true;
    for (int M = 1; M <= 4; M++) CHECK(gpu::linear_kernel(L, M) == LinearKernel::gemv_bf16);
    CHECK(gpu::linear_kernel(L, 5) == LinearKernel::cublas);
    CHECK(gpu::linear_kernel(L, 0) == LinearKernel::cublas);
    L.in = 100;
    CHECK(gpu::linear_kernel(L, 1) == LinearKernel::cublas);

    static const std::int8_t some_int8 = 0;  // any device pointer: only its presence counts here
    L.q = &some_int8, L.group = 64, L.in = 2048;
    for (int M = 1; M <= 4; M++) CHECK(gpu::linear_kernel(L, M) == LinearKernel::gemv_int8);
    CHECK(gpu::linear_kernel(L, 5) == LinearKernel::cublas);
    L.in = 2056;  // a multiple of 8, not of 16
    CHECK(gpu::linear_kernel(L, 1) == LinearKernel::cublas);
    L.in = 2064, L.group = 48;  // 16-byte chunks would straddle groups
    CHECK(gpu::linear_kernel(L, 1) == LinearKernel::cublas);
}
#endif
