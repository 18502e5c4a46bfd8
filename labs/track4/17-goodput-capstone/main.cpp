// Lab 17: the capstone, goodput under SLOs.
//
//   [1] the trace: one of the family (Poisson arrivals with bursts, mixed
//       prompt lengths, shared prefixes), seeded; its summary
//   [2] the step-cost model: the virtual clock every replay is timed on,
//       from --cost, or calibrated on this machine by a short timed replay
//   [3] your configuration (choose_config), checked against the memory cap
//   [4] the replays, through the real paged engine and the kit's Scheduler on
//       the virtual clock: yours (GoodputPolicy, your configuration, the model
//       at your precision) and the baseline's (ContinuousBatching, the default
//       configuration, f32); goodput, the ratio, TTFT and ITL percentiles
//   [5] the tokens: your schedule at f32 must give every request the
//       baseline's tokens (a scheduler decides WHEN, never WHICH), and your
//       precision's agreement with them must reach the quality floor
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"
#include "common.hpp"
#include "exercise.hpp"
#include "goodput_kit.hpp"
#include "lab_main.hpp"
#include "load/model_source.hpp"
#include "serve/paged_serving_engine.hpp"

using namespace pd;
using nlohmann::json;

namespace {

constexpr const char* kDefaultModel =
    "synthetic:llama,dim=256,ffn=768,layers=4,heads=4,kv_heads=2,vocab=4096,ctx=1024";

struct Options {
    cli::CommonOptions lab;
    lab17::FamilySpec family;
    lab17::Slo slo;
    std::string cost = "calibrate";
    int calibration_requests = 24;
    bool quiet = false;
};

// The paged engine over `model` (loaded at `cfg`'s precision) with `cfg`'s memory.
std::unique_ptr<serve::PagedServingEngine> make_engine(const std::shared_ptr<const Model>& model, const Options& o,
                                                       const lab17::ServeConfig& cfg) {
    serve::PagedOptions po;
    po.block_size = cfg.block_size;
    po.total_blocks = cfg.kv_blocks;
    po.prefix_caching = cfg.prefix_caching;
    po.threads = o.lab.threads;
    return serve::make_paged_serving_engine(model, po);
}

// The model at `cfg`'s precision: the session's f32 one, or --model loaded again.
std::shared_ptr<const Model> model_at(const cli::Session& s, const Options& o, const lab17::ServeConfig& cfg) {
    const Precision p = parse_precision(cfg.precision);
    return p == Precision::f32 ? s.loaded.model : load_model(o.lab.model, p, false).model;
}

// [2] The cost model: --cost, or least squares over the steps of the
// baseline on the trace's first requests, each step timed on the wall clock.
lab17::StepCostModel cost_model(const cli::Session& s, const Options& o, const serve::Trace& trace,
                                const std::vector<serve::Request>& reqs, const lab17::MemoryCap& cap) {
    if (o.cost != "calibrate") return lab17::parse_cost(o.cost);
    const std::size_t n = std::min(reqs.size(), std::size_t(o.calibration_requests));
    const serve::Trace head(trace.begin(), trace.begin() + long(n));
    const std::vector<serve::Request> head_reqs(reqs.begin(), reqs.begin() + long(n));
    const lab17::ServeConfig cfg = lab17::baseline_config(cap);
    auto engine = make_engine(s.loaded.model, o, cfg);
    serve::ContinuousBatching policy;
    std::vector<lab17::StepTiming> steps;
    double last = now_ms();
    auto timed = [&](const serve::Scheduler& done) {
        const double now = now_ms(), ms = now - last;
        last = now;
        steps.push_back({lab17::last_step_shape(done), ms});
        return ms / 1e3;
    };
    lab17::replay_on(*engine, policy, cfg, head, head_reqs, timed, false);
    return lab17::fit_cost(steps);
}

struct Run {
    serve::ReplayResult r;
    lab17::Score score;
};

Run run_policy(const std::shared_ptr<const Model>& model, const Options& o, serve::StepPolicy& policy,
               const lab17::ServeConfig& cfg, const serve::Trace& trace, const std::vector<serve::Request>& reqs,
               const lab17::StepCostModel& cost, lab17::ReplayTime* time) {
    auto engine = make_engine(model, o, cfg);
    Run run;
    run.r = lab17::replay_on(*engine, policy, cfg, trace, reqs, lab17::virtual_clock(cost), !o.quiet, time);
    run.score = lab17::score(run.r, o.slo);
    return run;
}

json config_json(const lab17::ServeConfig& c) {
    return {{"max_seqs", c.max_seqs}, {"max_tokens_per_step", c.max_tokens_per_step},
            {"block_size", c.block_size}, {"kv_blocks", c.kv_blocks}, {"prefix_caching", c.prefix_caching},
            {"precision", c.precision}, {"speculative_k", c.speculative_k}};
}

json run_json(const Run& run, const lab17::ServeConfig& cfg) {
    const lab17::Score& sc = run.score;
    return {{"goodput", sc.goodput}, {"good", sc.good}, {"duration_s", sc.duration_s},
            {"ttft_p50_ms", sc.ttft_p50_ms}, {"ttft_p99_ms", sc.ttft_p99_ms},
            {"itl_p50_ms", sc.itl_p50_ms}, {"itl_p99_ms", sc.itl_p99_ms},
            {"steps", run.r.steps}, {"preemptions", run.r.preemptions}, {"wall_s", run.r.wall_s},
            {"config", config_json(cfg)}};
}

void print_run(const char* name, const Run& run, std::size_t n) {
    const lab17::Score& sc = run.score;
    std::printf("  %-9s %8.3f %5d/%-4zu %8.0f %8.0f %7.1f %7.1f %6lld %6lld %8.1f %10.3f\n", name, sc.goodput, sc.good, n,
                sc.ttft_p50_ms, sc.ttft_p99_ms, sc.itl_p50_ms, sc.itl_p99_ms, run.r.steps, run.r.preemptions,
                sc.duration_s, run.r.wall_s > 0 ? sc.good / run.r.wall_s : 0.0);
}

void print_summary(const lab17::TraceSummary& t) {
    std::printf("  %d requests over %.1f s: mean %.2f req/s, peak %.0f in one second\n", t.num_requests, t.span_s,
                t.mean_rate, t.peak_rate);
    std::printf("  prompt tokens  mean %.0f, p50 %d, p90 %d, max %d\n", t.prompt.mean, t.prompt.p50, t.prompt.p90,
                t.prompt.max);
    std::printf("  output tokens  mean %.0f, p50 %d, p90 %d, max %d\n", t.output.mean, t.output.p50, t.output.p90,
                t.output.max);
    std::printf("  %.0f%% start with one of the shared prefixes of %d tokens; longest request %lld positions\n",
                100 * t.shared_prefix_share, t.prefix_len, t.longest);
}

int run(Options& o) {
    // The grade is on the virtual clock, so a GPU would change no score; the
    // tokens check's exactness is established for the CPU's f32 kernels only.
    if (o.lab.device != "cpu")
        fail("--device {}: this lab's replays run the paged engine on the CPU only (the score is on a "
             "virtual clock, so a GPU would not change it)", o.lab.device);
    if (o.lab.precision != "f32" || o.lab.group_size != cli::CommonOptions{}.group_size)
        fail("--precision {} --group-size {}: in this lab the precision is part of your configuration "
             "(ServeConfig::precision, set in choose_config; int8 and int4 in groups of 64) and the "
             "baseline runs f32: leave both options out", o.lab.precision, o.lab.group_size);
    const lab17::MemoryCap cap;
    cli::Session s = cli::load_session(o.lab);
    const int vocab = s.loaded.model->config.vocab_size;
    const serve::Trace trace = lab17::generate_family(o.family, vocab);
    const auto reqs = serve::trace_requests(trace, s.loaded.tokenizer, vocab, s.loaded.model->config.max_seq_len);
    const lab17::TraceSummary summary = lab17::summarize(trace, reqs, o.family);
    std::printf("Lab 17: goodput under SLOs\nmodel    %s\nSLOs     TTFT <= %.0f ms and every inter-token gap <= %.0f ms\n",
                o.lab.model.c_str(), o.slo.ttft_ms, o.slo.itl_ms);
    std::printf("\n[1] the trace (family seed %llu)\n", (unsigned long long)o.family.seed);
    print_summary(summary);

    const lab17::StepCostModel cost = cost_model(s, o, trace, reqs, cap);
    const lab17::PrecisionCosts costs = lab17::precision_costs(cost, s.loaded.model->w);
    std::printf("\n[2] the virtual clock (%s): a step costs %.3f ms + %.4f ms a row + %.3g ms an attended pair\n",
                o.cost == "calibrate" ? "calibrated here on a short timed replay, f32" : "--cost, f32",
                cost.weights_ms, cost.per_token_ms, cost.per_pair_ms);
    std::printf("  the weights' %.3f ms scale with their bytes: bf16 x%.3f, int8 x%.3f, int4 x%.3f\n", cost.weights_ms,
                costs.weight_share[1], costs.weight_share[2], costs.weight_share[3]);

    const lab17::ServeConfig mine = lab17::choose_config(summary, o.slo, costs, cap);
    lab17::check_config(mine, cap, summary.longest);
    const lab17::ServeConfig base = lab17::baseline_config(cap);
    std::printf("\n[3] configurations (memory cap %lld positions)\n", cap.kv_positions);
    for (const auto& [name, c] : {std::pair{"yours", mine}, std::pair{"baseline", base}})
        std::printf("  %-9s max_seqs %d, %d tokens a step, %d blocks of %d, prefix caching %s, %s, %s\n", name,
                    c.max_seqs, c.max_tokens_per_step, c.kv_blocks, c.block_size, c.prefix_caching ? "on" : "off",
                    c.precision.c_str(),
                    c.speculative_k ? fmt::format("up to {} proposed tokens a decode row", c.speculative_k).c_str()
                                    : "no speculation");

    const lab17::StepCostModel my_cost = costs.at(mine.precision);
    lab17::ReplayTime time;
    lab17::GoodputPolicy policy(o.slo, my_cost, time);
    serve::ContinuousBatching baseline_policy;
    Run yours = run_policy(model_at(s, o, mine), o, policy, mine, trace, reqs, my_cost, &time);
    const Run baseline = run_policy(s.loaded.model, o, baseline_policy, base, trace, reqs, costs.f32, nullptr);
    const double agreement = lab17::token_agreement(yours.r, baseline.r);
    const bool below_floor = agreement < lab17::kAgreementFloor;
    if (below_floor) yours.score.goodput = 0;
    const double ratio = baseline.score.goodput > 0 ? yours.score.goodput / baseline.score.goodput : 0;
    std::printf("\n[4] replays on the virtual clock (every token computed by the engine)\n");
    std::printf("            goodput  good/all  TTFT p50  TTFT p99 ITL p50 ITL p99  steps preempt  virtual   good/wall\n");
    std::printf("              req/s                 ms        ms      ms      ms                    s         req/s\n");
    print_run("yours", yours, reqs.size());
    print_run("baseline", baseline, reqs.size());
    std::printf("  yours / baseline goodput: x%.3f%s\n", ratio, below_floor ? " (yours counts 0: under the quality floor)" : "");
    std::printf("  good/wall: the same good requests over this run's wall time, for information only: it also\n"
                "  paid for the real forward passes and whatever else ran on this machine\n");

    // [5] In f32 a row's products do not depend on its batch-mates, so your
    // schedule at f32 must give the baseline's tokens; other precisions round
    // by batch size (lab 06), so theirs are compared, not required equal.
    std::printf("\n[5] the tokens\n");
    Run f32_schedule;
    if (parse_precision(mine.precision) != Precision::f32) {
        lab17::ReplayTime check_time;
        lab17::GoodputPolicy check_policy(o.slo, my_cost, check_time);
        f32_schedule = run_policy(s.loaded.model, o, check_policy, mine, trace, reqs, my_cost, &check_time);
    }
    const serve::ReplayResult& at_f32 = f32_schedule.r.steps > 0 ? f32_schedule.r : yours.r;
    std::size_t same = 0;
    for (std::size_t i = 0; i < reqs.size(); i++) same += at_f32.output_ids[i] == baseline.r.output_ids[i];
    const bool tokens_ok = same == reqs.size();
    std::printf("  your schedule at f32 gave the baseline's tokens to %zu of %zu requests%s\n", same, reqs.size(),
                tokens_ok ? " (ok)" : " (CHECK FAILED: a request got other tokens)");
    std::printf("  %s agrees with f32 on %.1f%% of the output tokens (quality floor %.0f%%)%s\n",
                mine.precision.c_str(), 100 * agreement, 100 * lab17::kAgreementFloor,
                below_floor ? ": UNDER THE FLOOR, your goodput counts 0" : ": ok");

    json j;
    j["model"] = o.lab.model;
    j["seed"] = o.family.seed;
    j["slo"] = {{"ttft_ms", o.slo.ttft_ms}, {"itl_ms", o.slo.itl_ms}};
    j["cost"] = {{"weights_ms", cost.weights_ms}, {"per_token_ms", cost.per_token_ms}, {"per_pair_ms", cost.per_pair_ms},
                 {"calibrated", o.cost == "calibrate"}};
    j["yours"] = run_json(yours, mine);
    j["baseline"] = run_json(baseline, base);
    j["agreement"] = agreement;
    j["agreement_floor"] = lab17::kAgreementFloor;
    j["goodput"] = yours.score.goodput;
    j["baseline_goodput"] = baseline.score.goodput;
    j["goodput_ratio"] = ratio;
    j["same_tokens"] = tokens_ok;
    lab::write_lab_json(o.lab, j);
    return lab::finish(tokens_ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.lab.model = kDefaultModel;
    lab::CommandLine cl(
        "Lab 17: the capstone. Serve a bursty trace with shared prefixes through the kit's paged\n"
        "engine and Scheduler with YOUR configuration (choose_config) and YOUR step policy\n"
        "(GoodputPolicy), and score GOODPUT: requests per second whose first token came within\n"
        "--ttft-ms and whose every inter-token gap stayed within --itl-ms. Every token is computed\n"
        "by the engine (so both runs must give the same tokens), but time is a virtual clock: a step\n"
        "costs W + rows*TOK + attended pairs*PAIR ms, calibrated here (default) or fixed by --cost,\n"
        "so your goodput against the baseline's (ContinuousBatching, default configuration) does not\n"
        "depend on what else this machine runs. Your configuration also picks the weights' precision:\n"
        "a step's W scales with their bytes, and the tokens change; under the quality floor (the share\n"
        "of f32's output tokens yours agree with) your goodput counts 0. The grader uses a fixed --cost\n"
        "and a hidden --seed.",
        "17-goodput-capstone");
    cl.common(o.lab);
    cl.option("--seed", o.family.seed, "seed of the trace (the grader's is hidden)").show_default();
    cl.option("--num-requests", o.family.num_requests, "requests in the trace").range(1, 100000).show_default();
    cl.option("--ttft-ms", o.slo.ttft_ms, "the TTFT objective (ms)").range(1e-3, 1e9).show_default();
    cl.option("--itl-ms", o.slo.itl_ms, "the inter-token objective: the longest gap allowed (ms)")
        .range(1e-3, 1e9).show_default();
    cl.option("--cost", o.cost,
              "the step-cost model W,TOK,PAIR in ms (e.g. 6,0.06,0.00004), or 'calibrate': fit it to the "
              "steps of a short timed replay of the trace's first requests on this machine").show_default();
    cl.flag("--quiet", o.quiet, "no progress lines on stderr");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
