// Lab 16 tests: your partition against a reference that indexes the full
// matrices element by element, the shards put back together, your reduction
// placement on made-up sublayers (summed at a barrier), your ring all-reduce
// against the sum and its messages counted, your ring cost against the
// formula, and the whole split model: R = 1, 2 and 4 ranks (threads of this
// process, summing with your ring) give the engine's greedy tokens, logits
// within atol + rtol * |engine's|. No MPI here: mpirun runs the program, which
// checks your ring against MPI_Allreduce, as lab16.mpi_*.
//   meson test -C build --suite track4-16
//   build/labs/track4/16-tensor-parallel/lab16_tests --test-case='lab16.shard.*'
// Prompts stay under kSmallM (16) rows: the matmul's small-M kernel is safe
// to call from several threads at once (oneDNN's prefill path shares a stream).
#include <algorithm>
#include <cmath>
#include <string>

#include "common.hpp"
#include "counting_comm.hpp"
#include "exercise.hpp"
#include "lab_test.hpp"
#include "load/model_source.hpp"
#include "show.hpp"
#include "thread_comm.hpp"
#include "tp_generate.hpp"

using namespace pd::lab16;
using pd::Config;
using pd::LayerWeights;
using pd::Matrix;
using pd::lab::Inputs;
using pd::lab::observe;

namespace {

// The smallest layer: one head of 2, dim 2, one hidden unit (for pd::lab::needs).
Config one_head() {
    Config c;
    c.n_heads = c.n_kv_heads = 1, c.head_dim = 2, c.dim = 2, c.hidden_dim = 1;
    return c;
}

// A Llama-family config whose KV heads `ranks` divides.
Config random_config(Inputs& in, int ranks) {
    Config c;
    c.n_kv_heads = ranks * in.integer(1, 3);
    c.n_heads = c.n_kv_heads * in.integer(1, 3);
    c.head_dim = 2 * in.integer(1, 4);
    c.dim = in.integer(4, 24);
    c.hidden_dim = ranks * in.integer(1, 6);
    return c;
}

// (out, in) with every float distinct: a misplaced one cannot match by chance.
Matrix numbered(int out, int in, float base, bool bias) {
    Matrix m{in, out, std::vector<float>(std::size_t(out) * in), {}};
    for (std::size_t i = 0; i < m.w.size(); i++) m.w[i] = base + float(i);
    if (bias)
        for (int o = 0; o < out; o++) m.bias.push_back(-base - float(o));
    return m;
}

LayerWeights numbered_layer(const Config& c, bool qkv_bias) {
    LayerWeights L;
    L.qkv = numbered(c.q_dim() + 2 * c.kv_dim(), c.dim, 1e5f, qkv_bias);
    L.attn_out = numbered(c.dim, c.q_dim(), 2e5f, false);
    L.mlp_in = numbered(2 * c.hidden_dim, c.dim, 3e5f, false);
    L.mlp_out = numbered(c.dim, c.hidden_dim, 4e5f, false);
    return L;
}

// The reference partition: which full row / column each shard row / column is.
int q_row(const Config& c, const ShardPlan& p, int i) { return p.q_first * c.head_dim + i; }
int k_row(const Config& c, const ShardPlan& p, int i) { return c.q_dim() + p.kv_first * c.head_dim + i; }
int v_row(const Config& c, const ShardPlan& p, int i) { return c.q_dim() + c.kv_dim() + p.kv_first * c.head_dim + i; }

// Checks that shard row r of `s` is full row `full_row` of `m`, bias included.
void check_row(const Matrix& s, int r, const Matrix& m, int full_row, const char* what) {
    bool same = true;
    for (int i = 0; i < m.in; i++) same = same && s.w[std::size_t(r) * m.in + i] == m.w[std::size_t(full_row) * m.in + i];
    if (!m.bias.empty()) same = same && s.bias.size() == std::size_t(s.out) && s.bias[std::size_t(r)] == m.bias[std::size_t(full_row)];
    CHECK_MESSAGE(same, what << ": shard row " << r << " should be the full matrix's row " << full_row
                             << " (with its bias, if any)");
}

// Checks that shard column j of `s` is full column `full_col` of `m`, in every row.
void check_column(const Matrix& s, int j, const Matrix& m, int full_col, const char* what) {
    bool same = true;
    for (int o = 0; o < m.out; o++)
        same = same && s.w[std::size_t(o) * s.in + j] == m.w[std::size_t(o) * m.in + full_col];
    CHECK_MESSAGE(same, what << ": shard column " << j << " should be the full matrix's column " << full_col);
}

bool has_shape(const Matrix& m, int out, int in) {
    return m.out == out && m.in == in && m.w.size() == std::size_t(out) * in;
}

}  // namespace

