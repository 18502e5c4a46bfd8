// Lab 09's report: both runs summarized and printed, the KV transfers, the
// link against DRAM with YOUR split_verdict, and the CSVs for plot.py.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis.hpp"
#include "lab09.hpp"
#include "measure/roofline.hpp"

namespace pd::lab09 {

namespace fs = std::filesystem;
using nlohmann::json;

ModeSummary summarize(std::span<const serve::RequestTiming> t, double duration_s, int long_from) {
    const ItlSplit s = split_itl(t, long_from);
    return {serve::compute_serving_metrics(t, duration_s), serve::summarize_metric(s.with_long_ms),
            serve::summarize_metric(s.without_long_ms)};
}

void print_mode(const char* mode, const ModeSummary& s) {
    std::printf("  %-14s %8.0f %8.0f %8.1f %8.1f %10.1f (%4d) %10.1f (%4d) %9.1f\n", mode, s.m.ttft_ms.median,
                s.m.ttft_ms.p99, s.m.itl_ms.median, s.m.itl_ms.p99, s.itl_long.p99, s.itl_long.n, s.itl_quiet.p99,
                s.itl_quiet.n, s.m.output_throughput);
}

json mode_json(const ModeSummary& s) {
    json j = serve::metrics_json(s.m);
    j["p99_itl_long_arriving_ms"] = s.itl_long.p99;
    j["p99_itl_none_arriving_ms"] = s.itl_quiet.p99;
    j["itl_long_arriving_n"] = s.itl_long.n;
    j["itl_none_arriving_n"] = s.itl_quiet.n;
    return j;
}

namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// [6] YOUR split_verdict on one long prompt's measured bytes, prefill time and
// stall: first at the probed link rate with this run's schedule, against the
// exposed time measured; then over 10, 100 and 400 Gb/s, with one message
// after the prefill and with one message a layer.
std::vector<LinkRow> split_table(SplitCase c, const std::vector<dg::LayerRange>& plan, int n_layers,
                                 const std::vector<double>& measured_exposed_ms) {
    const SplitVerdict here = split_verdict(c, plan, n_layers);
    std::printf("    YOUR split_verdict on a long prompt's medians (KV %.1f MB, prefill %.1f ms, decode stall "
                "removed %.1f ms: colocated ITL p99 with long prompts arriving minus without)\n"
                "    at the probed %.1f Gb/s with this run's %zu message%s: exposed %.2f ms predicted, %.2f ms "
                "measured (median after-prefill time of the long prompts, [4])\n",
                c.kv_bytes / 1e6, c.prefill_ms, c.stall_ms, c.link_gbps, plan.size(), plan.size() > 1 ? "s" : "",
                here.exposed_ms, median(measured_exposed_ms));
    std::printf("    A MODEL for other links (bytes over rate, the pipeline of exercise.hpp; no latency, no "
                "protocol):\n    link       transfer ms   exposed, one message   exposed, a message a layer   pays "
                "(one / per layer)\n");
    std::vector<LinkRow> rows;
    for (double gbps : {10.0, 100.0, 400.0}) {
        c.link_gbps = gbps;
        rows.push_back({gbps, split_verdict(c, transfer_schedule(n_layers, n_layers), n_layers),
                        split_verdict(c, transfer_schedule(n_layers, 1), n_layers)});
        const LinkRow& r = rows.back();
        std::printf("    %4.0f Gb/s %12.2f %22.2f %28.2f   %s / %s\n", gbps, r.once.transfer_ms, r.once.exposed_ms,
                    r.per_layer.exposed_ms, r.once.pays ? "yes" : "no", r.per_layer.pays ? "yes" : "no");
    }
    return rows;
}

}  // namespace

