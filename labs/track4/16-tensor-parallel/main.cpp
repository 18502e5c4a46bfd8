// Lab 16: one model split over R MPI ranks (tensor parallelism), against one
// rank and against the engine.
//
//   ./kit run 16 --ranks 2
//
// which starts it under mpirun (mpirun.sh: mpirun -n R --oversubscribe this-program ...).
// Rank 0 prints everything:
//   [1] the engine's greedy tokens for a seeded prompt (the reference)
//   [2] the same on ONE rank through YOUR shard_layer and tp_layer (rank 0 alone,
//       the others wait): per pass, the compute time
//   [3] the same on R ranks, each with YOUR slices, summing with YOUR
//       ring_allreduce where YOUR tp_layer says: per pass, compute and
//       communication time, bytes
//   [4] speed-up against one rank, YOUR ring_cost's model of the step on
//       10/100/400 Gb/s links next to what was measured, and YOUR ring timed
//       here with ring_cost fitted to it (ring_probe.hpp)
//   [5] the checks: [2] gives the engine's tokens, [3] gives [2]'s tokens and
//       logits, YOUR ring gives MPI_Allreduce's sums
// Run alone (no mpirun): [1], [2], and how to start [3].
#include <algorithm>
#include <cstdio>
#include <random>

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "base/hardware.hpp"
#include "exercise.hpp"
#include "lab_main.hpp"
#include "measure/roofline.hpp"
#include "mpi_comm.hpp"
#include "rank_timeline.hpp"
#include "ring_probe.hpp"
#include "serve/disagg/mpi_session.hpp"
#include "thread_comm.hpp"
#include "tp_generate.hpp"
#include "timeline_option.hpp"

using namespace pd;
using namespace pd::lab16;
using nlohmann::json;

namespace {

struct Options {
    cli::CommonOptions lab;
    int ranks = 2;
    int prompt_len = 64, steps = 32;
    std::uint64_t seed = 1;
    cli::TimelineOptions timeline;
};

constexpr double kAtol = 1e-3, kRtol = 1e-3;  // logits of a split run against the reference

// The prompt every rank builds the same way: prompt_len ids from --seed.
std::vector<int> seeded_prompt(const Options& o, int vocab) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> id(std::min(3, vocab - 1), vocab - 1);
    std::vector<int> p(std::size_t(o.prompt_len));
    for (int& t : p) t = id(rng);
    return p;
}