// ---- Task 1: plan_shard.

TEST_CASE("lab16.plan.hand_worked") {
    pd::lab::needs([] { plan_shard(one_head(), 1, 0); });
    Config c;  // the bundled tiny model's shape: 8 query heads on 2 KV heads, 688 hidden units
    c.n_heads = 8, c.n_kv_heads = 2, c.hidden_dim = 688, c.head_dim = 32, c.dim = 256;
    const ShardPlan p = plan_shard(c, 2, 1);
    observe("tiny, rank 1 of 2", std::vector<int>{p.kv_first, p.kv_heads, p.q_first, p.q_heads, p.hidden_first, p.hidden});
    CHECK_MESSAGE(p.kv_first == 1, "rank 1 of 2 owns the second KV head");
    CHECK(p.kv_heads == 1);
    CHECK_MESSAGE(p.q_first == 4, "the query heads of KV head 1 are 4..7 (4 query heads share a KV head)");
    CHECK(p.q_heads == 4);
    CHECK_MESSAGE(p.hidden_first == 344, "the second half of 688 hidden units");
    CHECK(p.hidden == 344);
    CHECK(p.ranks == 2);
    CHECK(p.rank == 1);
}

TEST_CASE("lab16.plan.random_configs") {
    pd::lab::needs([] { plan_shard(one_head(), 1, 0); });
    Inputs in(1);
    for (int trial = 0; trial < 200; trial++) {
        const int R = in.integer(1, 4);
        const Config c = random_config(in, R);
        int kv_next = 0, q_next = 0, h_next = 0;
        for (int r = 0; r < R; r++) {
            const ShardPlan p = plan_shard(c, R, r);
            observe(fmt::format("trial {} rank {}", trial, r),
                    std::vector<int>{p.kv_first, p.kv_heads, p.q_first, p.q_heads, p.hidden_first, p.hidden});
            INFO("heads " << c.n_heads << ", KV heads " << c.n_kv_heads << ", hidden " << c.hidden_dim << ", rank "
                          << r << " of " << R);
            CHECK_MESSAGE(p.kv_first == kv_next, "each rank's KV heads start where the previous rank's end");
            CHECK_MESSAGE(p.kv_heads == c.n_kv_heads / R, "every rank the same number of KV heads");
            CHECK_MESSAGE(p.q_first == p.kv_first * c.group_size(), "the query heads of the rank's own KV heads");
            CHECK_MESSAGE(p.q_heads == p.kv_heads * c.group_size(), "group_size() query heads per KV head");
            CHECK(p.q_first == q_next);
            CHECK(p.hidden_first == h_next);
            CHECK(p.hidden == c.hidden_dim / R);
            kv_next = p.kv_first + p.kv_heads, q_next = p.q_first + p.q_heads, h_next = p.hidden_first + p.hidden;
        }
        CHECK_MESSAGE(kv_next == c.n_kv_heads, "the ranks together cover every KV head");
        CHECK(q_next == c.n_heads);
        CHECK(h_next == c.hidden_dim);
    }
}

TEST_CASE("lab16.plan.refusals") {
    pd::lab::needs([] { plan_shard(one_head(), 1, 0); });
    Config c;
    c.n_heads = 8, c.n_kv_heads = 2, c.hidden_dim = 12, c.head_dim = 4, c.dim = 8;
    struct Bad {
        int ranks, rank;
        const char* names;
    };
    // 4 ranks over 2 KV heads: GQA caps the split at the KV heads.
    for (const Bad& b : {Bad{4, 0, "4"}, Bad{3, 0, "3"}, Bad{0, 0, "0"}, Bad{2, 2, "2"}, Bad{2, -1, "-1"}}) {
        INFO(b.ranks << " ranks, rank " << b.rank);
        CHECK_THROWS_AS(plan_shard(c, b.ranks, b.rank), pd::UserError);
        CHECK_THROWS_WITH(plan_shard(c, b.ranks, b.rank), doctest::Contains(b.names));
    }
    c.n_kv_heads = 8, c.hidden_dim = 12;
    CHECK_THROWS_WITH_AS(plan_shard(c, 8, 0), doctest::Contains("12"), pd::UserError);  // 8 does not divide 12
}

