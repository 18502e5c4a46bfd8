// pdlab serve: an OpenAI-compatible completions server on one model, streaming
// tokens as server-sent events, with Prometheus metrics (src/serve/).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "checkpoint_notes.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "io/chat_template.hpp"
#include "serve/batching_worker.hpp"
#include "serve/http_server.hpp"
#include "serve/paged_serving_engine.hpp"
#include "serve/serial_worker.hpp"
#include "timeline_option.hpp"

namespace pd::cli {

namespace {

struct ServeCliOptions {
    CommonOptions common;
    TimelineOptions timeline;
    serve::ServerOptions server;
    int max_body_mb = 1;
    int shutdown_grace_s = 30;
    std::string batching = "continuous";
    serve::StepLimits limits{32, 512, false};
    int block_size = 16;
    int kv_blocks = 0;  // 0: room for --max-seqs requests of the whole context
};

// What `pdlab serve --help` says before the options.
constexpr const char* kServeAbout = R"(Serve the model over HTTP with the OpenAI completions API, streaming each token as it is
chosen, and see what a user sees: time to first token includes queueing and the network.
--batching continuous (the default): every step runs the next token of each running
request and chunks of new prompts in ONE batch over a paged KV cache, so a new request
joins at the next step. --batching serial: one request at a time, the others queue.
  POST /v1/completions  {"prompt": "Once upon a time", "max_tokens": 40, "stream": true}
  GET  /health, /metrics (Prometheus), /v1/models
Example: pdlab serve --model tiny --port 8000, then pdlab loadgen --url http://127.0.0.1:8000
SIGTERM or Ctrl-C: stop accepting, let requests in flight finish (--shutdown-grace), exit 0.)";

CLI::App* add_serve_options(CLI::App& app, ServeCliOptions& o) {
    auto* sub = app.add_subcommand("serve", kServeAbout);
    add_common(sub, o.common, false);
    sub->add_option("--host", o.server.host, "address to listen on (127.0.0.1: this machine only)")->capture_default_str();
    sub->add_option("--port", o.server.port, "TCP port (0: any free one, printed at start)")
        ->check(CLI::Range(0, 65535))->capture_default_str();
    sub->add_option("--max-connections", o.server.connection_threads,
                    "connections served at once (each stream holds one); more wait their turn")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--read-timeout", o.server.read_timeout_s,
                    "seconds a client may stay silent in the middle of sending a request (slow-loris guard)")
        ->check(CLI::Range(1, 3600))->capture_default_str();
    sub->add_option("--write-timeout", o.server.write_timeout_s, "seconds a client may stop reading")
        ->check(CLI::Range(1, 3600))->capture_default_str();
    sub->add_option("--max-body-mb", o.max_body_mb, "largest request body in MiB (larger: 413)")
        ->check(CLI::Range(1, 1024))->capture_default_str();
    sub->add_option("--shutdown-grace", o.shutdown_grace_s,
                    "seconds requests in flight may still run after SIGTERM before they are aborted")
        ->check(CLI::Range(0, 3600))->capture_default_str();
    sub->add_option("--batching", o.batching,
        "continuous: the scheduler batches all running requests every step; serial: one request "
        "at a time, start to end (compare their TTFT under load)")
        ->check(CLI::IsMember({"continuous", "serial"}))->capture_default_str();
    sub->add_option("--max-seqs", o.limits.max_seqs, "continuous: requests running at once (the batch); more wait")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--max-tokens-per-step", o.limits.max_tokens_per_step,
        "continuous: tokens in one step, decode rows first, then prompt chunks (chunked prefill)")
        ->check(CLI::Range(1, 1 << 20))->capture_default_str();
    sub->add_option("--block-size", o.block_size, "continuous: KV positions per cache block")
        ->check(CLI::Range(1, 4096))->capture_default_str();
    sub->add_option("--kv-blocks", o.kv_blocks,
        "continuous: KV blocks in the pool (default: --max-seqs requests of the whole context, "
        "within 1 GiB); fewer makes the scheduler preempt when they run out")
        ->check(CLI::Range(1, INT_MAX));
    add_timeline(sub, o.timeline,
                 "Written when the server stops (SIGTERM or Ctrl-C). Continuous: a track for the scheduler's "
                 "steps (the engine's passes inside), one per request (queued, prefill chunks, decode steps, "
                 "preempted, finished), KV-block and request counters. Serial: the engine's passes. A server "
                 "that runs long fills the 500,000 events it keeps (then drops and counts the rest): use "
                 "--timeline-detail phases.");
    return sub;
}

// Waits for SIGTERM or SIGINT (blocked in every thread, see run_serve) until
// `done`; on one, starts the server's shutdown and, after the grace period,
// aborts what is still running.
void watch_signals(serve::HttpServer& server, serve::Worker& worker, int grace_s, const std::atomic<bool>& done) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    const timespec poll{0, 100'000'000};
    int sig = -1;
    while (!done && sig < 0) sig = sigtimedwait(&set, nullptr, &poll);
    if (done) return;
    std::fprintf(stderr, "pdlab serve: %s: no new requests; finishing those in flight (up to %d s)\n",
                 sig == SIGINT ? "interrupted" : "terminated", grace_s);
    server.begin_shutdown();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
    while (!done && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) worker.abort_all();
}

// Signals go to the watcher thread only: blocked here, before any thread
// starts (threads inherit the mask). A vanished client must not kill the
// server with SIGPIPE: its write fails instead, and its job is cancelled.
void block_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

