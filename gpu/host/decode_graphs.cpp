#include "decode_graphs.hpp"

#include <exception>

namespace pd::gpu {

namespace {

// enqueue()'s kernels on `s` as an instantiated graph; throws (the stream
// out of capture mode) when a launch or the capture fails.
cudaGraphExec_t capture_graph(cudaStream_t s, const std::function<void()>& enqueue) {
    PD_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
        enqueue();
    } catch (...) {
        cudaStreamEndCapture(s, &graph);
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        throw;
    }
    PD_CUDA(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    PD_CUDA(e);
    return exec;
}

}  // namespace

cudaGraphExec_t DecodeGraphs::find(int rows, int generation) {
    auto it = graphs_.find(rows);
    if (it == graphs_.end()) return nullptr;
    if (it->second.generation == generation) return it->second.exec;
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
    return nullptr;
}

cudaGraphExec_t DecodeGraphs::capture(int rows, int generation, cudaStream_t s, const std::function<void()>& enqueue,
                                      std::string* why) {
    Graph g;
    g.generation = generation;
    try {
        g.exec = capture_graph(s, enqueue);
    } catch (const std::exception& e) {
        *why = e.what();
        return nullptr;
    }
    graphs_.emplace(rows, g);
    return g.exec;
}

void DecodeGraphs::clear() noexcept {
    for (auto& [rows, g] : graphs_) cudaGraphExecDestroy(g.exec);
    graphs_.clear();
}

}  // namespace pd::gpu