// ---- Task 2: shard_layer.

TEST_CASE("lab16.shard.rows_and_columns") {
    pd::lab::needs([] { shard_layer(one_head(), numbered_layer(one_head(), false), ShardPlan{}); });
    Inputs in(2);
    for (int trial = 0; trial < 40; trial++) {
        const int R = in.integer(1, 4);
        const Config c = random_config(in, R);
        const bool bias = in.integer(0, 1) == 1;
        const LayerWeights L = numbered_layer(c, bias);
        const int r = in.integer(0, R - 1), hd = c.head_dim;
        ShardPlan p;  // the plan written out, not plan_shard's: this test is about shard_layer alone
        p.ranks = R, p.rank = r, p.kv_heads = c.n_kv_heads / R, p.kv_first = r * p.kv_heads;
        p.q_heads = p.kv_heads * c.group_size(), p.q_first = p.kv_first * c.group_size();
        p.hidden = c.hidden_dim / R, p.hidden_first = r * p.hidden;
        const LayerShard s = shard_layer(c, L, p);
        INFO("heads " << c.n_heads << "/" << c.n_kv_heads << " of " << hd << ", dim " << c.dim << ", hidden "
                      << c.hidden_dim << ", rank " << r << " of " << R << (bias ? ", q/k/v bias" : ""));
        observe(fmt::format("trial {} qkv", trial), s.qkv.w);
        observe(fmt::format("trial {} attn_out", trial), s.attn_out.w);
        observe(fmt::format("trial {} mlp_in", trial), s.mlp_in.w);
        observe(fmt::format("trial {} mlp_out", trial), s.mlp_out.w);
        const int qw = p.q_heads * hd, kvw = p.kv_heads * hd;
        REQUIRE_MESSAGE(has_shape(s.qkv, qw + 2 * kvw, c.dim), "qkv: (q_heads*hd + 2*kv_heads*hd, dim)");
        REQUIRE_MESSAGE(has_shape(s.attn_out, c.dim, qw), "attn_out: (dim, q_heads*hd)");
        REQUIRE_MESSAGE(has_shape(s.mlp_in, 2 * p.hidden, c.dim), "mlp_in: (2*hidden, dim)");
        REQUIRE_MESSAGE(has_shape(s.mlp_out, c.dim, p.hidden), "mlp_out: (dim, hidden)");
        CHECK_MESSAGE(s.qkv.bias.size() == (bias ? std::size_t(s.qkv.out) : 0), "qkv's bias: one per row kept (none when the layer has none)");
        for (int i = 0; i < qw; i++) check_row(s.qkv, i, L.qkv, q_row(c, p, i), "qkv (q rows)");
        for (int i = 0; i < kvw; i++) check_row(s.qkv, qw + i, L.qkv, k_row(c, p, i), "qkv (k rows)");
        for (int i = 0; i < kvw; i++) check_row(s.qkv, qw + kvw + i, L.qkv, v_row(c, p, i), "qkv (v rows)");
        for (int j = 0; j < qw; j++) check_column(s.attn_out, j, L.attn_out, p.q_first * hd + j, "attn_out");
        for (int i = 0; i < p.hidden; i++) {
            check_row(s.mlp_in, i, L.mlp_in, p.hidden_first + i, "mlp_in (gate rows)");
            check_row(s.mlp_in, p.hidden + i, L.mlp_in, c.hidden_dim + p.hidden_first + i, "mlp_in (up rows)");
            check_column(s.mlp_out, i, L.mlp_out, p.hidden_first + i, "mlp_out");
        }
    }
}

