// Lab 03: the KV cache and grouped-query attention.
//   1. Which KV head serves each query head (your kv_head_for_query).
//   2. MHA vs GQA vs MQA: cache bytes per token and at a context length (your kv_cache_bytes).
//   3. The cache growing one position per token in every layer, rebuilt by your append_kv/commit_kv.
//   4. Your attend_one_head against the engine's attention on the real cache.
//   5. Decode step time at several cache lengths.
//   6. The same tokens with and without the cache, both timed.
// One function per section. Sections 3 and 4 run the engine's CPU copy of the
// model (host_model()) to look inside the cache, and say so; sections 5 and 6
// run through the Engine, on whatever --device chose.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "exercise.hpp"
#include "engine/generate.hpp"
#include "lab03.hpp"
#include "lab_main.hpp"
#include "print.hpp"
#include "base/timing.hpp"

using namespace pd;
using namespace pd::lab03;
using lab::human_bytes;
using lab::text_of;

namespace {

std::vector<int> parse_lengths(const std::string& s) {
    std::vector<int> out;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
        try {
            std::size_t used = 0;
            int v = std::stoi(part, &used);
            if (used != part.size() || v < 1) throw std::invalid_argument(part);
            out.push_back(v);
        } catch (const std::exception&) {
            fail("--lengths takes positive integers separated by commas, e.g. 16,128,512; got \"{}\"", s);
        }
    }
    if (out.empty()) fail("--lengths is empty");
    return out;
}

// The prompt's ids repeated until there are n of them.
std::vector<int> tokens_of_length(const std::vector<int>& ids, int n) {
    std::vector<int> out;
    while (int(out.size()) < n) out.insert(out.end(), ids.begin(), ids.end());
    out.resize(std::size_t(n));
    return out;
}

constexpr int kWarmSteps = 2;  // decode steps run before timing at each length

// Section 5's row at one cache length: warm-up steps, then --reps timed steps.
nlohmann::json time_at_length(Lab& lab, const std::vector<int>& ids, int asked, int max_len, bool& noisy) {
    Engine& engine = lab.engine;
    const int len = std::min(asked, max_len);
    int slot = 0, t = ids[0];
    engine.reset(0);
    engine.prefill(0, tokens_of_length(ids, len));
    for (int i = 0; i < kWarmSteps; i++) engine.decode({&slot, 1}, {&t, 1});
    std::vector<double> ms;
    const int at = engine.cache_len(0);
    for (int i = 0; i < lab.o.reps; i++) ms.push_back(engine.time_ms([&] { engine.decode({&slot, 1}, {&t, 1}); }));
    Stats sm = summarize(ms);
    noisy = noisy || sm.stdev > 0.3 * sm.median;
    const double kv_read = double(lab.c.kv_elems_per_token()) * 4.0 * (at + lab.o.reps / 2.0);
    const double weight_bytes = double(matmul_weight_bytes(lab.m.w));
    std::string label = len == asked ? fmt::format("{}", at) : fmt::format("{} (asked {})", at, asked);
    std::printf("   %-22s %14.3f %20s %20s %8.1f%%\n", label.c_str(), sm.median, human_bytes(kv_read).c_str(),
                human_bytes(weight_bytes).c_str(), 100.0 * kv_read / (kv_read + weight_bytes));
    return {{"cache_len", at}, {"step_ms_median", sm.median}, {"step_ms_stdev", sm.stdev}, {"kv_bytes_read", kv_read}};
}

// ---- 5. Step time against cache length, through the engine (on --device).
void section_step_time(Lab& lab, const std::vector<int>& ids, const std::vector<int>& lengths) {
    std::printf("5. Decode step time as the cache grows (engine on %s; median of %d steps after %d warm-up steps)\n",
                device_name(lab.engine.device()), lab.o.reps, kWarmSteps);
    std::printf("   %-22s %14s %20s %20s %9s\n", "cache length", "step ms", "KV bytes read/step", "weight bytes/step",
                "KV share");
    const int max_len = lab.engine.max_seq() - kWarmSteps - lab.o.reps;
    if (max_len < 1) fail("the context of {} is too short for --reps {}", lab.engine.max_seq(), lab.o.reps);
    nlohmann::json jt = nlohmann::json::array();
    bool noisy = false;
    for (int L : lengths) jt.push_back(time_at_length(lab, ids, L, max_len, noisy));
    std::printf("   Each step streams all the weights once and reads every cached position. The cache part grows\n"
                "   linearly with its length; whether you can see it depends on its share of the bytes.\n");
    if (noisy)
        std::printf("   These timings are noisy (stdev above 30%% of the median): other programs may be using the\n"
                    "   cores. Try --threads 1 and more --reps.\n");
    std::printf("\n");
    lab.js["step_time_vs_cache"] = jt;
}

