// The CUDA engine: the host side of the GPU backend (C++20, compiled by g++).
// It chooses the kernels (the settings), checks that it fits
// (device_memory.hpp), uploads the model's row-major weights once
// (weights_upload.hpp; never the CPU's packed copy, which a CUDA run does not
// make), runs the host layer's step plans (src/engine/step_plan.hpp: the
// CPU's checks and rows) as plan_staging.hpp stages them, enqueues the
// forward pass (gpu/kernels/model.cu, decode steps as graphs: decode_graphs.hpp) and
// brings the logits back to host memory. cuda_device.cpp says whether a GPU
// is there.
#include "cuda_engine.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>

#include "attention.cuh"
#include "attention_pair.cuh"
#include "common.hpp"
#include "cuda_check.cuh"
#include "decode_graphs.hpp"
#include "device_memory.hpp"
#include "kv_cache.cuh"
#include "matmul.cuh"
#include "model.cuh"
#include "ops.cuh"
#include "plan_staging.hpp"
#include "sampler.cuh"
#include "weights_upload.hpp"
#include "engine/step_plan.hpp"

namespace pd {

namespace {

// The device cache's element type for the settings' (engine.hpp) KV precision.
gpu::KVPrecision device_kv(KvPrecision kv) {
    return kv == KvPrecision::bf16 ? gpu::KVPrecision::bf16 : gpu::KVPrecision::f32;
}

// Whether bf16 and int8 models run prefill attention on the flash kernel
// (attention_pair.cu) or on cuBLAS (scores in memory, TF32). cuBLAS is the
// default: on an H200 (2026-12-04) the flash kernel took 1.44 ms per layer of
// Llama-1B at 2,048 tokens, 71% of the prefill's kernel time, where the
// attention_prefill harness's cuBLAS version ran 2.6x faster (0.336 against
// 0.883 ms at 16 heads). Flash stays for what only it does: it reads a bf16
// KV cache, so a bf16 cache (PDLAB_CUDA_KV=bf16) turns it on, and it never
// holds the scores (256 MiB less for the 1B model at 2,048 tokens);
// PDLAB_CUDA_FLASH=1 or 0 (settings.flash on or off) says so outright.
bool flash_prefill_wanted(const CudaSettings& settings) {
    if (settings.flash == CudaSettings::Flash::by_cache) return settings.kv == KvPrecision::bf16;
    return settings.flash == CudaSettings::Flash::on;
}

// A CudaEngine serves either track 1 (Engine: the contiguous cache of
// opts.batch sequences) or, given a pool, track 2 (PagedForward: device K/V
// for the pool's blocks); make_cuda_engine and make_cuda_paged_forward hand
// out the one interface that fits its cache.
class CudaEngine final : public Engine, public PagedForward {
public:
    CudaEngine(std::shared_ptr<const Model> m, const EngineOptions& o, const PagedKVCache* pool = nullptr)
        : model_(std::move(m)), settings_(o.cuda) {
        if (!model_->serves.cuda)
            fail("this model was loaded for the CPU only, so its row-major matrices were released once "
                 "packed for the CPU (weights.hpp) and there is nothing to upload: load it with "
                 "Backends{{.cpu = true, .cuda = true}} to build both engines on it");
        const Config& c = model_->config;
        if (c.sliding_window > 0)
            fail("{} has a sliding window of {} positions (sliding_window), which the CUDA attention kernels do "
                 "not implement: run it with --device cpu", c.name, c.sliding_window);
        PD_CUDA(cudaSetDevice(0));
        PD_CUDA(cudaGetDeviceProperties(&prop_, 0));
        const int S = pool ? pool->max_seq : o.max_seq > 0 ? std::min(o.max_seq, c.max_seq_len) : c.max_seq_len;
        if (c.head_dim % 4 != 0 || c.head_dim > gpu::kDecodeMaxHeadDim)
            fail("the CUDA decode attention reads K/V rows 4 elements at a time, up to {} of them: a head_dim of {} "
                 "runs on the CPU only (--device cpu)",
                 gpu::kDecodeMaxHeadDim, c.head_dim);
        choose_paths(pool != nullptr);
        if (pool)
            gpu::check_device_memory(
                prop_, *model_,
                gpu::device_kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, pool->block_size, pool->total_blocks(),
                                     kv_precision_),
                fmt::format("{} blocks of {} positions", pool->total_blocks(), pool->block_size),
                gpu::peak_paged_run_state_bytes(dm_, std::min(S, pool->total_blocks()), S), S);
        else
            gpu::check_device_memory(
                prop_, *model_, gpu::device_kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, S, o.batch, kv_precision_),
                fmt::format("batch {} x {} positions", o.batch, S), gpu::peak_run_state_bytes(dm_, o.batch, S), S);
        try {
            PD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
            PD_CUDA(cudaEventCreate(&ev_start_));
            PD_CUDA(cudaEventCreate(&ev_stop_));
            blas_ = std::make_unique<gpu::Blas>(stream_);
            gpu::upload_weights(dm_, arena_, model_->w);
            gpu::upload_rope(dm_, arena_, c, S);
            cache_ = pool ? gpu::make_device_paged_kv_cache(c.n_layers, c.n_kv_heads, c.head_dim, pool->block_size,
                                                            pool->total_blocks(), S, kv_precision_)
                          : gpu::make_device_kv_cache(c.n_layers, o.batch, c.n_kv_heads, S, c.head_dim,
                                                      kv_precision_);
            gpu::ensure_run_state(st_, dm_, o.batch, o.batch, S);
            reserve_plan(plan_, o.batch);
            use_graphs_ = !pool && settings_.graphs;  // a paged step's rows and tables change every time
            PD_CUDA(cudaDeviceSynchronize());  // uploads done before the first timing
        } catch (...) {
            release();  // the destructor does not run for a half-built object
            throw;
        }
    }

