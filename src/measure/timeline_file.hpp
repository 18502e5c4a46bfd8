// A timeline file: a Timeline recorded while the file is open, written at the
// end in Chrome's trace event format (JSON {"traceEvents": [...]}), which
// ui.perfetto.dev and chrome://tracing open. docs/timeline.md says how to
// open it offline and what each track is.
//
//   spans     "ph": "X", "ts" and "dur" in microseconds (nanosecond decimals)
//   instants  "ph": "i", thread-scoped
//   counters  "ph": "C", one series per argument
//   names     "ph": "M", process_name, thread_name and thread_sort_index
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/timeline.hpp"

namespace pd {

class TimelineFile {
public:
    // Opens `path` for writing now, so that a bad path is refused (UserError
    // naming it) before any work, and makes the timeline active until this
    // is destroyed. `process_name` names process 1 ("pdlab generate").
    // Destroyed unwritten (the run failed), it removes the empty file.
    TimelineFile(const std::string& path, TimelineDetail detail, const std::string& process_name);
    ~TimelineFile();
    TimelineFile(const TimelineFile&) = delete;
    TimelineFile& operator=(const TimelineFile&) = delete;

    Timeline& timeline() { return timeline_; }
    // Writes the file (once, at the end) and returns how many events it holds.
    std::size_t write();

private:
    std::string path_;
    std::ofstream out_;
    bool written_ = false;
    Timeline timeline_;
};

// The Chrome trace of `t`: {"traceEvents": [...], "displayTimeUnit": "ms"}.
// Spans are sorted by start, the longer first on a tie, so that a parent
// precedes the children that start with it.
nlohmann::json chrome_trace(const Timeline& t);

}  // namespace pd