// ---- 6. With and without the cache, through the engine's generate().
void section_use_cache(Lab& lab, const Growth& g) {
    const int steps = lab.o.steps;
    GenerateOptions opt;
    opt.max_new_tokens = steps;
    opt.stop_at_eos = false;
    generate(lab.engine, g.ids, opt);  // warm-up
    GenerateResult with = generate(lab.engine, g.ids, opt);
    opt.use_cache = false;
    GenerateResult without = generate(lab.engine, g.ids, opt);
    double tw = 0, tn = 0;
    long work_with = 0, work_without = 0;
    for (auto& r : with.trace) tw += r.ms, work_with += r.tokens_in;
    for (auto& r : without.trace) tn += r.ms, work_without += r.tokens_in;
    const bool same = with.generated_ids == without.generated_ids && with.generated_ids == g.out_ids;
    lab.all_ok = lab.all_ok && same;
    std::printf("6. The same %d tokens with and without the cache (greedy, engine on %s)\n", steps,
                device_name(lab.engine.device()));
    std::printf("   with the cache:    %9.3f ms model time, %4ld tokens through the model (P + %d decode steps)\n", tw,
                work_with, steps - 1);
    std::printf("   without the cache: %9.3f ms model time, %4ld tokens through the model (P, P+1, ... each step)\n",
                tn, work_without);
    std::printf("   identical tokens: %s; going without cost %.1fx the time. Text: \"%s\"\n\n", same ? "yes" : "NO",
                tn / std::max(tw, 1e-9), text_of(lab.tok, with.generated_ids).c_str());
    lab.js["use_cache"] = {{"with_ms", tw}, {"without_ms", tn}, {"tokens_with", work_with},
                           {"tokens_without", work_without}, {"same_tokens", same}, {"generated_ids", with.generated_ids}};
}

void check_options(const Options& o) {
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (o.context < 1) fail("--context must be at least 1, got {}", o.context);
    if (o.reps < 1) fail("--reps must be at least 1, got {}", o.reps);
}

int run(const Options& o) {
    check_options(o);
    const std::vector<int> lengths = parse_lengths(o.lengths);
    cli::Session s = cli::open_session(o.common);
    const Model& m = s.engine->host_model();
    Lab lab{o, *s.engine, m, m.config, s.loaded.tokenizer, {}, true};
    const Config& c = lab.c;
    std::printf("Lab 03: the KV cache and grouped-query attention\n");
    std::printf("model %s (%s): %d layers, %d query heads, %d KV heads (%s, group size %d), head_dim %d, context %d\n\n",
                o.common.model.c_str(), family_name(c.family), c.n_layers, c.n_heads, c.n_kv_heads, kind_of(c),
                c.group_size(), c.head_dim, c.max_seq_len);
    section_head_map(lab);
    section_bytes(lab);
    const Growth g = section_growth(lab);
    section_attention(lab, g);
    section_step_time(lab, g.ids, lengths);
    section_use_cache(lab, g);
    lab.js["model"] = o.common.model;
    lab.js["ok"] = lab.all_ok;
    lab::write_lab_json(o.common, lab.js);
    return lab::finish(lab.all_ok);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl{
        "Lab 03: the KV cache and grouped-query attention.\n"
        "Shows which KV head serves each query head (MHA, GQA, MQA), what the cache costs per token\n"
        "and at --context, how it grows by one position per token in every layer, that single-head\n"
        "attention over it matches the engine, how decode step time changes with the cache length,\n"
        "and what generating without the cache costs. Uses your kv_head_for_query, kv_cache_bytes,\n"
        "append_kv/commit_kv and attend_one_head (exercise.cpp); test them with\n"
        "  meson test -C build --suite track1-03",
        "03-cache-and-gqa"};
    cl.common(o.common);
    cl.option("--prompt,-p", o.prompt, "prompt text for the growth trace and the cache on/off comparison")
        .show_default();
    cl.option("--steps,-n", o.steps, "decode steps (tokens generated) in sections 3 and 6").show_default();
    cl.option("--context", o.context, "sequence length S for the cache-bytes table").show_default();
    cl.option("--batch,-B", o.batch, "sequences B for the cache-bytes table").show_default();
    cl.option("--lengths", o.lengths,
              "cache lengths at which to time decode steps (comma-separated; clipped to the context)").show_default();
    cl.option("--reps", o.reps, "decode steps timed at each length").show_default();
    cl.option("--shape", o.shapes,
              "a model shape to compare in the bytes table (a synthetic spec; repeat the option for more; "
              "only the shape is used, no weights are made). Replaces the default list: "
              "synthetic:llama,dim=512,heads=8 with kv_heads=8, 2 and 1, and synthetic:llama-1b");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