void print_transfers(const dg::DisaggResult& d) {
    std::vector<std::size_t> by_len(d.timings.size());
    for (std::size_t i = 0; i < by_len.size(); i++) by_len[i] = i;
    std::sort(by_len.begin(), by_len.end(),
              [&](auto a, auto b) { return d.timings[a].prompt_tokens < d.timings[b].prompt_tokens; });
    std::printf("\n[4] the KV each request moved (a row every few requests, by prompt length)\n");
    std::printf("  prompt   KV bytes   per token   transfer ms   of which after prefill   TTFT ms   share of TTFT\n");
    const std::size_t n = by_len.size(), rows = std::min<std::size_t>(8, n);
    for (std::size_t k = 0; k < rows; k++) {
        const std::size_t i = by_len[rows > 1 ? k * (n - 1) / (rows - 1) : 0];
        const auto& x = d.transfers[i];
        const double ttft = 1e3 * (d.timings[i].token_s.front() - d.timings[i].arrival_s);
        std::printf("  %6d %10.0f %11.0f %13.2f %24.2f %9.1f %14.1f%%\n", d.timings[i].prompt_tokens, x.bytes,
                    x.bytes / d.timings[i].prompt_tokens, 1e3 * x.wire_s(), 1e3 * x.exposed_s(), ttft,
                    100 * x.exposed_s() * 1e3 / ttft);
    }
}

LinkReport print_links(const dg::DisaggResult& d, const ModeSummary& colocated, double link_gbps,
                       const std::vector<dg::LayerRange>& plan, int n_layers, int long_from) {
    double bytes = 0, wire = 0;
    std::vector<double> long_bytes, long_prefill, long_exposed;
    for (std::size_t i = 0; i < d.transfers.size(); i++) {
        const dg::TransferRecord& x = d.transfers[i];
        bytes += x.bytes, wire += x.wire_s();
        if (d.timings[i].prompt_tokens >= long_from) {
            long_bytes.push_back(x.bytes);
            long_prefill.push_back(1e3 * (x.prefill_end_s - x.prefill_start_s));
            long_exposed.push_back(1e3 * x.exposed_s());
        }
    }
    LinkReport r;
    r.dram_gbps = quick_bandwidth(0.3).best_gbps, r.in_trace_gbps = bytes / wire / 1e9;
    std::printf("\n[6] prefill worker 0 -> decode worker 0, one %zu MiB message at a time: %.2f GB/s; this machine's "
                "DRAM read bandwidth: %.1f GB/s\n    during the trace: %.3f GB/s (all KV bytes / all time from first "
                "post to last block in place: compute and polling included)\n",
                kProbeBytes >> 20, link_gbps, r.dram_gbps, r.in_trace_gbps);
    const double stall = std::max(0.0, colocated.itl_long.p99 - colocated.itl_quiet.p99);
    const SplitCase measured{median(long_bytes), median(long_prefill), 8 * link_gbps, stall};
    r.rows = split_table(measured, plan, n_layers, long_exposed);
    return r;
}

void write_csvs(const fs::path& dir, const serve::ReplayResult& co, const dg::DisaggResult& d,
int long_from, const LinkReport& links) {
    fs::create_directories(dir);
    std::ofstream req(dir / "requests.csv"), itl(dir / "itl.csv"), link(dir / "links.csv");
    req << "id,prompt_tokens,kv_bytes,wire_ms,exposed_ms,ttft_disagg_ms,ttft_colocated_ms\n";
    for (std::size_t i = 0; i < d.timings.size(); i++)
        req << fmt::format("{},{},{},{},{},{},{}\n", i, d.timings[i].prompt_tokens, d.transfers[i].bytes,
                           1e3 * d.transfers[i].wire_s(), 1e3 * d.transfers[i].exposed_s(),
                           1e3 * (d.timings[i].token_s.front() - d.timings[i].arrival_s),
                           1e3 * (co.timings[i].token_s.front() - co.timings[i].arrival_s));
    itl << "mode,long_arriving,itl_ms\n";
    for (const auto& [mode, t] : {std::pair{"colocated", &co.timings}, std::pair{"disaggregated", &d.timings}}) {
        const ItlSplit s = split_itl(*t, long_from);
        for (double x : s.with_long_ms) itl << mode << ",1," << x << "\n";
        for (double x : s.without_long_ms) itl << mode << ",0," << x << "\n";
    }
    link << "gbps,transfer_ms,exposed_one_message_ms,exposed_per_layer_ms,pays_one_message,pays_per_layer\n";
    for (const auto& l : links.rows)
        link << fmt::format("{},{},{},{},{},{}\n", l.gbps, l.once.transfer_ms, l.once.exposed_ms,
                            l.per_layer.exposed_ms, int(l.once.pays), int(l.per_layer.pays));
    if (!req || !itl || !link) fail("cannot write the CSV files in {}", dir.string());
}

}  // namespace pd::lab09
