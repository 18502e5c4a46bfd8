// Decode steps as CUDA graphs (host side, C++20, g++): a step's kernels
// captured the first time a batch size is seen (or after the run state's
// buffers moved), replayed after that. One launch instead of ~9 per layer:
// at batch 1 the host would otherwise spend longer launching kernels than
// the GPU spends running them.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <string>

#include "cuda_check.cuh"

namespace pd::gpu {

class DecodeGraphs {
public:
    DecodeGraphs() = default;
    DecodeGraphs(const DecodeGraphs&) = delete;
    DecodeGraphs& operator=(const DecodeGraphs&) = delete;
    ~DecodeGraphs() { clear(); }

    // Launches on `s` the graph of a step of `rows` rows, captured from
    // enqueue() (which queues the step's kernels on s) the first time, or
    // again when the run state's generation has changed since. False, with
    // nothing launched and *why set, when the capture fails.
    template <class Enqueue>
    bool launch(int rows, int generation, cudaStream_t s, Enqueue&& enqueue, std::string* why) {
        cudaGraphExec_t exec = find(rows, generation);
        if (!exec) exec = capture(rows, generation, s, std::function<void()>(enqueue), why);
        if (!exec) return false;
        PD_CUDA(cudaGraphLaunch(exec, s));
        return true;
    }

    void clear() noexcept;

private:
    struct Graph {
        cudaGraphExec_t exec = nullptr;
        int generation = 0;
    };

    // The graph of `rows` rows at `generation`; null when none (a stale one is dropped).
    cudaGraphExec_t find(int rows, int generation);
    cudaGraphExec_t capture(int rows, int generation, cudaStream_t s, const std::function<void()>& enqueue,
                            std::string* why);

    std::map<int, Graph> graphs_;  // by rows
};

}  // namespace pd::gpu