TEST_CASE("lab16.shard.concatenated_gives_the_original") {
    pd::lab::needs([] { shard_layer(one_head(), numbered_layer(one_head(), false), ShardPlan{}); });
    Inputs in(3);
    for (int trial = 0; trial < 20; trial++) {
        const int R = in.integer(2, 4);
        const Config c = random_config(in, R);
        const LayerWeights L = numbered_layer(c, false);
        // Every weight of the layer, counted over all ranks' shards: each exactly once.
        std::vector<int> seen_qkv(L.qkv.w.size()), seen_out(L.attn_out.w.size()), seen_in(L.mlp_in.w.size()),
            seen_down(L.mlp_out.w.size());
        auto count = [](const Matrix& s, const Matrix& full, std::vector<int>& seen) {
            for (float v : s.w) {
                const long i = std::lround(v - full.w[0]);
                if (i >= 0 && std::size_t(i) < seen.size() && full.w[std::size_t(i)] == v) seen[std::size_t(i)]++;
            }
        };
        for (int r = 0; r < R; r++) {
            const LayerShard s = shard_layer(c, L, plan_shard(c, R, r));
            count(s.qkv, L.qkv, seen_qkv), count(s.attn_out, L.attn_out, seen_out);
            count(s.mlp_in, L.mlp_in, seen_in), count(s.mlp_out, L.mlp_out, seen_down);
        }
        INFO(R << " ranks; heads " << c.n_heads << "/" << c.n_kv_heads << ", hidden " << c.hidden_dim);
        auto once = [](const std::vector<int>& v) { return std::all_of(v.begin(), v.end(), [](int n) { return n == 1; }); };
        CHECK_MESSAGE(once(seen_qkv), "qkv: every weight on exactly one rank");
        CHECK_MESSAGE(once(seen_out), "attn_out: every weight on exactly one rank");
        CHECK_MESSAGE(once(seen_in), "mlp_in: every weight on exactly one rank");
        CHECK_MESSAGE(once(seen_down), "mlp_out: every weight on exactly one rank");
    }
}

// ---- Task 3: tp_layer, on made-up sublayers whose partial sums are known.

namespace {

// Rank r's "attention" gives partial = (r + 1) * x + r, its "mlp" partial = x^2 / (r + 2):
// the sums over ranks are known, and a sum taken at the wrong place changes x.
class MadeUp : public ShardSublayers {
public:
    MadeUp(int rank, std::size_t n) : rank_(rank), n_(n) {}
    void attention(const float* x, float* partial) override {
        for (std::size_t i = 0; i < n_; i++) partial[i] = float(rank_ + 1) * x[i] + float(rank_);
        calls += "a";
    }
    void mlp(const float* x, float* partial) override {
        for (std::size_t i = 0; i < n_; i++) partial[i] = x[i] * x[i] / float(rank_ + 2);
        calls += "m";
    }
    std::string calls;

private:
    int rank_;
    std::size_t n_;
};

// x after one layer: x += sum_r attention_r(x); x += sum_r mlp_r(x).
std::vector<float> expected_layer(std::vector<float> x, int R) {
    for (float& v : x) {
        float a = 0, m = 0;
        for (int r = 0; r < R; r++) a += float(r + 1) * v + float(r);
        v += a;
        for (int r = 0; r < R; r++) m += v * v / float(r + 2);
        v += m;
    }
    return x;
}

}  // namespace

TEST_CASE("lab16.layer.placement") {
    Inputs in(4);
    for (int R : {1, 2, 3, 4}) {
        const std::vector<float> x0 = in.normals(std::size_t(in.integer(1, 40)), 0.5f);
        const std::vector<float> want = expected_layer(x0, R);
        std::vector<std::vector<float>> got(static_cast<std::size_t>(R));
        std::vector<double> bytes(static_cast<std::size_t>(R));
        std::vector<std::string> calls(static_cast<std::size_t>(R));
        run_ranks(R, [&](ThreadComm& comm) {
            std::vector<float> x = x0, partial(x.size());
            MadeUp sub(comm.rank(), x.size());
            tp_layer(sub, comm, x, partial);
            got[std::size_t(comm.rank())] = x;
            bytes[std::size_t(comm.rank())] = comm.payload_bytes();
            calls[std::size_t(comm.rank())] = sub.calls;
        }, ThreadSum::reference);  // tp_layer alone: the kit's sum, not your ring
        observe(fmt::format("{} ranks x", R), got[0], {1e-5, 1e-5});
        INFO(R << " ranks, " << x0.size() << " values");
        CHECK_MESSAGE(calls[0] == "am", "attention first, then the MLP, once each; yours called " << calls[0]);
        for (int r = 0; r < R; r++) {
            bool near = got[std::size_t(r)].size() == want.size();
            for (std::size_t i = 0; near && i < want.size(); i++)
                near = std::abs(got[std::size_t(r)][i] - want[i]) <= 1e-5 + 1e-5 * std::abs(want[i]);
            CHECK_MESSAGE(near, "rank " << r << ": x after the layer is not x + sum attention, then + sum mlp "
                                        "(a sum missing, in the wrong place, or a residual lost?)");
        }
        CHECK_MESSAGE(bytes[0] == 2.0 * sizeof(float) * x0.size(),
                      "two all-reduces of x's size a layer, no more: yours moved " << bytes[0] << " bytes");
    }
}

