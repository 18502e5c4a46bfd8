// The card's copy bandwidth: what decode's floor is measured against.
//
//   1. cudaMemcpy device-to-device of --gib GiB (default 2): the driver's copy.
//   2. a plain copy kernel, 16 bytes per thread per step (grid-stride).
// Bandwidth counts bytes read plus bytes written (2 x size per copy). The
// best of the two is reported as copy_gbs, the number check.sh uses.
//
//   bandwidth [--gib 2] [--repeats 10] [--json FILE]
// Exits 77 without a GPU.
#include "dev_common.cuh"

namespace {

__global__ void copy_kernel(float4* dst, const float4* src, std::size_t n) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x)
        dst[i] = src[i];
}

}  // namespace

const char* const kHelp = R"(bandwidth: device memory copy bandwidth (read + write bytes per second).
  --gib G       size of each buffer in GiB (2)
  --repeats R   timed runs, median reported (10)
  --json FILE   also write the results as JSON
)";

int main(int argc, char** argv) {
    dev::Args args{argc, argv, kHelp};
    const dev::Card card = dev::start(args, "bandwidth");
    const double gib = args.getf("--gib", 2.0);
    const int repeats = int(args.get("--repeats", 10));
    const std::size_t bytes = std::size_t(gib * 1024 * 1024 * 1024) / 16 * 16;
    void *a = nullptr, *b = nullptr;
    DEV_CHECK(cudaMalloc(&a, bytes));
    DEV_CHECK(cudaMalloc(&b, bytes));
    DEV_CHECK(cudaMemset(a, 1, bytes));
    DEV_CHECK(cudaMemset(b, 0, bytes));

    const double moved = 2.0 * double(bytes);
    const double ms_memcpy = dev::time_ms([&] { DEV_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); },
                                          2, repeats);
    const std::size_t n4 = bytes / 16;
    const unsigned blocks = unsigned(std::min<std::size_t>((n4 + 255) / 256, std::size_t(card.sms) * 32));
    const double ms_kernel = dev::time_ms([&] {
        copy_kernel<<<blocks, 256>>>(static_cast<float4*>(b), static_cast<const float4*>(a), n4);
    }, 2, repeats);
    DEV_CHECK(cudaGetLastError());
    // The kernel must have copied: check a few words.
    std::vector<unsigned char> probe(64);
    DEV_CHECK(cudaMemcpy(probe.data(), static_cast<char*>(b) + bytes - 64, 64, cudaMemcpyDeviceToHost));
    for (unsigned char c : probe)
        if (c != 1) {
            std::printf("copy kernel: INCORRECT: destination not written\n");
            return 1;
        }

    const double gbs_memcpy = moved / (ms_memcpy * 1e-3) / 1e9;
    const double gbs_kernel = moved / (ms_kernel * 1e-3) / 1e9;
    const double best = std::max(gbs_memcpy, gbs_kernel);
    std::printf("copy of %.2f GiB (read + write = %.2f GB moved):\n", double(bytes) / (1 << 30), moved / 1e9);
    std::printf("  cudaMemcpy device-to-device  %8.3f ms  %8.1f GB/s (%5.1f%% of peak)\n", ms_memcpy,
                gbs_memcpy, card.peak_gbs > 0 ? 100 * gbs_memcpy / card.peak_gbs : 0.0);
    std::printf("  float4 copy kernel           %8.3f ms  %8.1f GB/s (%5.1f%% of peak)\n", ms_kernel,
                gbs_kernel, card.peak_gbs > 0 ? 100 * gbs_kernel / card.peak_gbs : 0.0);
    std::printf("RESULT copy_gbs=%.1f\n", best);
    if (FILE* f = dev::json_file(args, "bandwidth")) {
        std::fprintf(f, "{\n  \"card\": \"%s\",\n  \"bytes\": %zu,\n  \"memcpy_gbs\": %.1f,\n"
                        "  \"kernel_gbs\": %.1f,\n  \"copy_gbs\": %.1f,\n  \"peak_gbs\": %.1f\n}\n",
                     card.name.c_str(), bytes, gbs_memcpy, gbs_kernel, best, card.peak_gbs);
        std::fclose(f);
    }
    cudaFree(a);
    cudaFree(b);
    return 0;
}
