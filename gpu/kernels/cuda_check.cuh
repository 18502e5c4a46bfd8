// Error checking for every CUDA and cuBLAS call, and device memory that frees
// itself. Included by the .cu files (nvcc) and the .cpp files (g++) alike, so
// it stays plain C++17: no fmt, no std::span.
//
//   PD_CUDA(cudaMalloc(&p, n));     // throws with the call, file and line on failure
//   my_kernel<<<grid, block, 0, s>>>(...);
//   PD_CUDA_LAUNCHED();             // a bad launch configuration shows up here
//   PD_CUBLAS(cublasGemmEx(...));
//
// An out-of-memory error becomes pd::UserError (the model, batch or context is
// too large for this card: pdlab prints it and exits 2); anything else becomes
// std::runtime_error (a bug or a broken driver: exit 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace pd::gpu {

[[noreturn]] void cuda_fail(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void cublas_fail(cublasStatus_t status, const char* call, const char* file, int line);
// For host-side checks of kernel arguments (a bug in the caller, not the user's input).
[[noreturn]] void logic_fail(const char* what, const char* file, int line);

}  // namespace pd::gpu

#define PD_CUDA(call)                                                                   \
    do {                                                                                \
        cudaError_t pd_err_ = (call);                                                   \
        if (pd_err_ != cudaSuccess) ::pd::gpu::cuda_fail(pd_err_, #call, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: reports an invalid configuration (too many threads,
// too much shared memory, no kernel image for this GPU) at the launch site.
#define PD_CUDA_LAUNCHED() PD_CUDA(cudaGetLastError())

#define PD_CUBLAS(call)                                                                 \
    do {                                                                                \
        cublasStatus_t pd_st_ = (call);                                                 \
        if (pd_st_ != CUBLAS_STATUS_SUCCESS)                                            \
            ::pd::gpu::cublas_fail(pd_st_, #call, __FILE__, __LINE__);                  \
    } while (0)

#define PD_GPU_REQUIRE(cond)                                                            \
    do {                                                                                \
        if (!(cond)) ::pd::gpu::logic_fail(#cond, __FILE__, __LINE__);                  \
    } while (0)

namespace pd::gpu {

// n elements of T in device memory (plain cudaMalloc; never managed memory).
// Move-only; frees on destruction. resize() keeps the contents only when the
// size does not change.
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t n) { resize(n); }
    ~DeviceBuffer() { release(); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }

    void resize(std::size_t n) {
        if (n == n_) return;
        release();
        if (n > 0) PD_CUDA(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        n_ = n;
    }
    // Grows (contents lost) when smaller than n; returns whether it reallocated.
    bool ensure(std::size_t n) {
        if (n <= n_) return false;
        resize(n);
        return true;
    }
    void zero() {
        if (n_) PD_CUDA(cudaMemset(p_, 0, n_ * sizeof(T)));
    }
    void upload(const T* host, std::size_t n) {
        PD_GPU_REQUIRE(n <= n_);
        if (n) PD_CUDA(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    }
    void upload(const std::vector<T>& host) {
        resize(host.size());
        upload(host.data(), host.size());
    }
    void download(T* host, std::size_t n) const {
        PD_GPU_REQUIRE(n <= n_);
        if (n) PD_CUDA(cudaMemcpy(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    }
    std::vector<T> to_host() const {
        std::vector<T> h(n_);
        download(h.data(), n_);
        return h;
    }

    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return n_; }
    std::size_t bytes() const { return n_ * sizeof(T); }

private:
    void release() noexcept {
        if (p_) cudaFree(p_);  // never throws: called from destructors
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

// Page-locked ("pinned") host memory for a std::vector: the GPU copies from it
// by DMA, asynchronously, where pageable memory is first staged by the driver.
// For the small per-pass inputs the host writes and the device reads.
template <typename T>
struct PinnedAllocator {
    using value_type = T;
    PinnedAllocator() = default;
    template <typename U>
    PinnedAllocator(const PinnedAllocator<U>&) {}
    T* allocate(std::size_t n) {
        void* p = nullptr;
        PD_CUDA(cudaMallocHost(&p, n * sizeof(T)));
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t) noexcept { cudaFreeHost(p); }
    bool operator==(const PinnedAllocator&) const { return true; }
    bool operator!=(const PinnedAllocator&) const { return false; }
};
template <typename T>
using pinned_vector = std::vector<T, PinnedAllocator<T>>;

// Owns many device allocations of different types (a model's weights).
class DeviceArena {
public:
    DeviceArena() = default;
    ~DeviceArena() {
        for (void* p : ptrs_) cudaFree(p);
    }
    DeviceArena(const DeviceArena&) = delete;
    DeviceArena& operator=(const DeviceArena&) = delete;

    // Copies n host elements to new device memory; nullptr for n == 0.
    template <typename T>
    T* upload(const T* host, std::size_t n) {
        if (n == 0) return nullptr;
        void* p = nullptr;
        PD_CUDA(cudaMalloc(&p, n * sizeof(T)));
        ptrs_.push_back(p);
        bytes_ += n * sizeof(T);
        PD_CUDA(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice));
        return static_cast<T*>(p);
    }
    template <typename T>
    T* upload(const std::vector<T>& host) {
        return upload(host.data(), host.size());
    }
    std::size_t bytes() const { return bytes_; }

private:
    std::vector<void*> ptrs_;
    std::size_t bytes_ = 0;
};

}  // namespace pd::gpu
