// Lab 08: a long prompt arrives while decode streams run; what the step's token
// budget does to the streams' inter-token latency and to the newcomer's TTFT,
// and YOUR controller that picks the budget every step to hold an ITL target.
//
//   [1] your fit_step_cost and budget_for_target, tried once (a missing
//       exercise stops here with exit 3)
//   [2] for each --budgets value (and "unchunked": the whole context, so every
//       prompt goes through in one pass), then for "slo" (your controller,
//       SloBudgetPolicy, aiming at --slo-ms): --streams requests decode on the
//       paged engine, the long prompt joins after --arrive-after steps, and
//       the kit's Scheduler runs until every request finished. Printed per
//       row: p50, p90 and p99 ITL of the streams while the prompt is being
//       prefilled, their longest stall, the newcomer's TTFT, throughput; and
//       a check that every row gave every request the same tokens
//   [3] the controller against the fixed budgets: did it hold the target (a
//       p90 ITL), the spread of its steps about its line (its margin), and at
//       what TTFT and throughput next to the best fixed budget that did
//   [4] budgets.csv in --out, drawn by plot.py
// (workload.cpp: the budgets and prompts; sweep.cpp: the runs; report.cpp:
// [2] to [4]; lab08.hpp: what they share.)
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab08.hpp"
#include "lab_main.hpp"
#include "base/hardware.hpp"
#include "plot.hpp"

using namespace pd;
using namespace pd::lab08;
using nlohmann::json;