    ~CudaEngine() override { release(); }

    const Config& config() const override { return model_->config; }
    Device device() const override { return Device::cuda; }
    std::string hardware() const override { return cuda_device_summary(); }

    // Each phase: the host layer's plan (engine/step_plan.hpp, with the
    // checks), its pass on the device, its logits back, then the lengths.
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        plan_prefill(plan_, model_->config, room(), slot, tokens, keep);
        enqueue_plan();
        const float* logits = fetch_logits(staged_.args.n_kept);
        commit(plan_, cache_.seq_len);
        return logits;
    }

    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        plan_decode(plan_, model_->config, room(), slots, tokens);
        enqueue_plan();
        const float* logits = fetch_logits(staged_.args.n_kept);
        commit(plan_, cache_.seq_len);
        return logits;
    }

    // The argmax of each row on the device: one int per row comes back.
    void decode_greedy(std::span<const int> slots, std::span<const int> tokens, std::span<int> next) override {
        PD_GPU_REQUIRE(next.size() == tokens.size());
        plan_decode(plan_, model_->config, room(), slots, tokens);
        enqueue_plan();
        const int rows = plan_.rows;
        d_next_.ensure(std::size_t(rows));
        h_next_.resize(std::size_t(rows));
        gpu::argmax(d_next_.data(), st_.logits.data(), rows, model_->config.vocab_size, stream_);
        PD_CUDA(cudaMemcpyAsync(h_next_.data(), d_next_.data(), sizeof(int) * std::size_t(rows),
                                cudaMemcpyDeviceToHost, stream_));
        PD_CUDA(cudaStreamSynchronize(stream_));
        std::copy(h_next_.begin(), h_next_.end(), next.begin());
        commit(plan_, cache_.seq_len);
    }

    int cache_len(int slot) const override { return cache_.seq_len.at(slot); }
    int batch() const override { return cache_.batch; }
    int max_seq() const override { return cache_.max_seq; }
    // The rows past a length stay on the device unread: the host's lengths
    // say where the next pass writes.
    void reset(int slot) override { reset_length(cache_.seq_len, slot); }
    void truncate(int slot, int len) override { truncate_length(cache_.seq_len, slot, len); }

    double time_ms(const std::function<void()>& work) override {
        // The GPU stamps each event when the stream reaches it. Everything
        // between the two records is inside the interval: the host staging
        // this pass's rows (stage_rows), every launch the host queues (while
        // the host is still launching, the GPU may sit idle and that gap is
        // counted), the kernels, and the copy of the logits to host memory
        // (fetch_logits; decode_greedy copies each row's argmax instead). So this is the model-side step time as a caller sees
        // it, host overhead included, like the CPU engine's clock; not the
        // kernels' time alone. The synchronise makes the host wait for the
        // second stamp before reading it.
        PD_CUDA(cudaEventRecord(ev_start_, stream_));
        work();
        PD_CUDA(cudaEventRecord(ev_stop_, stream_));
        PD_CUDA(cudaEventSynchronize(ev_stop_));
        float ms = 0;
        PD_CUDA(cudaEventElapsedTime(&ms, ev_start_, ev_stop_));
        return ms;
    }

    std::string timing_method() const override {
        return fmt::format(
            "model-side step time: CUDA events recorded on the engine's stream before and after "
            "each phase, then cudaEventSynchronize on the second one before reading the time. "
            "The interval holds everything the phase does: staging its tokens and positions to "
            "the device, the host queueing the kernel launches (GPU idle time while the host "
            "launches is counted), the kernels, and the copy of the logits (greedy decode steps: "
            "of each row's argmax) back to host memory; "
            "it is not the kernels' time alone (gpu/dev's harnesses time kernels by themselves). "
            "A host clock read without the synchronise would time only the queueing: launches "
            "return long before the GPU has done the work. Decode steps {}. The KV cache holds {}",
            use_graphs_ ? "replay one captured CUDA graph per batch size (PDLAB_CUDA_GRAPHS=0 "
                          "launches every kernel instead)"
                        : "launch every kernel (CUDA graphs off: PDLAB_CUDA_GRAPHS=0)",
            kv_precision_ == gpu::KVPrecision::bf16 ? "bf16 K/V (PDLAB_CUDA_KV=bf16)"
                                                    : "f32 K/V (PDLAB_CUDA_KV=bf16 halves its bytes)");
    }

    const Model& host_model() const override { return *model_; }

    // The paged cache's step: every row is one query through the block
    // tables (the decode kernel; a prefill chunk's rows see each other since
    // all K/V are written first), so prefill chunks and decode tokens share
    // one pass and one kernel. No CUDA graph: rows and tables change every step.
    const float* forward_batch(PagedKVCache& pool, std::span<const BatchItem> items,
                               const LayerHook& on_layer) override {
        if (on_layer)
            fail("a layer hook reads K/V in host memory, and this paged engine keeps them on the GPU "
                 "(disaggregated serving, lab 09, runs on the CPU)");
        plan_batch(plan_, model_->config, pool, items);
        enqueue_plan();
        const float* logits = fetch_logits(staged_.args.n_kept);
        commit(plan_);
        return logits;
    }

