// The device seam: one loaded model, its KV cache and run state, on the CPU or
// on a CUDA GPU. make_engine() is the one place the backend is chosen; pdlab
// and the labs drive an Engine and never ask which one they got.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "engine/model.hpp"

namespace pd {

enum class Device { cpu, cuda };
Device parse_device(const std::string& s);  // "cpu" | "cuda", else UserError
const char* device_name(Device d);

// The CUDA engine's settings (docs/gpu.md, "Settings"); the CPU engine has
// nothing they change. pdlab reads them from PDLAB_CUDA_KV, PDLAB_CUDA_FLASH
// and PDLAB_CUDA_GRAPHS once, at start-up (engine_settings.hpp).
enum class KvPrecision { f32, bf16 };
struct CudaSettings {
    KvPrecision kv = KvPrecision::f32;  // the device cache's element type: bf16 halves what decode reads
    enum class Flash { by_cache, on, off };
    Flash flash = Flash::by_cache;      // prefill attention on the flash kernel; by_cache: with a bf16 cache only
    bool graphs = true;                 // decode steps replay one captured CUDA graph per batch size
};

// PDLAB_CUDA_* of this process's environment, read once (engine_settings.cpp):
// the default of every EngineOptions, so that an engine built without the
// command line's settings (a lab's own batch engine) still follows them.
const CudaSettings& environment_cuda_settings();

struct EngineOptions {
    Device device = Device::cpu;
    int batch = 1;     // sequences the cache holds
    int max_seq = 0;   // positions per sequence (0: the model's context length)
    CudaSettings cuda = environment_cuda_settings();
};

class Engine {
public:
    virtual ~Engine() = default;
    virtual const Config& config() const = 0;
    virtual Device device() const = 0;
    virtual std::string hardware() const = 0;  // "AMD EPYC (2 threads)", "NVIDIA H200"

    // The two phases (see model.hpp). Logits are returned in host memory.
    virtual const float* prefill(int slot, std::span<const int> tokens, Keep keep = Keep::last) = 0;
    virtual const float* decode(std::span<const int> slots, std::span<const int> tokens) = 0;
    // A decode step for greedy decoding: next[r] = the argmax of row r's
    // logits (the first maximum, as pd::argmax); next has a row per token.
    // The GPU finds it on the device and copies back one int per row instead
    // of the logits; this default runs decode() and pd::argmax on the host.
    virtual void decode_greedy(std::span<const int> slots, std::span<const int> tokens, std::span<int> next);

    virtual int cache_len(int slot) const = 0;
    virtual int batch() const = 0;
    virtual int max_seq() const = 0;
    virtual void reset(int slot) = 0;  // forget a sequence
    // Keep only the first `len` positions of a sequence (kv_truncate): the next
    // prefill or decode continues at position `len`. Speculative decoding rolls
    // rejected draft tokens back with it. UserError unless 0 <= len <= cache_len(slot).
    virtual void truncate(int slot, int len) = 0;

    // Runs `work` and returns how long the device took, in ms. CPU: the
    // monotonic clock. GPU: CUDA events recorded around the work, then a
    // synchronise, since kernel launches return before the GPU finishes.
    virtual double time_ms(const std::function<void()>& work) = 0;
    virtual std::string timing_method() const = 0;

    // The CPU model (weights stay on the host either way), for labs that look inside.
    virtual const Model& host_model() const = 0;
};

// Builds the engine for `opts.device`; the model is shared, not copied, and
// several engines (on any threads) may share one: their CPU forward passes
// take turns (see model.hpp).
std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> model, const EngineOptions& opts);

// The device half of the paged serving engine (track 2,
// serve/paged_serving_engine.hpp). The host keeps the pool's bookkeeping in
// PagedKVCache (block allocator, block tables, prefix cache) on either
// device; K and V live where the forward pass runs: the CPU's in cache.k /
// cache.v, the GPU's in device memory with the same block ids (the host
// vectors stay empty).
class PagedForward {
public:
    virtual ~PagedForward() = default;
    virtual std::string hardware() const = 0;
    // forward_batch (model.hpp) on this device: one pass over `items`, their
    // K/V written through their tables, table->len advanced; returns the
    // logits of the items that ask, in order, (n_logits, vocab) in host
    // memory. on_layer sees the K/V in cache.k / cache.v: the CPU only.
    virtual const float* forward_batch(PagedKVCache& cache, std::span<const BatchItem> items,
                                       const LayerHook& on_layer) = 0;
};

// `cache` is the pool the device will hold, made by make_paged_kv_cache with
// its storage on the host for Device::cpu and off it for Device::cuda.
std::unique_ptr<PagedForward> make_paged_forward(std::shared_ptr<const Model> model, const PagedKVCache& cache,
                                                 Device device, const CudaSettings& cuda);
// The same with the settings the environment gives (engine_settings.hpp): the
// serving engine's options carry a Device only, so it is read here for them.
std::unique_ptr<PagedForward> make_paged_forward(std::shared_ptr<const Model> model, const PagedKVCache& cache,
                                                 Device device);

// Whether this build has the CUDA backend and a GPU is present right now.
bool cuda_available(std::string* why_not = nullptr);

// Refuses (UserError, with what to do instead) a device this build or
// machine lacks, or a precision the device has no kernel for: int4 on CUDA.
void check_device(Device device, Precision precision);

// Bytes of one cached K or V element on `device`: 4 (f32), or 2 on CUDA with
// a bf16 cache (cuda.kv). What a paged pool's KV byte budget is divided by.
std::size_t kv_elem_bytes(Device device, const CudaSettings& cuda);
// The same with the settings the environment gives, as make_paged_forward above.
std::size_t kv_elem_bytes(Device device);

}  // namespace pd