namespace {

// 28 M parameters, 105 MB of f32 weights (more than the CPU's caches: every
// step reads them all), and a context of 2048 that holds a long prompt: a
// 1536-token prefill is about 93 GFLOP (74 through the weights, 19 of
// attention).
constexpr const char* kDefaultModel =
    "synthetic:llama,dim=512,ffn=1536,layers=8,heads=8,kv_heads=2,vocab=4096,ctx=2048";

// [1] Your two functions once, so a missing one stops the lab at once.
void try_exercise() {
    const lab08::StepSample samples[] = {{4, 10}, {20, 12}};
    lab08::budget_for_target(lab08::fit_step_cost(samples), 20, 3, 1, 64);
}

void check_options(const Options& o, int context) {
    if (o.prompt_len + o.newcomer_tokens > context)
        fail("--prompt-len {} + --newcomer-tokens {} do not fit the model's context of {} positions", o.prompt_len,
             o.newcomer_tokens, context);
    if (!std::isfinite(o.slo_ms)) fail("--slo-ms {}: give the target in ms (0: 8 decode steps, measured)", o.slo_ms);
    if (o.slo_ms == 0 && o.arrive_after < 2)
        fail("--slo-ms 0 takes the target from the streams' decode steps before the prompt arrives: give "
             "--arrive-after 2 or more, or a target in ms with --slo-ms");
    if (o.stream_prompt + o.stream_tokens > context)
        fail("--stream-prompt {} + --stream-tokens {} do not fit the model's context of {} positions",
             o.stream_prompt, o.stream_tokens, context);
}

int run(Options& o) {
    std::vector<Budget> budgets = parse_budgets(o.budgets);
    if (o.lab.device != "cpu")
        fail("--device {}: this lab runs the paged engine, which runs on the CPU only", o.lab.device);
    try_exercise();
    const auto timeline = cli::open_timeline(o.timeline, o.lab.device, "lab 08");
    cli::Session s = cli::load_session(o.lab);
    const auto& model = s.loaded.model;
    const int context = model->config.max_seq_len;
    check_options(o, context);
    resolve_budgets(budgets, context);
    const int stream_tokens = o.stream_tokens > 0 ? o.stream_tokens : auto_stream_tokens(o, budgets, context);
    const Workload w = make_workload(o, model->config.vocab_size, stream_tokens);
    std::printf("Lab 08: chunked prefill\nmodel    %s\nhardware %s\n", o.lab.model.c_str(), cpu_summary().c_str());
    std::printf("workload %d streams (prompts of %d, %d tokens each); after %d steps a prompt of %d tokens "
                "arrives (%d output tokens); paged engine, EOS ignored, %d repeat(s)\n",
                o.streams, o.stream_prompt, stream_tokens, o.arrive_after, o.prompt_len, o.newcomer_tokens,
                o.repeats);
    std::printf("\n[1] your fit_step_cost and budget_for_target answer (ok)\n");
    std::printf("\n[2] the budget sweep (medians over repeats; ITL: the streams' gaps while the prompt is "
                "prefilled)\n");
    Target target{o.slo_ms, "--slo-ms"};
    const std::vector<Row> rows = sweep(model, o, budgets, w, target);
    const bool same = print_table(rows);
    print_chunk_growth(rows);
    json j;
    print_slo(rows, target, slo_options(o, model->config, target.ms, context), j);
    j["model"] = o.lab.model;
    j["hardware"] = cpu_summary();
    j["budgets"] = json::array();
    for (const Row& r : rows) j["budgets"].push_back(row_json(r));
    j["budgets_swept"] = o.budgets;
    j["same_tokens"] = same;
    cli::finish_timeline(timeline.get(), o.timeline.path);
    write_csv(o.out, rows);
    lab::write_lab_json(o.lab, j);
    lab::draw_plot("labs/track2/08-chunked-prefill", o.out, o.no_plot,
                   "budgets.png and .svg (ITL and stall against TTFT, throughput, per budget)");
    return lab::finish(same);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    o.lab.model = kDefaultModel;
    lab::CommandLine cl(
        "Lab 08: chunked prefill. A step of a serving engine runs ONE forward pass of at most a\n"
        "token budget: one token for each running decode stream, the rest for chunks of prompts\n"
        "being prefilled. A long prompt in one pass stalls every stream for the whole pass; in\n"
        "chunks, the streams keep a token a step while the prompt takes longer to its first token.\n"
        "This program runs --streams decode streams on the paged engine, lets a --prompt-len\n"
        "prompt arrive, and sweeps the budget with the engine's planner: the streams' p90/p99\n"
        "inter-token latency while the prompt is prefilled and their longest stall, against the\n"
        "newcomer's time to first token, and the output throughput; then YOUR controller\n"
        "(exercise.cpp) picks the budget every step from the steps it timed, to hold a p90 ITL\n"
        "target (--slo-ms), and is compared with the fixed budgets. budgets.csv goes into --out;\n"
        "plot.py draws it. The default model is a synthetic Llama of 28 M parameters with a 2048\n"
        "context (the bundled tiny model's 512 positions hold no long prompt).",
        "08-chunked-prefill");
    cl.common(o.lab);
    cl.option("--budgets", o.budgets, "token budgets of a step to sweep; \"unchunked\": the whole context")
        .list().show_default();
    cl.option("--streams", o.streams, "decode streams running when the prompt arrives").range(1, 64).show_default();
    cl.option("--stream-prompt", o.stream_prompt, "prompt tokens of each stream").range(1, 1 << 20).show_default();
    cl.option("--stream-tokens", o.stream_tokens,
              "output tokens of each stream (0: enough to outlast the prompt at the smallest budget)")
        .range(0, 1 << 20).show_default();
    cl.option("--prompt-len", o.prompt_len, "tokens of the long prompt that arrives").range(1, 1 << 20).show_default();
    cl.option("--newcomer-tokens", o.newcomer_tokens, "output tokens of the long prompt's request")
        .range(1, 1 << 20).show_default();
    cl.option("--arrive-after", o.arrive_after, "steps the streams run before the prompt arrives")
        .range(0, 1 << 20).show_default();
    cl.option("--slo-ms", o.slo_ms, "the p90 ITL target of your controller (the row \"slo\"); 0: 8 decode steps, "
              "the median gap before the prompt arrives in the fixed budgets' first runs")
        .non_negative().show_default();
    cl.option("--repeats", o.repeats, "runs of every budget; the table shows medians").range(1, 100).show_default();
    cl.option("--seed", o.seed, "seed of the prompts' token ids").show_default();
    cl.option("--out,-o", o.out, "folder for budgets.csv and the plot").show_default();
    cl.flag("--no-plot", o.no_plot, "write the CSV only; print the command that draws it");
    cl.flag("--quiet", o.quiet, "no progress lines on stderr");
    cl.timeline(o.timeline,
                "One process per run (each budget, then your controller, each repeat): its scheduler's "
                "steps with the batch as args, one track per request (queued, prefill chunks, decode), "
                "counters of KV blocks and requests. --timeline-detail phases keeps it small.");
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}