// What runs the requests: --batching serial, an engine with one cache slot;
// continuous, the scheduler on the paged KV cache, on --device's CPU or GPU.
struct Backend {
    std::unique_ptr<serve::ServingEngine> serving;
    std::unique_ptr<serve::Worker> worker;
    int context = 0;
    std::string hardware;
};

// Room for --max-seqs requests of the whole context, within kDefaultKvBytes
// (the pool is allocated at start), yet never less than one such request.
constexpr std::size_t kDefaultKvBytes = std::size_t(1) << 30;
int default_kv_blocks(const Config& c, const ServeCliOptions& o, Device device, const CudaSettings& cuda,
                      int context) {
    const long long per_request = (context + o.block_size - 1) / o.block_size;
    const std::size_t per_block =
        kv_bytes(c.n_layers, c.n_kv_heads, c.head_dim, o.block_size, kv_elem_bytes(device, cuda));
    const long long in_budget = (long long)(kDefaultKvBytes / per_block);
    const long long blocks = std::max(per_request, std::min(per_request * o.limits.max_seqs, in_budget));
    return int(std::min<long long>(INT_MAX, blocks));
}

Backend make_backend(Session& s, const ServeCliOptions& o, serve::ServerMetrics& metrics) {
    Backend b;
    if (o.batching == "serial") {
        start_engine(s, o.common, 1, 0);
        b.worker = std::make_unique<serve::SerialWorker>(*s.engine, s.loaded.tokenizer, metrics, o.block_size);
        b.context = s.engine->max_seq();
        b.hardware = s.engine->hardware() + ", serial";
        return b;
    }
    // A request's positions (prompt + output): --max-seq when given, else the model's context.
    const int model_context = s.loaded.model->config.max_seq_len;
    const int context = o.common.max_seq > 0 ? std::min(o.common.max_seq, model_context) : model_context;
    serve::PagedOptions p;
    p.device = parse_device(o.common.device);
    p.block_size = o.block_size;
    p.threads = o.common.threads;
    p.total_blocks = o.kv_blocks > 0 ? o.kv_blocks
                                     : default_kv_blocks(s.loaded.model->config, o, p.device, s.settings.cuda, context);
    auto paged = serve::make_paged_serving_engine(s.loaded.model, p);
    b.hardware = paged->hardware();
    b.serving = std::move(paged);
    b.context = context;
    b.hardware += fmt::format(", continuous batching of up to {} requests, {} KV blocks of {}",
                              o.limits.max_seqs, b.serving->total_blocks(), b.serving->block_size());
    b.worker = std::make_unique<serve::BatchingWorker>(*b.serving, s.loaded.tokenizer, metrics, o.limits, context);
    return b;
}

// The model's chat_template for /v1/chat/completions. One outside the kit's
// Jinja subset does not stop the server: chat requests are answered 400 with the reason.
std::optional<tok::ChatTemplate> load_chat_template_or_note(const std::filesystem::path& folder, serve::ApiLimits& limits) {
    try {
        return tok::load_chat_template(folder);
    } catch (const UserError& e) {
        limits.chat_template_problem = std::string("this model's chat template cannot be used: ") + e.what();
        std::fprintf(stderr, "pdlab serve: note: %s; /v1/chat/completions will answer 400\n", e.what());
        return std::nullopt;
    }
}

int run_serve(ServeCliOptions& o) {
    block_signals();
    if (o.batching == "serial" && o.kv_blocks > 0)
        fail("--kv-blocks sizes the paged KV cache of --batching continuous; --batching serial has one cache slot");
    // Opened before anything loads (a path that cannot be written is refused
    // first), and declared before the worker, which records on it until it is destroyed.
    const auto timeline = open_timeline(o.timeline, o.common.device, "pdlab serve");
    if (timeline && o.batching == "serial") timeline->timeline().name_track({1, 1}, "engine");
    Session s = load_session(o.common);
    note_generation_config(s.loaded);
    o.server.model_name = o.common.model;
    o.server.max_body_bytes = std::size_t(o.max_body_mb) << 20;
    serve::ServerMetrics metrics;
    Backend backend = make_backend(s, o, metrics);
    serve::Worker& worker = *backend.worker;
    serve::ApiLimits limits{&s.loaded.tokenizer, s.loaded.model->config.vocab_size, backend.context, nullptr, ""};
    const std::optional<tok::ChatTemplate> chat_template = load_chat_template_or_note(s.loaded.folder, limits);
    if (chat_template) limits.chat_template = &*chat_template;
    serve::HttpServer server(o.server, limits, worker, metrics);
    const int port = server.bind();
    std::printf("pdlab serve: listening on http://%s:%d (model %s, context %d tokens, %s)\n",
                o.server.host.c_str(), port, o.common.model.c_str(), limits.context, backend.hardware.c_str());
    std::fflush(stdout);
    std::atomic<bool> done{false};
    std::thread watcher(watch_signals, std::ref(server), std::ref(worker), o.shutdown_grace_s, std::cref(done));
    server.serve();  // returns once shut down and every connection is done
    done = true;
    watcher.join();
    worker.shutdown();
    finish_timeline(timeline.get(), o.timeline.path);
    std::fprintf(stderr, "pdlab serve: stopped\n");
    return 0;
}

}  // namespace

Command add_serve(CLI::App& app) { return options_command(app, add_serve_options, run_serve); }

}  // namespace pd::cli
