// Lab 10 reference solution.
// The lab's header, by a path that does not depend on the include order.
#include "../../../labs/track3/10-roofline/exercise.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pd::lab10 {

namespace {

double sum(const std::vector<Count>& rows, double Count::*field) {
    double s = 0;
    for (const Count& r : rows) s += r.*field;
    return s;
}

}  // namespace

Count count_matmul(const std::string& name, double rows, int in, int out, Precision p) {
    if (rows < 1 || in < 1 || out < 1)
        throw std::invalid_argument("count_matmul: rows, in and out must be at least 1");
    // Every weight once, whatever the rows: that is what makes a product with many rows cheap per row.
    return {name, 2.0 * rows * in * out, double(in) * out * double(bytes_per_weight(p))};
}

std::vector<Count> count_phase(const Config& c, const PhaseShape& s) {
    const bool prefill = s.phase == Phase::prefill;
    if (s.batch < 1) throw std::invalid_argument("count_phase: batch must be at least 1");
    if (prefill && s.prompt_len < 1) throw std::invalid_argument("count_phase: prompt_len must be at least 1");
    if (!prefill && s.context < 1) throw std::invalid_argument("count_phase: context must be at least 1");
    const double B = s.batch, P = s.prompt_len, L = c.n_layers;
    const double rows = prefill ? B * P : B;
    // (query, position) pairs: causal in a prompt (1 + 2 + ... + P), the whole cache in decode.
    const double pairs = prefill ? B * P * (P + 1) / 2 : B * s.context;
    // Positions whose K (and V) cross the bus: written by prefill, read by decode.
    const double positions = prefill ? B * P : B * s.context;
    const double attn_flops = 2.0 * c.n_heads * double(c.head_dim) * pairs * L;
    const double k_bytes = positions * c.kv_dim() * L * 4.0;
    auto layers = [&](Count one) { return Count{one.name, one.flops * L, one.bytes * L}; };
    const int mlp_in = c.family == Family::llama ? 2 * c.hidden_dim : c.hidden_dim;
    return {layers(count_matmul("qkv", rows, c.dim, c.q_dim() + 2 * c.kv_dim(), s.precision)),
            {"attn_scores", attn_flops, k_bytes},
            {"attn_values", attn_flops, k_bytes},
            layers(count_matmul("attn_out", rows, c.q_dim(), c.dim, s.precision)),
            layers(count_matmul("mlp_in", rows, c.dim, mlp_in, s.precision)),
            layers(count_matmul("mlp_out", rows, c.hidden_dim, c.dim, s.precision)),
            count_matmul("head", B, c.dim, c.vocab_size, s.precision)};
}

double attainable_gflops(double intensity, double peak_gflops, double bandwidth_gbps) {
    if (!(intensity >= 0)) throw std::invalid_argument("attainable_gflops: intensity must be >= 0");
    if (!(peak_gflops > 0) || !(bandwidth_gbps > 0))
        throw std::invalid_argument("attainable_gflops: both ceilings must be positive");
    // GB/s x FLOP/byte = GFLOP/s: the slanted roof, until the flat one.
    return std::min(peak_gflops, bandwidth_gbps * intensity);
}

long compute_bound_batch(const Config& c, Precision p, double context, double ridge) {
    if (!(context >= 1)) throw std::invalid_argument("compute_bound_batch: context must be at least 1");
    if (!(ridge > 0)) throw std::invalid_argument("compute_bound_batch: ridge must be positive");
    // One sequence: f FLOPs and b bytes, of which k are its K/V; W = b - k are the
    // shared weights. B sequences: intensity B f / (W + B k) >= R  <=>  B (f - R k) >= R W.
    const std::vector<Count> one = count_phase(c, {Phase::decode, p, 1, 0, context});
    const double f = sum(one, &Count::flops), b = sum(one, &Count::bytes);
    const double k = one[1].bytes + one[2].bytes, W = b - k;
    const double gain = f - ridge * k;  // what each extra sequence adds towards the ridge
    if (gain <= 0) return 0;            // the intensity levels off at f / k, below the ridge
    return std::max(1L, long(std::ceil(ridge * W / gain)));
}

}  // namespace pd::lab10