void check_options(const Options& o, const Config& c, int mpi_ranks) {
    if (o.lab.device != "cpu") fail("--device {}: lab 16's ranks run on the CPU; use --device cpu", o.lab.device);
    if (mpi_ranks > 1 && mpi_ranks != o.ranks)
        fail("mpirun started {} ranks but --ranks is {}: run mpirun -n {} ... --ranks {} (or ./kit run 16 --ranks {})",
             mpi_ranks, o.ranks, o.ranks, o.ranks, o.ranks);
    if (o.prompt_len + o.steps > c.max_seq_len)
        fail("--prompt-len {} + --steps {} exceed the model's context of {} positions: ask for fewer", o.prompt_len,
             o.steps, c.max_seq_len);
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Medians over the decode passes (every pass after the prefill).
struct StepSummary {
    double prefill_ms = 0, decode_ms = 0, decode_comm_ms = 0;
    double prefill_bytes = 0, decode_bytes = 0;  // handed to MPI by this rank
    double decode_compute_ms() const { return decode_ms - decode_comm_ms; }
};
StepSummary summarize(const TpRun& run) {
    std::vector<double> total, comm, bytes;
    for (std::size_t i = 1; i < run.passes.size(); i++)
        total.push_back(run.passes[i].total_ms), comm.push_back(run.passes[i].comm_ms),
            bytes.push_back(run.passes[i].comm_bytes);
    const PassTimes& prefill = run.passes.front();  // tp_generate runs one pass at least
    return {prefill.total_ms, median(total), median(comm), prefill.comm_bytes, median(bytes)};
}

double worst_logit_excess(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0;  // max of |got - want| - (atol + rtol |want|): above 0 fails
    for (std::size_t i = 0; i < want.size() && i < got.size(); i++)
        worst = std::max(worst, std::abs(double(got[i]) - want[i]) - (kAtol + kRtol * std::abs(double(want[i]))));
    return got.size() == want.size() ? worst : 1e30;
}

// The roofline's floor of a decode step: the bytes one rank streams (its
// slices and the head; the KV cache, small here, left out) at DRAM bandwidth,
// each rank having a memory system of its own.
struct Floor {
    double one_rank_bytes = 0, per_rank_bytes = 0, dram_gbps = 0;
    double one_rank_ms() const { return one_rank_bytes / dram_gbps / 1e6; }
    double per_rank_ms() const { return per_rank_bytes / dram_gbps / 1e6; }
};

// [4] YOUR ring_cost over the links: a decode step on R ranks as its
// compute (one rank's measured compute / R, or the roofline's floor) plus
// 2 all-reduces a layer of one row of x.
json link_model(const Config& c, int R, const StepSummary& one, const StepSummary& split, const Floor& floor) {
    const double per_reduce = double(c.dim) * sizeof(float), reduces = 2.0 * c.n_layers;
    std::printf("\n[4] A MODEL of a decode step on %d ranks: compute + %d ring all-reduces of %.0f bytes (YOUR "
                "ring_cost; latency, protocol and waiting for the slowest rank left out). The compute two ways:\n"
                "    measured / %d: one rank's decode compute split %d ways, %.3f ms\n"
                "    roofline: the bytes a rank streams, its slices and the head, %.1f MB (1 rank: %.1f MB), at this "
                "machine's DRAM bandwidth, %.1f GB/s measured now, each rank with a memory of its own: %.3f ms "
                "(1 rank: %.3f ms)\n"
                "    link        comm ms   step ms (measured / %d)  speed-up   step ms (roofline)  speed-up\n",
                R, int(reduces), per_reduce, R, R, one.decode_compute_ms() / R, floor.per_rank_bytes / 1e6,
                floor.one_rank_bytes / 1e6, floor.dram_gbps, floor.per_rank_ms(), floor.one_rank_ms(), R);
    json rows = json::array();
    for (double gbps : {10.0, 100.0, 400.0}) {
        const double comm = reduces * ring_cost(per_reduce, R, gbps, 0).ms;
        const double step = one.decode_compute_ms() / R + comm, roof = floor.per_rank_ms() + comm;
        std::printf("    %4.0f Gb/s %9.4f %20.3f %10.2fx %20.3f %9.2fx\n", gbps, comm, step, one.decode_ms / step, roof,
                    floor.one_rank_ms() / roof);
        rows.push_back({{"gbps", gbps}, {"comm_ms", comm}, {"step_ms", step}, {"speedup", one.decode_ms / step},
                        {"roofline_step_ms", roof}, {"roofline_speedup", floor.one_rank_ms() / roof}});
    }
    std::printf("    measured   %9.4f %20.3f %10.2fx   (this machine, through MPI)\n", split.decode_comm_ms,
                split.decode_ms, one.decode_ms / split.decode_ms);
    return rows;
}

void print_passes(const char* what, const StepSummary& s) {
    std::printf("  %-9s prefill %8.2f ms   decode step (median) %7.3f ms = compute %7.3f + communication %7.3f\n"
                "            all-reduced by each rank: prefill %.0f bytes, a decode step %.0f bytes\n",
                what, s.prefill_ms, s.decode_ms, s.decode_compute_ms(), s.decode_comm_ms, s.prefill_bytes,
                s.decode_bytes);
}

// Rank 0 tells the others once: go (kGo) or stop with an exit code.
constexpr int kGo = -1;
struct Launch {
    bool went = false;  // the others were told to go: they are in the generation loop
    bool told = false;
    void tell(int ranks, int code) {
        if (told || ranks < 2) return;
        told = true, went = code == kGo;
        serve::disagg::broadcast_from_router(code, nullptr, 0);
    }
};

int run_rank0(Options& o, const serve::disagg::MpiSession& mpi, Launch& launch) {
    const auto timeline = cli::open_timeline(o.timeline, o.lab.device, "lab 16");
    if (timeline) timeline->timeline().name_track({1, 1}, "engine (the reference tokens)");
    cli::Session s = cli::load_session(o.lab);
    const auto model = s.loaded.model;
    const Config& c = model->config;
    check_splittable(*model);
    check_options(o, c, mpi.size());
    plan_shard(c, o.ranks, 0);  // a rank count the model cannot take is refused before anything runs
    const std::vector<int> prompt = seeded_prompt(o, c.vocab_size);
    std::printf("Lab 16: tensor parallelism over MPI\nmodel    %s (%d layers, %d heads on %d KV heads, %d hidden)\n"
                "hardware %s\nprompt   %d seeded tokens, then %d greedy tokens (EOS ignored)\n", o.lab.model.c_str(),
                c.n_layers, c.n_heads, c.n_kv_heads, c.hidden_dim, cpu_summary().c_str(), o.prompt_len, o.steps);

    std::vector<float> engine_logits;
    const std::vector<int> engine_tokens = engine_greedy(model, prompt, o.steps, &engine_logits);
    std::printf("\n[1] the engine's greedy tokens: %s\n", fmt::format("{}", fmt::join(engine_tokens, " ")).c_str());

    TpRank one_rank = make_tp_rank(model, 1, 0, o.prompt_len + o.steps);
    TpRun one;
    run_ranks(1, [&](ThreadComm& comm) {
        tp_warm_up(one_rank, comm, prompt);
        one = tp_generate(one_rank, comm, prompt, o.steps);
    });
    const StepSummary one_s = summarize(one);
    std::printf("\n[2] one rank, YOUR shard_layer and tp_layer (%.1f MB of matrices)\n", one_rank.weight_bytes / 1e6);
    print_passes("1 rank", one_s);
    const bool one_ok = one.tokens == engine_tokens && worst_logit_excess(one.first_logits, engine_logits) <= 0;

    json j{{"model", o.lab.model}, {"hardware", cpu_summary()}, {"ranks", o.ranks}, {"threads", o.lab.threads},
           {"one_rank", {{"prefill_ms", one_s.prefill_ms}, {"decode_ms", one_s.decode_ms}}}};
    bool split_ok = true;
    if (o.ranks == 1) {
        std::printf("\n[3] --ranks 1: [2] was the whole run; give --ranks 2 or more to split the model\n");
    } else if (mpi.size() < 2) {
        std::printf("\n[3] %d ranks: needs mpirun. ./kit run 16 --ranks %d starts them; by hand:\n"
                    "    mpirun -n %d --oversubscribe build/labs/track4/16-tensor-parallel/16-tensor-parallel --ranks %d\n",
                    o.ranks, o.ranks, o.ranks, o.ranks);
    } else {
        launch.tell(mpi.size(), kGo);
        TpRank mine = make_tp_rank(model, o.ranks, 0, o.prompt_len + o.steps);
        MpiComm comm;
        comm.wait_for_all();  // the others have loaded the model and built their slices
        const RingProbe ring = probe_ring(comm);
        tp_warm_up(mine, comm, prompt);
        comm.reduce_times.clear();  // the timeline shows the measured run only
        const TpRun split = tp_generate(mine, comm, prompt, o.steps);
        if (timeline) record_rank_times(timeline->timeline(), fmt::format("{} ranks", o.ranks), split, comm);
        const StepSummary split_s = summarize(split);
        std::printf("\n[3] %d ranks (rank 0's view; each holds %.1f MB of matrices, 1/%d of them, and its own KV heads)\n",
                    o.ranks, mine.weight_bytes / 1e6, o.ranks);
        print_passes(fmt::format("{} ranks", o.ranks).c_str(), split_s);
        std::printf("  speed-up of a decode step against 1 rank: %.2fx; of the prefill: %.2fx\n",
                    one_s.decode_ms / split_s.decode_ms, one_s.prefill_ms / split_s.prefill_ms);
        j["split"] = {{"prefill_ms", split_s.prefill_ms}, {"decode_ms", split_s.decode_ms},
                      {"decode_comm_ms", split_s.decode_comm_ms}, {"decode_bytes_per_rank", split_s.decode_bytes}};
        const double head = double(cpu_weights(*model).head.weight_bytes());
        const Floor floor{double(one_rank.weight_bytes) + head, double(mine.weight_bytes) + head,
                          quick_bandwidth(0.3).best_gbps};
        j["dram_gbps"] = floor.dram_gbps;
        j["model_links"] = link_model(c, o.ranks, one_s, split_s, floor);
        j["ring"] = print_ring_probe(ring, o.ranks);
        const double excess = worst_logit_excess(split.first_logits, one.first_logits);
        split_ok = split.tokens == one.tokens && excess <= 0;
        std::printf("\n[5] %d ranks give one rank's tokens, prefill logits within %g + %g |ref|: %s\n", o.ranks, kAtol,
                    kRtol, split_ok ? "yes (ok)" : "NO (check failed: a slice, a sum in the wrong place, the ring?)");
        std::printf("    YOUR ring_allreduce gives MPI_Allreduce's sums (within 1e-6 sum |terms|): %s; 2 (R-1) "
                    "messages of a chunk each, to its neighbours: %s\n", ring.sums_ok ? "yes (ok)" : "NO (check failed)",
                    ring.messages_ok ? "yes (ok)" : "NO (check failed)");
        split_ok = split_ok && ring.ok();
    }
    std::printf("%s one rank gives the engine's tokens and logits: %s\n", mpi.size() < 2 ? "\n[5]" : "   ",
                one_ok ? "yes (ok)" : "NO (check failed: shard_layer or tp_layer?)");
    j["same_tokens"] = one_ok && split_ok;
    cli::finish_timeline(timeline.get(), o.timeline.path);
    lab::write_lab_json(o.lab, j);
    return lab::finish(one_ok && split_ok);
}

// Ranks 1..R-1: wait for rank 0's word, then the same generation on their slices.
int run_other_rank(lab::CommandLine& cl, int argc, char** argv, Options& o, const serve::disagg::MpiSession& mpi) {
    cl.parse_quietly(argc, argv);  // rank 0 parses the same argv and says what is wrong
    int code = kGo;
    serve::disagg::broadcast_from_router(code, nullptr, 0);
    if (code != kGo) return code;
    try {
        const auto model = cli::load_session(o.lab).loaded.model;
        TpRank mine = make_tp_rank(model, o.ranks, mpi.rank(), o.prompt_len + o.steps);
        MpiComm comm;
        comm.wait_for_all();
        probe_ring(comm);  // with rank 0, which prints it
        const std::vector<int> prompt = seeded_prompt(o, model->config.vocab_size);
        tp_warm_up(mine, comm, prompt);
        comm.reduce_times.clear();
        const TpRun run = tp_generate(mine, comm, prompt, o.steps);
        if (!o.timeline.path.empty()) send_rank_times(run, comm);  // rank 0 draws every rank's track
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: rank %d: %s\n", mpi.rank(), e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    serve::disagg::MpiSession mpi(argc, argv);
    Options o;
    o.lab.threads = 1;
    lab::CommandLine cl(
        "Lab 16: one model split over R ranks, Megatron style. Each rank holds its own query\n"
        "and KV heads and its own MLP hidden units (YOUR plan_shard and shard_layer), computes\n"
        "its part of every product, and the ranks add their partial outputs with YOUR ring\n"
        "all-reduce twice a layer (YOUR tp_layer). The program generates greedy tokens on one rank and on R,\n"
        "checks both against the engine, and prints per decode step the compute and the\n"
        "communication time, the speed-up against one rank, and YOUR ring all-reduce model of the\n"
        "step on 10/100/400 Gb/s links. Run it with\n"
        "  ./kit run 16 --ranks 2\n"
        "which starts R ranks under mpirun (mpirun.sh shows how); alone, without mpirun, it runs\n"
        "the engine and the one-rank split only.",
        "16-tensor-parallel");
    cl.common(o.lab);
    cl.option("--ranks", o.ranks, "MPI ranks sharing the model; must divide its KV heads and hidden units")
        .range(1, 64).show_default();
    cl.option("--prompt-len", o.prompt_len, "tokens of the seeded prompt (the prefill)")
        .range(1, 1 << 20).show_default();
    cl.option("--steps", o.steps, "greedy tokens to generate (the decode steps)").range(2, 1 << 20).show_default();
    cl.option("--seed", o.seed, "seed of the prompt's ids").show_default();
    cl.timeline(o.timeline,
                "Written by rank 0 with --ranks 2 or more under mpirun: one track per rank, a span per pass "
                "(the prefill, each decode step) holding its all-reduces; the gaps between them are the "
                "rank's own compute.");
    if (mpi.rank() != 0) return run_other_rank(cl, argc, argv, o, mpi);
    Launch launch;
    const int rc = lab::run_lab(cl, argc, argv, [&] { return run_rank0(o, mpi, launch); });
    launch.tell(mpi.size(), rc);  // help, bad input, a missing exercise: the others stop with the same code
    // An error on rank 0 during the split run leaves the others inside an all-reduce: stop them all.
    if (launch.went && rc >= 2) MPI_Abort(MPI_COMM_WORLD, rc);
    return rc;
}
