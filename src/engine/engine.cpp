// The one place the backend is chosen. Compiled with PDLAB_HAVE_CUDA when the
// CUDA backend in gpu/ is built.
#include "engine/engine.hpp"

#include "engine/engine_settings.hpp"
#include "engine/sampler.hpp"
#include "base/hardware.hpp"
#include "base/timing.hpp"

#ifdef PDLAB_HAVE_CUDA
#include "cuda_engine.hpp"
#endif

namespace pd {

Device parse_device(const std::string& s) {
    if (s == "cpu") return Device::cpu;
    if (s == "cuda" || s == "gpu") return Device::cuda;
    fail("unknown device \"{}\": use cpu or cuda", s);
}

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

namespace {

class CpuEngine final : public Engine {
public:
    CpuEngine(std::shared_ptr<const Model> m, const EngineOptions& o)
        : model_(std::move(m)),
          cache_(make_kv_cache(*model_, o.batch, o.max_seq)),
          state_(make_run_state(model_->config, std::max(o.batch, 1))) {
        cpu_weights(*model_);  // fails here, not in the first pass, on a model loaded for CUDA only
    }

    const Config& config() const override { return model_->config; }
    Device device() const override { return Device::cpu; }
    std::string hardware() const override { return cpu_summary(); }
    const float* prefill(int slot, std::span<const int> tokens, Keep keep) override {
        return pd::prefill(*model_, cache_, state_, slot, tokens, keep);
    }
    const float* decode(std::span<const int> slots, std::span<const int> tokens) override {
        return pd::decode(*model_, cache_, state_, slots, tokens);
    }
    int cache_len(int slot) const override { return cache_.seq_len.at(slot); }
    int batch() const override { return cache_.batch; }
    int max_seq() const override { return cache_.max_seq; }
    void reset(int slot) override { kv_reset(cache_, slot); }
    void truncate(int slot, int len) override { kv_truncate(cache_, slot, len); }
    double time_ms(const std::function<void()>& work) override {
        double t0 = now_ms();
        work();
        return now_ms() - t0;
    }
    std::string timing_method() const override {
        return "CPU monotonic clock (std::chrono::steady_clock) around each phase; the CPU "
               "finishes the work before the call returns, so no extra synchronisation is needed";
    }
    const Model& host_model() const override { return *model_; }

private:
    std::shared_ptr<const Model> model_;
    KVCache cache_;
    RunState state_;
};

// The paged cache's forward on the CPU: model.hpp's forward_batch with its run state.
class CpuPagedForward final : public PagedForward {
public:
    explicit CpuPagedForward(std::shared_ptr<const Model> m)
        : model_(std::move(m)), state_(make_run_state(model_->config, 64)) {  // 64 rows: most decode batches
        cpu_weights(*model_);  // fails here, not in the first pass, on a model loaded for CUDA only
    }
    std::string hardware() const override { return cpu_summary(); }
    const float* forward_batch(PagedKVCache& cache, std::span<const BatchItem> items,
                               const LayerHook& on_layer) override {
        return pd::forward_batch(*model_, cache, state_, items, on_layer);
    }

private:
    std::shared_ptr<const Model> model_;
    RunState state_;
};

}  // namespace

void Engine::decode_greedy(std::span<const int> slots, std::span<const int> tokens, std::span<int> next) {
    if (next.size() != tokens.size())
        fail("internal error: decode_greedy got {} rows for next tokens, {} tokens", next.size(), tokens.size());
    const float* logits = decode(slots, tokens);
    const int V = config().vocab_size;
    for (std::size_t r = 0; r < tokens.size(); r++) next[r] = argmax(logits + r * V, V);
}

bool cuda_available(std::string* why_not) {
#ifdef PDLAB_HAVE_CUDA
    return cuda_device_present(why_not);
#else
    if (why_not) *why_not = "this build of the kit has no CUDA backend (it was configured with -Dcuda=disabled, or nvcc was not found; reconfigure with -Dcuda=enabled on a machine with the CUDA Toolkit)";
    return false;
#endif
}

void check_device(Device device, Precision precision) {
    if (device != Device::cuda) return;
    const FormatTraits& t = precision.traits();
    if (!t.cuda)  // first, so that the message is the same with or without a GPU
        fail("--precision {} runs on the CPU only: the CUDA backend has no {}-bit kernel. Use --device cpu, "
             "or --precision int8 on the GPU.", t.name, t.bits);
    std::string why;
    if (!cuda_available(&why)) fail("--device cuda is not available: {}. Use --device cpu.", why);
}

std::size_t kv_elem_bytes(Device device, const CudaSettings& cuda) {
#ifdef PDLAB_HAVE_CUDA
    if (device == Device::cuda) return cuda_kv_elem_bytes(cuda);
#endif
    (void)device, (void)cuda;
    return sizeof(float);
}

std::size_t kv_elem_bytes(Device device) { return kv_elem_bytes(device, engine_settings_from_env().cuda); }

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> model, const EngineOptions& opts) {
    if (opts.batch < 1) fail("batch size must be at least 1, got {}", opts.batch);
    check_device(opts.device, model->precision);
    if (opts.device == Device::cuda) {
#ifdef PDLAB_HAVE_CUDA
        return make_cuda_engine(std::move(model), opts);
#endif
    }
    return std::make_unique<CpuEngine>(std::move(model), opts);
}

std::unique_ptr<PagedForward> make_paged_forward(std::shared_ptr<const Model> model, const PagedKVCache& cache,
                                                 Device device, const CudaSettings& cuda) {
    if (cache.k.empty() != (device == Device::cuda))
        fail("internal error: a paged KV cache stored {} the host for a {} forward pass",
             cache.k.empty() ? "off" : "on", device_name(device));
    check_device(device, model->precision);
    if (device == Device::cuda) {
#ifdef PDLAB_HAVE_CUDA
        return make_cuda_paged_forward(std::move(model), cache, cuda);
#endif
    }
    (void)cuda;
    return std::make_unique<CpuPagedForward>(std::move(model));
}

std::unique_ptr<PagedForward> make_paged_forward(std::shared_ptr<const Model> model, const PagedKVCache& cache,
                                                 Device device) {
    return make_paged_forward(std::move(model), cache, device, engine_settings_from_env().cuda);
}

}  // namespace pd
