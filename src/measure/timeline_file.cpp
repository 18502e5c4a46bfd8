#include "measure/timeline_file.hpp"

#include <algorithm>
#include <cstdio>

#include "common.hpp"

namespace pd {

namespace {

// Microseconds with the nanoseconds as three exact decimals, so that a child
// span's start plus duration never rounds past its parent's end.
double us(std::int64_t ns) { return double(ns) / 1000.0; }

nlohmann::json args_json(const std::vector<TimelineArg>& args) {
    nlohmann::json j = nlohmann::json::object();
    for (const TimelineArg& a : args) {
        if (a.text.empty()) j[a.key] = a.number;
        else j[a.key] = a.text;
    }
    return j;
}

std::string name_of(const TimelineName& n) {
    return n.index >= 0 ? fmt::format("{} {}", n.text, n.index) : std::string(n.text);
}

nlohmann::json event_json(const TimelineEvent& e, const std::vector<std::vector<TimelineArg>>& args) {
    nlohmann::json j = {{"name", name_of(e.name)}, {"cat", e.category}, {"ph", std::string(1, e.kind)},
                        {"ts", us(e.start_ns)}, {"pid", e.process}, {"tid", e.track}};
    if (e.kind == 'X') j["dur"] = us(e.dur_ns);
    if (e.kind == 'i') j["s"] = "t";
    if (e.args >= 0) j["args"] = args_json(args[std::size_t(e.args)]);
    return j;
}

nlohmann::json name_event(const char* what, int pid, int tid, nlohmann::json args) {
    return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

nlohmann::json chrome_trace(const Timeline& t) {
    std::vector<TimelineEvent> events = t.events();
    std::stable_sort(events.begin(), events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns > b.dur_ns;
    });
    nlohmann::json list = nlohmann::json::array();
    for (const auto& [pid, name] : t.process_names()) {
        list.push_back(name_event("process_name", pid, 0, {{"name", name}}));
        list.push_back(name_event("process_sort_index", pid, 0, {{"sort_index", pid}}));
    }
    for (const TimelineTrackName& n : t.track_names()) {
        list.push_back(name_event("thread_name", n.place.process, n.place.track, {{"name", n.name}}));
        list.push_back(name_event("thread_sort_index", n.place.process, n.place.track, {{"sort_index", n.sort}}));
    }
    const auto args = t.args();
    for (const TimelineEvent& e : events) list.push_back(event_json(e, args));
    nlohmann::json j = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
    if (t.dropped() > 0)
        j["otherData"] = {{"dropped_events", t.dropped()}, {"max_events", t.max_events()}};
    return j;
}

TimelineFile::TimelineFile(const std::string& path, TimelineDetail detail, const std::string& process_name)
    : path_(path), out_(path, std::ios::trunc), timeline_(detail) {
    if (!out_)
        fail("--timeline {}: cannot write this file; check that its folder exists and is writable", path);
    timeline_.name_process(1, process_name);
    set_active_timeline(&timeline_);
}

TimelineFile::~TimelineFile() {
    set_active_timeline(nullptr);
    if (written_) return;
    out_.close();
    std::remove(path_.c_str());
}

std::size_t TimelineFile::write() {
    set_active_timeline(nullptr);  // what follows is not part of the run
    const nlohmann::json j = chrome_trace(timeline_);
    out_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out_.close();
    written_ = true;
    if (!out_) fail("--timeline {}: writing the file failed (is the disk full?)", path_);
    if (timeline_.dropped() > 0)
        std::fprintf(stderr, "timeline: kept the first %zu events and dropped %zu: record a shorter run\n",
                     timeline_.max_events(), timeline_.dropped());
    return j["traceEvents"].size();
}

}  // namespace pd
