// The error paths of cuda_check.cuh (compiled by g++, so they may use fmt).
#include "cuda_check.cuh"

#include <stdexcept>

#include "common.hpp"

namespace pd::gpu {

namespace {

const char* cublas_status_name(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status";
}

}  // namespace

void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
    // Clear a non-sticky error so that the caller can go on (e.g. after an
    // out-of-memory, with a smaller batch).
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
        throw UserError(fmt::format(
            "out of GPU memory in {} ({}:{}): the model, batch or context is too large for this "
            "card; try --precision bf16, a smaller --batch or a shorter prompt",
            call, file, line));
    throw std::runtime_error(fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(err),
                                         cudaGetErrorString(err), call, file, line));
}

void cublas_fail(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status == CUBLAS_STATUS_ALLOC_FAILED)
        throw UserError(fmt::format("out of GPU memory in cuBLAS call {} ({}:{}): the model, batch "
                                    "or context is too large for this card",
                                    call, file, line));
    throw std::runtime_error(fmt::format("cuBLAS error {} in {} at {}:{}", cublas_status_name(status),
                                         call, file, line));
}

void logic_fail(const char* what, const char* file, int line) {
    throw std::logic_error(fmt::format("GPU backend: requirement {} failed at {}:{}", what, file, line));
}

}  // namespace pd::gpu
