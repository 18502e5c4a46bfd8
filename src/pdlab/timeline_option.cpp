#include "timeline_option.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "common.hpp"

namespace pd::cli {

void add_timeline(CLI::App* app, TimelineOptions& o, const std::string& tracks) {
    app->add_option("--timeline", o.path,
                    "write a timeline of the run to this file (Chrome trace JSON): open it at "
                    "https://ui.perfetto.dev (Open trace file; it stays in the browser) or "
                    "chrome://tracing. " + tracks + " See docs/timeline.md.");
    app->add_option("--timeline-detail", o.detail,
                    "layers: each forward pass's layers, and in each its matrix products, attention "
                    "and the rest (about 65 ns an event: 2% of the tiny model's decode step, under 0.5% "
                    "of bench-llama-125m's; see docs/timeline.md); phases: the passes only, for long runs")
        ->check(CLI::IsMember({"layers", "phases"}))
        ->capture_default_str();
}

std::unique_ptr<TimelineFile> open_timeline(const TimelineOptions& o, const std::string& device,
                                            const std::string& name) {
    if (o.path.empty()) return nullptr;
    if (device != "cpu")
        fail("--timeline records the CPU engine's passes only: the CUDA engine puts no spans on it yet. "
             "Use --device cpu, or drop --timeline");
    const TimelineDetail detail = o.detail == "phases" ? TimelineDetail::phases : TimelineDetail::layers;
    return std::make_unique<TimelineFile>(o.path, detail, name);
}

void finish_timeline(TimelineFile* file, const std::string& path) {
    if (!file) return;
    const std::size_t n = file->write();
    std::fprintf(stderr, "timeline: %zu events in %s (open it at https://ui.perfetto.dev)\n", n, path.c_str());
}

}  // namespace pd::cli