// ---- Task 4: ring_allreduce, on R threads, every message counted.

namespace {

struct RingRank {
    std::vector<float> x;  // after the all-reduce
    long messages = 0, off_ring = 0;
    double sent_bytes = 0;
};

// YOUR ring_allreduce on inputs.size() ranks, rank r starting from inputs[r].
std::vector<RingRank> run_ring(const std::vector<std::vector<float>>& inputs) {
    std::vector<RingRank> out(inputs.size());
    run_ranks(int(inputs.size()), [&](ThreadComm& comm) {
        CountingComm counted(comm);
        RingRank& mine = out[std::size_t(comm.rank())];
        mine.x = inputs[std::size_t(comm.rank())];
        ring_allreduce(counted, mine.x);
        mine.messages = counted.messages, mine.off_ring = counted.off_ring, mine.sent_bytes = counted.sent_bytes;
    });
    return out;
}

// The lengths each rank count is tried on: empty, one value, shorter than R,
// just past R (chunks of unequal length), and a seeded odd length.
std::vector<std::size_t> ring_lengths(Inputs& in, int R) {
    return {0, 1, std::size_t(R - 1), std::size_t(R + 1), std::size_t(2 * in.integer(R, 150) + 1)};
}

// Runs every rank count and length with seeded values; check(R, inputs, ranks) judges each.
template <class Check>
void each_ring(Inputs& in, Check check) {
    pd::lab::needs([] { run_ring(std::vector<std::vector<float>>{std::vector<float>{1.0f}}); });
    for (int R : {1, 2, 3, 4})
        for (std::size_t n : ring_lengths(in, R)) {
            std::vector<std::vector<float>> inputs;
            for (int r = 0; r < R; r++) inputs.push_back(in.normals(n));
            INFO(R << " ranks, " << n << " values each");
            check(R, inputs, run_ring(inputs));
        }
}

}  // namespace

TEST_CASE("lab16.ring.sums") {
    Inputs in(8);
    each_ring(in, [](int R, const std::vector<std::vector<float>>& inputs, const std::vector<RingRank>& got) {
        const std::size_t n = inputs[0].size();
        // The sum MPI_Allreduce computes, in double. The ring adds each value's
        // R terms in its own order, in float: each of its R - 1 additions may
        // round by 2^-24 of the running sum, so the two may differ by up to
        // about (R - 1) 6e-8 sum |terms|; 1e-6 sum |terms| allows for that,
        // and a value left out or added twice is far outside it.
        bool near = true;
        for (std::size_t i = 0; i < n; i++) {
            double want = 0, size = 0;
            for (const auto& x : inputs) want += x[i], size += std::abs(x[i]);
            near = near && got[0].x.size() == n && std::abs(got[0].x[i] - want) <= 1e-6 * size;
        }
        observe(fmt::format("{} ranks, {} values: rank 0's sums", R, n), got[0].x, {1e-5, 1e-5});
        CHECK_MESSAGE(near, "rank 0's result is not the element-wise sum over the ranks");
        // Every rank must end with the same bits, or the ranks' greedy tokens could part.
        for (int r = 1; r < R; r++)
            CHECK_MESSAGE(got[std::size_t(r)].x == got[0].x, "rank " << r << " ended with other values than rank 0 "
                                                             "(each chunk's sum must reach every rank as its owner made it)");
    });
}

