// cuBLAS bf16 GEMM rate on this card: what prefill is measured against.
//
// Times y (M, N) = x (M, K) . W^T with bf16 x and W, f32 accumulation and f32
// y: exactly the products a bf16 model's prefill runs (gpu/kernels/matmul.cu), on the
// Linear shapes of --model-shapes at M = --m rows, and on one large square
// GEMM for reference. The model-shape rate (total FLOPs / total time) is
// reported as gemm_tflops, the number check.sh judges prefill against; the
// square rate is the card's practical bf16 peak.
//
// Before timing, each shape's result is checked on a few entries against a
// CPU dot product of the same bf16 inputs.
//
//   gemm [--m 2048] [--shapes N:K,N:K,...] [--square 8192] [--repeats 10] [--json FILE]
// The default shapes are the four products of a Llama-1B layer (dim 2048, MLP
// 8192, 32 heads over 8 KV heads of 64): 3072:2048, 2048:2048, 16384:2048, 2048:8192.
// Exits 77 without a GPU.
#include "dev_common.cuh"

#include <cuda_bf16.h>

#include "matmul.cuh"

namespace {

struct Shape {
    int n, k;
};

std::vector<Shape> parse_shapes(const char* s) {
    std::vector<Shape> v;
    std::string str(s);
    std::size_t at = 0;
    while (at < str.size()) {
        std::size_t comma = str.find(',', at);
        std::string item = str.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        int n = 0, k = 0;
        if (std::sscanf(item.c_str(), "%d:%d", &n, &k) != 2 || n < 1 || k < 1) {
            std::fprintf(stderr, "gemm: bad shape \"%s\" (expected N:K)\n", item.c_str());
            std::exit(2);
        }
        v.push_back({n, k});
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return v;
}

float bf16_value(const __nv_bfloat16& h) { return __bfloat162float(h); }

}  // namespace

const char* const kHelp = R"(gemm: cuBLAS bf16 GEMM rate (bf16 inputs, f32 accumulate and output).
  --m M          rows of x, the prompt length of a prefill (2048)
  --shapes LIST  N:K pairs of the weight matrices (default: a Llama-1B layer)
  --square S     size of the reference square GEMM (8192; 0 to skip)
  --repeats R    timed runs, median reported (10)
  --json FILE    also write the results as JSON
)";

int main(int argc, char** argv) {
    dev::Args args{argc, argv, kHelp};
    const dev::Card card = dev::start(args, "gemm");
    const int M = int(args.get("--m", 2048)), square = int(args.get("--square", 8192));
    const int repeats = int(args.get("--repeats", 10));
    const char* shapes_arg = args.value("--shapes");
    std::vector<Shape> shapes = parse_shapes(shapes_arg ? shapes_arg : "3072:2048,2048:2048,16384:2048,2048:8192");
    pd::gpu::Blas blas(nullptr);

    auto run = [&](int m, int n, int k, bool check) {
        std::vector<__nv_bfloat16> hx(std::size_t(m) * k), hw(std::size_t(n) * k);
        auto rx = dev::randn(hx.size(), 11), rw = dev::randn(hw.size(), 12, 0.05f);
        for (std::size_t i = 0; i < hx.size(); i++) hx[i] = __float2bfloat16_rn(rx[i]);
        for (std::size_t i = 0; i < hw.size(); i++) hw[i] = __float2bfloat16_rn(rw[i]);
        __nv_bfloat16* x = dev::to_device(hx);
        __nv_bfloat16* w = dev::to_device(hw);
        float* y = nullptr;
        DEV_CHECK(cudaMalloc(&y, std::size_t(m) * n * sizeof(float)));
        pd::gpu::DeviceLinear L;
        L.in = k, L.out = n, L.bf16 = true, L.w = w;
        auto launch = [&] { pd::gpu::linear(blas, L, reinterpret_cast<const std::uint16_t*>(x), m, y); };
        launch();
        DEV_CHECK(cudaDeviceSynchronize());
        if (check) {
            auto hy = dev::to_host(y, std::size_t(m) * n);
            std::mt19937 rng(5);
            for (int probe = 0; probe < 64; probe++) {
                const int i = int(rng() % m), j = int(rng() % n);
                double ref = 0;
                for (int kk = 0; kk < k; kk++)
                    ref += double(bf16_value(hx[std::size_t(i) * k + kk])) * bf16_value(hw[std::size_t(j) * k + kk]);
                const double got = hy[std::size_t(i) * n + j];
                if (std::fabs(got - ref) > 1e-3 + 1e-3 * std::fabs(ref)) {
                    std::printf("gemm %dx%dx%d: INCORRECT at (%d, %d): got %g, expected %g\n", m, n, k, i, j, got, ref);
                    std::exit(1);
                }
            }
        }
        const double ms = dev::time_ms(launch, 3, repeats);
        cudaFree(x);
        cudaFree(w);
        cudaFree(y);
        return ms;
    };

    double total_flops = 0, total_ms = 0;
    std::printf("cuBLAS bf16 GEMM (f32 accumulate), M = %d rows:\n", M);
    for (const Shape& s : shapes) {
        const double ms = run(M, s.n, s.k, true);
        const double f = 2.0 * M * double(s.n) * s.k;
        total_flops += f;
        total_ms += ms;
        std::printf("  N %6d  K %6d   %8.4f ms  %7.1f TFLOP/s\n", s.n, s.k, ms, f / (ms * 1e-3) / 1e12);
    }
    const double model_rate = total_flops / (total_ms * 1e-3) / 1e12;
    std::printf("  model shapes together: %.1f TFLOP/s\n", model_rate);
    double square_rate = 0;
    if (square > 0) {
        const double ms = run(square, square, square, false);
        square_rate = 2.0 * double(square) * square * square / (ms * 1e-3) / 1e12;
        std::printf("  square %d^3:           %.1f TFLOP/s\n", square, square_rate);
    }
    std::printf("RESULT gemm_tflops=%.1f\n", model_rate);
    std::printf("RESULT gemm_square_tflops=%.1f\n", square_rate);
    if (FILE* f = dev::json_file(args, "gemm")) {
        std::fprintf(f, "{\n  \"card\": \"%s\",\n  \"m\": %d,\n  \"gemm_tflops\": %.1f,\n"
                        "  \"gemm_square_tflops\": %.1f\n}\n",
                     card.name.c_str(), M, model_rate, square_rate);
        std::fclose(f);
    }
    return 0;
}
