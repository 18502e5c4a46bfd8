// Lab 04's program, in three files: main.cpp serves the requests for real
// (options, warm-up, serve), requests.cpp makes the workload (prompts, the
// arrival rate, the latency objective) and report.cpp prints and writes what
// the virtual clock made of it. This header holds the types they share.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/timing.hpp"
#include "cli_common.hpp"
#include "engine/sampler.hpp"
#include "exercise.hpp"
#include "io/tokenizer.hpp"

namespace pd::lab04 {

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    int requests = 32;
    std::string rate = "auto";
    double load = 0.8;
    std::uint64_t seed = 1;
    int prompt_len = 64;
    int output_len = 16;
    double range_ratio = 0.0;
    SamplerConfig sampler{0.0f, 0, 1.0f, 42};
    bool stop_at_eos = false;
    bool cold = false;
    bool no_rate_sweep = false;
    int timeline = 0;
    int rows = 24;
    std::string slo_ttft = "auto", slo_tpot = "none", slo_e2el = "none";
};

// What a request asks for.
struct RequestSpec {
    int id = 0;
    int prompt_len = 0;      // tokens the prompt is cut to
    int output_len = 0;      // tokens to generate (fewer if it stops at eos)
    std::string text;        // the prompt as the client sends it
    std::vector<int> ids;    // used instead of text when the vocabulary cannot spell text
};

// What serving one request took, measured, relative to the moment the server
// picked it up (ms).
struct Service {
    int prompt_tokens = 0;
    double tokenize_ms = 0;        // text -> ids (wall clock)
    double prefill_ms = 0;         // model-side prefill (engine.time_ms)
    double first_sample_ms = 0;    // choosing token 1 from prefill's logits + streaming it
    std::vector<double> decode_step_ms;  // model-side time of each decode step
    double sample_stream_ms = 0;   // choosing and streaming tokens 2..n
    std::vector<double> token_rel_ms;    // when token k was streamed, since service start
    std::string text;              // the streamed answer
    std::vector<std::string> pieces;     // what each token added to it (may be "" mid-character)
    bool stopped_at_eos = false;
    double total_ms() const { return token_rel_ms.empty() ? 0.0 : token_rel_ms.back(); }
    double decode_ms() const {
        double s = 0;
        for (double d : decode_step_ms) s += d;
        return s;
    }
    // The service as the virtual clock needs it: token 1, then each gap.
    ServiceTrace trace() const {
        ServiceTrace t{token_rel_ms.front(), {}};
        for (std::size_t k = 1; k < token_rel_ms.size(); k++)
            t.step_ms.push_back(token_rel_ms[k] - token_rel_ms[k - 1]);
        return t;
    }
};

// One run on the virtual clock: your schedule, then your metrics per request.
struct Timeline {
    std::vector<Scheduled> sch;
    std::vector<RequestMetrics> m;
};

struct Report {
    Stats ttft, tpot, itl, e2el, queue, prefill, decode_step;
};

// requests.cpp: the workload.
std::string random_words(std::mt19937_64& rng, int n);
// o.requests requests; `spelled` false when the vocabulary cannot spell text
// (then each request carries random ids instead).
std::vector<RequestSpec> make_requests(const Options& o, const Tokenizer& tok, int vocab, bool& spelled);
// --rate: 0 for auto, infinity for inf or burst.
double parse_rate(const std::string& s);
// --slo-*: auto TTFT is twice `mean_service_ms`.
Slo parse_slo(const Options& o, double mean_service_ms);

// report.cpp: the virtual clock's results, printed and as JSON.
Timeline simulate(const std::vector<Service>& svc, const std::vector<double>& arrive);
Report summarize_run(const std::vector<Service>& svc, const Timeline& t);
void print_header(const Options& o, Engine& e, bool spelled);
void print_workload(const Options& o, double rate, bool auto_rate, double capacity, double mean_service);
void print_per_request(const std::vector<Service>& svc, const Timeline& t, int rows);
void print_summaries(const Report& rep, const Timeline& t, int requests, const Slo& slo, const Goodput& good);
// Task 6: the same services under other arrival rates; returns the rows as JSON.
nlohmann::json print_rate_sweep(const std::vector<Service>& svc, const std::vector<double>& gaps,
                                double capacity, const Slo& slo);
void print_worked_example(const Report& rep, int output_len);
void print_stream(const Service& v, const Scheduled& t, int id);
// Writes --json: the run, its summary, the sweep, the objective and every request.
void write_json(const Options& o, Engine& e, double rate, double capacity, const Report& rep,
                const nlohmann::json& sweep, const Slo& slo, const Goodput& good,
                const std::vector<Service>& svc, const Timeline& t);

}  // namespace pd::lab04
