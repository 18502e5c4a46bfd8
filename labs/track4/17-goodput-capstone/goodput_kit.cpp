#include "goodput_kit.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <random>

#include "common.hpp"
#include "serve/request_metrics.hpp"

namespace pd::lab17 {

StepShape last_step_shape(const pd::serve::Scheduler& s) {
    StepShape shape;
    for (const auto& item : s.last_batch()) {
        shape.rows += item.tokens;
        shape.pairs += attended_pairs(item.start, item.tokens);
    }
    return shape;
}

pd::serve::StepClock virtual_clock(const StepCostModel& cost) {
    return [cost](const pd::serve::Scheduler& s) {
        const StepShape shape = last_step_shape(s);
        return cost.step_ms(shape.rows, shape.pairs) / 1e3;
    };
}

StepCostModel PrecisionCosts::at(const std::string& precision) const {
    const pd::Precision p = pd::parse_precision(precision);
    StepCostModel c = f32;
    c.weights_ms *= weight_share[std::size_t(p.format)];
    return c;
}

PrecisionCosts precision_costs(const StepCostModel& f32, const pd::Weights& w) {
    PrecisionCosts costs{f32, {}};
    const double f32_bytes = double(pd::matmul_weight_bytes(w, pd::Precision::f32));
    for (const std::string& name : pd::format_names()) {
        const pd::Precision p = pd::parse_precision(name);
        costs.weight_share[std::size_t(p.format)] = double(pd::matmul_weight_bytes(w, p)) / f32_bytes;
    }
    return costs;
}

namespace {

// Least squares over the columns in `use` (1, rows, pairs): the normal
// equations, solved by Gaussian elimination. Unused coefficients are 0.
std::array<double, 3> least_squares(std::span<const StepTiming> steps, std::array<bool, 3> use) {
    auto x = [](const StepTiming& t, int k) { return k == 0 ? 1.0 : k == 1 ? double(t.shape.rows) : double(t.shape.pairs); };
    std::vector<int> cols;
    for (int k = 0; k < 3; k++)
        if (use[std::size_t(k)]) cols.push_back(k);
    const std::size_t n = cols.size();
    std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));  // (n, n + 1) [A^T A | A^T y]
    for (const StepTiming& t : steps)
        for (std::size_t i = 0; i < n; i++) {
            for (std::size_t j = 0; j < n; j++) a[i][j] += x(t, cols[i]) * x(t, cols[j]);
            a[i][n] += x(t, cols[i]) * t.ms;
        }
    for (std::size_t i = 0; i < n; i++) {
        std::size_t pivot = i;
        for (std::size_t r = i + 1; r < n; r++)
            if (std::abs(a[r][i]) > std::abs(a[pivot][i])) pivot = r;
        std::swap(a[i], a[pivot]);
        if (std::abs(a[i][i]) < 1e-300) continue;  // a column that never varies: its coefficient stays 0
        for (std::size_t r = 0; r < n; r++) {
            if (r == i) continue;
            const double f = a[r][i] / a[i][i];
            for (std::size_t c = i; c <= n; c++) a[r][c] -= f * a[i][c];
        }
    }
    std::array<double, 3> coef{0, 0, 0};
    for (std::size_t i = 0; i < n; i++)
        coef[std::size_t(cols[i])] = std::abs(a[i][i]) < 1e-300 ? 0 : a[i][n] / a[i][i];
    return coef;
}

}  // namespace

StepCostModel fit_cost(std::span<const StepTiming> steps) {
    if (steps.size() < 3) fail("calibration: {} timed steps cannot fit a step-cost model (need 3 or more)", steps.size());
    std::array<bool, 3> use{true, true, true};
    std::array<double, 3> c = least_squares(steps, use);
    for (int k : {2, 1})  // attention first: the smallest term, the first to drown in noise
        if (c[std::size_t(k)] < 0) use[std::size_t(k)] = false, c = least_squares(steps, use);
    if (!(c[0] > 0))
        fail("calibration: the fitted time of an empty step is {:.3g} ms, not > 0 (the machine was too busy to "
             "time; run again, or give --cost)", c[0]);
    return {c[0], c[1], c[2]};
}

