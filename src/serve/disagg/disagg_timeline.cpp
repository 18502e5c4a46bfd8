#include "serve/disagg/disagg_timeline.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include <fmt/format.h>

namespace pd::serve::disagg {

namespace {

// Times in the result count seconds from the router's start on now_s()'s
// clock (steady_clock); the timeline counts nanoseconds from its own.
struct Clock {
    const Timeline& tl;
    double start_steady_s;
    std::int64_t at(double s) const { return tl.steady_s_to_ns(start_steady_s + s); }
};

TimelinePlace rank_place(int process, int rank) { return {process, rank}; }
TimelinePlace request_place(int process, int request) { return {process, 100 + request}; }

void record_prefills(Timeline& tl, int process, const Clock& c, const DisaggResult& run) {
    for (std::size_t i = 0; i < run.transfers.size(); i++) {
        const TransferRecord& x = run.transfers[i];
        tl.span(rank_place(process, x.prefill_rank), "prefill", "phase", c.at(x.prefill_start_s),
                c.at(x.prefill_end_s),
                {{"request", double(i), {}},
                 {"prompt tokens", double(run.timings[i].prompt_tokens), {}},
                 {"KV bytes", x.bytes, {}},
                 {"KV to rank", double(x.decode_rank), {}}});
    }
}

// A sequence decodes on its rank from its blocks' arrival to its last token.
void record_decode_counts(Timeline& tl, int process, const Clock& c, const DisaggResult& run) {
    std::map<std::int64_t, std::map<int, int>> changes;  // time -> rank -> +/- sequences
    for (std::size_t i = 0; i < run.transfers.size(); i++) {
        const auto& tokens = run.timings[i].token_s;
        if (tokens.empty()) continue;
        const int rank = run.transfers[i].decode_rank;
        changes[c.at(run.transfers[i].kv_ready_s)][rank]++;
        changes[c.at(tokens.back())][rank]--;
    }
    std::map<int, int> running;  // rank -> sequences
    for (const auto& [at, by_rank] : changes)
        for (const auto& [rank, delta] : by_rank)
            tl.counter(process, {"sequences decoding on rank", rank}, at,
                       {{"sequences", double(running[rank] += delta), {}}});
}

void record_request(Timeline& tl, int process, const Clock& c, const DisaggResult& run, int i) {
    const RequestTiming& t = run.timings[std::size_t(i)];
    const TransferRecord& x = run.transfers[std::size_t(i)];
    if (t.token_s.empty()) return;
    const TimelinePlace at = request_place(process, i);
    // The stamps come from three processes: keep them in order so that the spans nest.
    const double prefill_start = std::max(t.arrival_s, x.prefill_start_s);
    const double prefill_end = std::max(prefill_start, x.prefill_end_s);
    const double kv_ready = std::max(prefill_end, x.kv_ready_s);
    const double last = std::max(kv_ready, t.token_s.back());
    tl.span(at, "queued", "request", c.at(t.arrival_s), c.at(prefill_start));
    tl.span(at, "prefill + KV", "request", c.at(prefill_start), c.at(kv_ready),
            {{"prefill rank", double(x.prefill_rank), {}},
             {"decode rank", double(x.decode_rank), {}},
             {"first KV message posted, ms into the prefill", (x.first_send_s - x.prefill_start_s) * 1e3, {}},
             {"KV bytes", x.bytes, {}}});
    tl.span(at, "prefill", "request", c.at(prefill_start), c.at(prefill_end));
    tl.span(at, "KV after prefill", "request", c.at(prefill_end), c.at(kv_ready));
    tl.span(at, "decode", "request", c.at(kv_ready), c.at(last));
    for (double s : t.token_s) tl.instant(at, "token", "request", c.at(s));
    tl.span(at, {"request", i}, "request", c.at(t.arrival_s), c.at(last),
            {{"prompt tokens", double(t.prompt_tokens), {}},
             {"output tokens", double(t.token_s.size()), {}},
             {"ttft ms", (t.token_s.front() - t.arrival_s) * 1e3, {}},
             {"exposed transfer ms", x.exposed_s() * 1e3, {}}});
}

}  // namespace

void record_disagg_run(Timeline& tl, const std::string& process, const Layout& layout, const DisaggResult& run) {
    const int p = tl.add_process(process);
    for (int i = 0; i < layout.prefill; i++)
        tl.name_track(rank_place(p, layout.prefill_rank(i)),
                      fmt::format("rank {}: {}", layout.prefill_rank(i), layout.role(layout.prefill_rank(i))), i);
    for (std::size_t i = 0; i < run.timings.size(); i++)
        tl.name_track(request_place(p, int(i)), fmt::format("request {}", i), 100 + int(i));
    const Clock c{tl, run.start_steady_s};
    record_prefills(tl, p, c, run);
    record_decode_counts(tl, p, c, run);
    for (std::size_t i = 0; i < run.timings.size(); i++) record_request(tl, p, c, run, int(i));
}

}  // namespace pd::serve::disagg