TEST_CASE("lab16.ring.messages") {
    Inputs in(9);
    each_ring(in, [](int R, const std::vector<std::vector<float>>& inputs, const std::vector<RingRank>& got) {
        const std::size_t n = inputs[0].size(), longest = (n + std::size_t(R) - 1) / std::size_t(R);
        double total = 0;
        for (int r = 0; r < R; r++) {
            const RingRank& k = got[std::size_t(r)];
            INFO("rank " << r);
            observe(fmt::format("{} ranks, {} values: rank {}'s messages", R, n, r), k.messages);
            CHECK_MESSAGE(k.messages == 2 * (R - 1), "R - 1 steps of reduce-scatter and R - 1 of all-gather, one "
                                                     "send_recv each: " << 2 * (R - 1) << "; yours " << k.messages);
            CHECK_MESSAGE(k.off_ring == 0, k.off_ring << " messages went to or came from a rank that is not a "
                                                         "neighbour in the ring (r + 1 or r - 1, mod R)");
            // Each message one chunk: at most 2 (R - 1) chunks of the longest length, ceil(n / R).
            CHECK_MESSAGE(k.sent_bytes <= 2.0 * (R - 1) * double(longest * sizeof(float)),
                          "sent " << k.sent_bytes << " bytes: more than 2 (R - 1) chunks of ceil(n / R) floats");
            total += k.sent_bytes;
        }
        // Every step the ranks pass R different chunks, all of x once: 2 (R - 1) n floats in all.
        observe(fmt::format("{} ranks, {} values: bytes sent", R, n), total);
        CHECK_MESSAGE(total == 2.0 * (R - 1) * double(n * sizeof(float)),
                      "the ranks sent " << total << " bytes in all; a ring sends 2 (R - 1) n floats, "
                                        << 2.0 * (R - 1) * double(n * sizeof(float)) << " bytes");
    });
}

// ---- Task 5: ring_cost.

TEST_CASE("lab16.cost.ring_cost") {
    pd::lab::needs([] { ring_cost(1, 1, 1, 0); });
    struct Case {
        double bytes;
        int ranks;
        double gbps, latency_us, wire, ms;
    };
    // 1 MB over 2 ranks: 1 MB each way, 8 Mbit at 100 Gb/s = 0.08 ms, plus 2 steps of 5 us; 4 ranks: 1.5 MB
    // in 6 steps; 1 rank: nothing.
    for (const Case& k : {Case{1e6, 2, 100, 5, 1e6, 0.09}, Case{1e6, 4, 100, 0, 1.5e6, 0.12},
                          Case{1e6, 1, 10, 7, 0, 0}, Case{4096, 8, 10, 2, 7168, 0.0337344}}) {
        const AllreduceCost a = ring_cost(k.bytes, k.ranks, k.gbps, k.latency_us);
        observe(fmt::format("{} bytes, {} ranks, {} Gb/s, {} us", k.bytes, k.ranks, k.gbps, k.latency_us),
                std::vector<double>{a.wire_bytes, a.ms}, {1e-9, 1e-9});
        INFO(k.bytes << " bytes over " << k.ranks << " ranks at " << k.gbps << " Gb/s, " << k.latency_us << " us");
        CHECK(a.wire_bytes == doctest::Approx(k.wire));
        CHECK(a.ms == doctest::Approx(k.ms));
    }
    Inputs in(5);
    for (int t = 0; t < 100; t++) {
        const double bytes = in.uniform(0, 1e9), gbps = in.uniform(0.1, 800), us = in.uniform(0, 50);
        const int R = in.integer(1, 64);
        const AllreduceCost a = ring_cost(bytes, R, gbps, us);
        observe(fmt::format("random {}", t), std::vector<double>{a.wire_bytes, a.ms}, {1e-9, 1e-9});
        CHECK(a.wire_bytes == doctest::Approx(2.0 * (R - 1) / R * bytes));
        CHECK(a.ms == doctest::Approx(2.0 * (R - 1) / R * bytes * 8 / gbps / 1e6 + 2.0 * (R - 1) * us / 1e3));
    }
    for (double bad : {-1.0, double(NAN)}) CHECK_THROWS_AS(ring_cost(bad, 2, 10, 0), pd::UserError);
    CHECK_THROWS_WITH_AS(ring_cost(1, 0, 10, 0), doctest::Contains("0"), pd::UserError);
    CHECK_THROWS_WITH_AS(ring_cost(1, 2, -3, 0), doctest::Contains("-3"), pd::UserError);
    CHECK_THROWS_AS(ring_cost(1, 2, NAN, 0), pd::UserError);
    CHECK_THROWS_WITH_AS(ring_cost(1, 2, 10, -4), doctest::Contains("-4"), pd::UserError);
    CHECK_THROWS_AS(ring_cost(1, 2, 10, NAN), pd::UserError);
}