StepCostModel parse_cost(const std::string& text) {
    const std::string usage = "--cost: give W,TOK,PAIR in ms, e.g. 6,0.06,0.00004 (or leave it out to calibrate)";
    double v[3];
    std::size_t at = 0;
    for (int i = 0; i < 3; i++) {
        const std::size_t end = i < 2 ? text.find(',', at) : text.size();
        if (end == std::string::npos) fail("\"{}\" has fewer than three numbers; {}", text, usage);
        const std::string part = text.substr(at, end - at);
        std::size_t used = 0;
        try {
            v[i] = std::stod(part, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (part.empty() || used != part.size() || !std::isfinite(v[i]) || v[i] < 0)
            fail("\"{}\" in \"{}\" is not a finite number >= 0; {}", part, text, usage);
        at = end + 1;
    }
    if (v[0] <= 0) fail("--cost: the weights' time W must be > 0 (every step reads them), got {}", v[0]);
    return {v[0], v[1], v[2]};
}

ServeConfig baseline_config(const MemoryCap& cap) {
    return {8, 512, 16, int(std::min<long long>(INT_MAX, cap.kv_positions / 16)), true, "f32", 0};
}

void check_config(const ServeConfig& c, const MemoryCap& cap, long long longest) {
    auto within = [](long long v, long long lo, long long hi, const char* name) {
        if (v < lo || v > hi) fail("the configuration's {} is {}: it must be in [{}, {}]", name, v, lo, hi);
    };
    within(c.max_seqs, 1, 256, "max_seqs");
    within(c.max_tokens_per_step, 1, 8192, "max_tokens_per_step");
    within(c.block_size, 1, 256, "block_size");
    within(c.kv_blocks, 1, INT_MAX, "kv_blocks");
    within(c.speculative_k, 0, 16, "speculative_k");
    const long long positions = (long long)c.kv_blocks * c.block_size;
    if (positions > cap.kv_positions)
        fail("the configuration's KV pool, kv_blocks {} x block_size {} = {} positions, is over the memory "
             "cap of {} positions: give at most {} blocks of {}",
             c.kv_blocks, c.block_size, positions, cap.kv_positions, cap.kv_positions / c.block_size,
             c.block_size);
    const long long needed = (longest + c.block_size - 1) / c.block_size;
    if (c.kv_blocks < needed)
        fail("the configuration's KV pool of {} blocks of {} cannot hold the longest request ({} positions, "
             "{} blocks) even alone: give at least {} blocks",
             c.kv_blocks, c.block_size, longest, needed, needed);
    try {
        pd::parse_precision(c.precision);
    } catch (const UserError& e) {
        fail("the configuration's precision: {}", e.what());
    }
}

namespace {

// Portable draws (the standard fixes mt19937_64's output, not its distributions').
double unit(std::mt19937_64& g) { return double(g() >> 11) * 0x1.0p-53; }

}  // namespace

pd::serve::Trace generate_family(const FamilySpec& f, int vocab) {
    if (!(f.calm_rate > 0 && f.burst_rate > 0 && std::isfinite(f.calm_rate) && std::isfinite(f.burst_rate)))
        fail("the trace's rates must be finite and > 0, got {} and {}", f.calm_rate, f.burst_rate);
    if (!(f.period_s > 0 && f.burst_s >= 0 && f.burst_s <= f.period_s))
        fail("a burst of {} s every {} s: give 0 <= burst <= period, period > 0", f.burst_s, f.period_s);
    pd::serve::TraceSpec spec;
    spec.num_requests = f.num_requests;
    spec.seed = f.seed;
    spec.prompt_len = pd::serve::parse_length_dist(f.prompt_len, "prompt lengths");
    spec.output_len = pd::serve::parse_length_dist(f.output_len, "output lengths");
    spec.shared_prefix_fraction = f.shared_prefix_fraction;
    spec.prefix_len = f.prefix_len;
    spec.prefix_groups = f.prefix_groups;
    spec.token_lo = std::min(3, vocab - 1);
    spec.token_hi = vocab;
    pd::serve::Trace trace = pd::serve::generate_trace(spec);
    // Arrivals: each gap is exponential at the rate of the phase the last
    // arrival fell in (a burst for the first burst_s of every period).
    std::mt19937_64 g(f.seed ^ 0x5bd1e995a1b2c3d4ull);
    double t = 0;
    for (auto& r : trace) {
        r.arrival_s = t;
        const double rate = std::fmod(t, f.period_s) < f.burst_s ? f.burst_rate : f.calm_rate;
        t += -std::log(1.0 - unit(g)) / rate;
    }
    return trace;
}

namespace {

LengthStats length_stats(std::vector<int> v) {
    LengthStats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (int x : v) sum += x;
    s.mean = sum / double(v.size());
    s.p50 = v[(v.size() - 1) / 2];
    s.p90 = v[(v.size() - 1) * 9 / 10];
    s.max = v.back();
    return s;
}

}  // namespace

TraceSummary summarize(const pd::serve::Trace& trace, std::span<const pd::serve::Request> reqs,
                       const FamilySpec& f) {
    TraceSummary s;
    s.num_requests = int(reqs.size());
    std::vector<double> arrivals;
    std::vector<int> prompts, outputs;
    int shared = 0;
    for (std::size_t i = 0; i < reqs.size(); i++) {
        arrivals.push_back(trace[i].arrival_s);
        prompts.push_back(int(reqs[i].prompt.size()));
        outputs.push_back(reqs[i].max_tokens);
        shared += trace[i].prefix_group >= 0;
    }
    std::sort(arrivals.begin(), arrivals.end());
    s.span_s = arrivals.empty() ? 0 : arrivals.back() - arrivals.front();
    s.mean_rate = s.span_s > 0 ? double(arrivals.size()) / s.span_s : 0;
    for (std::size_t i = 0, j = 0; j < arrivals.size(); j++) {  // [i, j]: arrivals within one second
        while (arrivals[j] - arrivals[i] >= 1.0) i++;
        s.peak_rate = std::max(s.peak_rate, double(j - i + 1));
    }
    s.prompt = length_stats(prompts);
    s.output = length_stats(outputs);
    s.shared_prefix_share = reqs.empty() ? 0 : double(shared) / double(reqs.size());
    s.prefix_len = shared > 0 ? f.prefix_len : 0;
    s.longest = pd::serve::longest_request(reqs);
    return s;
}

Score score(const pd::serve::ReplayResult& r, const Slo& slo) {
    Score s;
    std::vector<double> ttft, itl;
    for (const auto& t : r.timings) {
        if (!t.completed || t.token_s.empty()) continue;
        const pd::serve::RequestLatency l = pd::serve::request_latency(t);
        const double gap = l.itl_ms.empty() ? 0 : *std::max_element(l.itl_ms.begin(), l.itl_ms.end());
        ttft.push_back(l.ttft_ms);
        itl.insert(itl.end(), l.itl_ms.begin(), l.itl_ms.end());
        s.good += l.ttft_ms <= slo.ttft_ms && gap <= slo.itl_ms;
    }
    s.duration_s = r.duration_s;
    s.goodput = r.duration_s > 0 ? s.good / r.duration_s : 0;
    const auto t = pd::serve::summarize_metric(ttft), i = pd::serve::summarize_metric(itl);
    s.ttft_p50_ms = t.median, s.ttft_p99_ms = t.p99, s.itl_p50_ms = i.median, s.itl_p99_ms = i.p99;
    return s;
}

double token_agreement(const pd::serve::ReplayResult& r, const pd::serve::ReplayResult& f32) {
    long long same = 0, all = 0;
    for (std::size_t i = 0; i < f32.output_ids.size(); i++) {
        const std::vector<int>& want = f32.output_ids[i];
        all += (long long)want.size();
        if (i >= r.output_ids.size()) continue;
        const std::vector<int>& got = r.output_ids[i];
        for (std::size_t k = 0; k < std::min(want.size(), got.size()); k++) same += got[k] == want[k];
    }
    return all > 0 ? double(same) / double(all) : 1.0;
}

pd::serve::ReplayResult replay_on(pd::serve::ServingEngine& engine, pd::serve::StepPolicy& policy,
                                  const ServeConfig& cfg, const pd::serve::Trace& trace,
                                  std::span<const pd::serve::Request> reqs, const pd::serve::StepClock& clock,
                                  bool progress, ReplayTime* time) {
    pd::serve::SchedulerConfig sc;
    sc.limits = {cfg.max_seqs, cfg.max_tokens_per_step, false};
    sc.max_model_len = int(pd::serve::longest_request(reqs));  // every request's prompt and output fit
    sc.eos_ids = engine.config().eos_ids;
    sc.ignore_eos = true;
    sc.speculative.k = cfg.speculative_k;  // the requests are greedy: speculation keeps their tokens
    pd::serve::Scheduler s(engine, policy, std::move(sc));
    return pd::serve::replay(s, trace, reqs, progress, "", clock, time ? &time->now_s : nullptr);
}

}  // namespace pd::lab17