private:
    CacheRoom room() const { return {cache_.seq_len, cache_.max_seq}; }

    // Stages plan_ (gpu/host/plan_staging.hpp: its rows as they are, a batch
    // step's block tables) and enqueues its forward pass: a decode step's
    // captured graph, or every kernel. The logits land in st_.logits; the
    // caller fetches what it needs and then commits the plan.
    void enqueue_plan() {
        gpu::stage_plan(staged_, plan_, cache_.max_blocks());
        const gpu::ForwardArgs& a = staged_.args;
        const bool prefill = a.phase == gpu::Phase::prefill;
        gpu::ensure_run_state(st_, dm_, a.rows, a.n_kept, cache_.max_seq, prefill ? a.rows : 0,
                              prefill ? a.start : 0);  // no-op after the first decode steps
        stage_rows();
        if (plan_.kind == StepKind::batch)
            gpu::set_block_tables(cache_, staged_.tables, int(plan_.tables.size()), stream_);
        if (plan_.kind == StepKind::decode && use_graphs_) run_graph(a);
        else gpu::forward(dm_, cache_, st_, *blas_, a);
    }

    // Everything that is not a DeviceBuffer / DeviceArena (those free themselves).
    void release() noexcept {
        if (stream_) cudaStreamSynchronize(stream_);
        graphs_.clear();
        blas_.reset();
        if (h_logits_) cudaFreeHost(h_logits_);
        h_logits_ = nullptr;
        h_logits_cap_ = 0;
        if (ev_start_) cudaEventDestroy(ev_start_);
        if (ev_stop_) cudaEventDestroy(ev_stop_);
        if (stream_) cudaStreamDestroy(stream_);
        ev_start_ = ev_stop_ = nullptr;
        stream_ = nullptr;
    }

    // Which kernels this engine runs, decided before anything is sized or
    // uploaded: bf16 activations (bf16 and int8 products take them), the
    // flash prefill, and the cache's precision, which is bf16 only where
    // every kernel reading the cache takes bf16 (a paged engine never runs the
    // prefill attention: its prompts go through the decode kernel).
    void choose_paths(bool paged) {
        dm_.shape = gpu::device_shape(model_->config);
        dm_.bf16 = model_->precision != Precision::f32;
        // The flash kernel's tiles must fit the card's shared memory per block:
        // head_dim 128 takes 110 KiB, over the 99 KiB of an RTX 30xx/40xx or
        // L4 (the A100 has 163, Hopper 227); there prefill attention runs on cuBLAS.
        kv_precision_ = device_kv(settings_.kv);
        dm_.flash_prefill = dm_.bf16 && gpu::attention_prefill_flash_supports(dm_.shape.head_dim) &&
                            gpu::tiled_attention_smem_bytes(dm_.shape.head_dim) <= prop_.sharedMemPerBlockOptin &&
                            flash_prefill_wanted(settings_);
        if (kv_precision_ != gpu::KVPrecision::bf16) return;
        if (!dm_.bf16)
            fail("PDLAB_CUDA_KV=bf16 needs bf16 or int8 weights (--precision bf16 or int8): an f32 model's "
                 "prefill attention runs on cuBLAS in exact f32 and reads an f32 cache; unset PDLAB_CUDA_KV "
                 "for f32 weights");
        if (!paged && !dm_.flash_prefill)
            fail("PDLAB_CUDA_KV=bf16 needs the flash prefill attention, the one that reads a bf16 cache: it "
                 "takes a head_dim that is a multiple of 16 up to 256 (this model's: {}) whose tiles fit the "
                 "GPU's shared memory per block ({}: {} KiB), and is off when PDLAB_CUDA_FLASH=0; unset "
                 "PDLAB_CUDA_KV or PDLAB_CUDA_FLASH",
                 dm_.shape.head_dim, prop_.name, prop_.sharedMemPerBlockOptin / 1024);
    }

    // Copies the staged token / slot / pos rows to the device through pinned
    // host copies (before the forward pass, never inside a captured graph).
    void stage_rows() {
        rows_token_.assign(staged_.token.begin(), staged_.token.end());
        rows_slot_.assign(staged_.slot.begin(), staged_.slot.end());
        rows_pos_.assign(staged_.pos.begin(), staged_.pos.end());
        const std::size_t bytes = sizeof(int) * std::size_t(staged_.args.rows);
        PD_CUDA(cudaMemcpyAsync(st_.token.data(), rows_token_.data(), bytes, cudaMemcpyHostToDevice, stream_));
        PD_CUDA(cudaMemcpyAsync(st_.slot.data(), rows_slot_.data(), bytes, cudaMemcpyHostToDevice, stream_));
        PD_CUDA(cudaMemcpyAsync(st_.pos.data(), rows_pos_.data(), bytes, cudaMemcpyHostToDevice, stream_));
    }

    // Brings n rows of logits to (pinned) host memory and waits for them.
    const float* fetch_logits(int n) {
        const std::size_t count = std::size_t(n) * model_->config.vocab_size;
        if (count > h_logits_cap_) {
            PD_CUDA(cudaStreamSynchronize(stream_));
            if (h_logits_) cudaFreeHost(h_logits_);
            h_logits_ = nullptr;
            h_logits_cap_ = 0;
            PD_CUDA(cudaMallocHost(reinterpret_cast<void**>(&h_logits_), count * sizeof(float)));
            h_logits_cap_ = count;
        }
        PD_CUDA(cudaMemcpyAsync(h_logits_, st_.logits.data(), count * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
        PD_CUDA(cudaStreamSynchronize(stream_));
        return h_logits_;
    }

    // A decode step's captured graph (decode_graphs.hpp); when capture
    // fails, every kernel now and from then on.
    void run_graph(const gpu::ForwardArgs& a) {
        std::string why;
        if (graphs_.launch(a.rows, st_.generation, stream_, [&] { gpu::forward(dm_, cache_, st_, *blas_, a); }, &why))
            return;
        std::fprintf(stderr, "pdlab: CUDA graph capture failed (%s); launching kernels one by one\n", why.c_str());
        use_graphs_ = false;
        gpu::forward(dm_, cache_, st_, *blas_, a);
    }

    std::shared_ptr<const Model> model_;
    CudaSettings settings_;  // EngineOptions::cuda: the cache's precision, flash prefill, graphs
    cudaDeviceProp prop_{};
    cudaStream_t stream_ = nullptr;
    cudaEvent_t ev_start_ = nullptr, ev_stop_ = nullptr;
    std::unique_ptr<gpu::Blas> blas_;
    gpu::DeviceArena arena_;
    gpu::DeviceModel dm_;
    gpu::DeviceKVCache cache_;
    gpu::DeviceRunState st_;
    // Host copies of this pass's rows, pinned so that stage_rows' copies are
    // asynchronous; every pass ends by waiting for its logits (fetch_logits),
    // so the next one never overwrites rows still being copied.
    gpu::pinned_vector<int> rows_token_, rows_slot_, rows_pos_;
    gpu::DeviceBuffer<int> d_next_;                        // decode_greedy's argmax per row
    gpu::pinned_vector<int> h_next_;                       // ... and its host copy
    StepPlan plan_;                                        // this step's rows (the host layer's)
    gpu::StagedStep staged_;                               // ... as the device takes them
    float* h_logits_ = nullptr;                            // pinned host memory for the logits
    std::size_t h_logits_cap_ = 0;
    gpu::DecodeGraphs graphs_;                             // decode step graph per batch size
    bool use_graphs_ = true;
    gpu::KVPrecision kv_precision_ = gpu::KVPrecision::f32;  // settings_.kv
};

}  // namespace

std::unique_ptr<PagedForward> make_cuda_paged_forward(std::shared_ptr<const Model> model,
                                                      const PagedKVCache& pool, const CudaSettings& cuda) {
    EngineOptions o;
    o.device = Device::cuda, o.cuda = cuda;  // o.batch = 1: the run state's first size, before the first step grows it
    return std::make_unique<CudaEngine>(std::move(model), o, &pool);
}

std::size_t cuda_kv_elem_bytes(const CudaSettings& cuda) { return gpu::kv_elem_bytes(device_kv(cuda.kv)); }

std::unique_ptr<Engine> make_cuda_engine(std::shared_ptr<const Model> model, const EngineOptions& opts) {
    return std::make_unique<CudaEngine>(std::move(model), opts);
}

}  // namespace pd