// ---- The whole split model against the engine.

namespace {

struct Split {
    std::vector<int> tokens;
    std::vector<float> first_logits;
};

// The model on R ranks (threads): every rank's tokens, rank 0's first logits.
Split run_split(std::shared_ptr<const pd::Model> model, int R, const std::vector<int>& prompt, int n_new) {
    std::vector<TpRank> ranks;  // built here, outside the threads: a refusal is one exception, not R
    for (int r = 0; r < R; r++) ranks.push_back(make_tp_rank(model, R, r, int(prompt.size()) + n_new));
    std::vector<TpRun> runs(static_cast<std::size_t>(R));
    run_ranks(R, [&](ThreadComm& comm) {
        runs[std::size_t(comm.rank())] = tp_generate(ranks[std::size_t(comm.rank())], comm, prompt, n_new);
    });
    for (int r = 1; r < R; r++)
        CHECK_MESSAGE(runs[std::size_t(r)].tokens == runs[0].tokens, "rank " << r << " generated other tokens than rank 0");
    return {runs[0].tokens, runs[0].first_logits};
}

void check_against_engine(const std::string& spec, Inputs& in, std::initializer_list<int> rank_counts) {
    auto model = pd::load_model(spec, pd::Precision::f32, false).model;
    const std::vector<int> prompt = in.tokens(in.integer(1, 12), model->config.vocab_size);
    const int n_new = 6;
    std::vector<float> want_logits;
    const std::vector<int> want = engine_greedy(model, prompt, n_new, &want_logits);
    for (int R : rank_counts) {
        const Split got = run_split(model, R, prompt, n_new);
        INFO(spec << " on " << R << " ranks, a prompt of " << prompt.size() << " tokens");
        observe(fmt::format("{} ranks tokens", R), got.tokens);
        CHECK_MESSAGE(got.tokens == want, "greedy tokens differ from the engine's: engine "
                                              << pd::lab::show(want) << ", split " << pd::lab::show(got.tokens));
        double worst = 0;
        bool near = got.first_logits.size() == want_logits.size();
        for (std::size_t i = 0; near && i < want_logits.size(); i++) {
            const double err = std::abs(got.first_logits[i] - want_logits[i]);
            near = err <= 1e-3 + 1e-3 * std::abs(want_logits[i]);
            worst = std::max(worst, err);
        }
        CHECK_MESSAGE(near, "the prefill's logits differ from the engine's beyond 1e-3 + 1e-3 |engine| (worst "
                                << worst << ")");
    }
}

}  // namespace

TEST_CASE("lab16.tokens.synthetic_1_2_4_ranks") {
    pd::lab::needs([] { plan_shard(one_head(), 1, 0); });
    Inputs in(6);
    // A hidden seed makes other weights: synthetic's seed key.
    const std::string spec = fmt::format("synthetic:llama,dim=64,ffn=96,layers=2,heads=8,kv_heads=4,head_dim=16,"
                                         "vocab=211,ctx=64,seed={}", in.integer(1, 1 << 20));
    check_against_engine(spec, in, {1, 2, 4});
}

TEST_CASE("lab16.tokens.tiny_2_ranks") {
    pd::lab::needs([] { plan_shard(one_head(), 1, 0); });
    Inputs in(7);
    check_against_engine("tiny", in, {2});
}

TEST_CASE("lab16.seed.other_seed_other_inputs") {
    Inputs a(1, 0), b(1, 1);
    bool differ = false;
    for (int t = 0; t < 10; t++) {
        const Config ca = random_config(a, 2), cb = random_config(b, 2);
        differ = differ || ca.n_heads != cb.n_heads || ca.dim != cb.dim || ca.hidden_dim != cb.hidden_dim;
    }
    CHECK_MESSAGE(differ, "PDLAB_TEST_SEED must change the random configs");
}
