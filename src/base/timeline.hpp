// A timeline of what a run did, recorded in memory as it happens: spans (a
// name on a track, from a start to an end), instants and counters, which
// measure/timeline_file.hpp writes as a Chrome trace that Perfetto opens.
//
// Off by default. Code that records asks active_timeline(), a null pointer
// unless a TimelineFile is open, and does nothing more when it is null: no
// clock read, no allocation (TimelineScope and TimelineLaps check it once).
//
// Tracks: a process (one run: `pdlab generate`, one replay of a trace) holds
// tracks (Chrome's threads): the engine, the scheduler, one per request.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace pd {

// How much a forward pass records: its phase span only (prefill, decode, a
// mixed batch step), or also each layer and the parts of each layer (its
// matrix products, attention, and the rest).
enum class TimelineDetail { phases, layers };

// One argument of an event: a number, or a text when `text` is not empty.
struct TimelineArg {
    const char* key = "";
    double number = 0;
    std::string text;
};

// An event's name: a string literal (events keep the pointer, not a copy),
// and an index shown after it when >= 0 ("layer" 3 is "layer 3").
struct TimelineName {
    const char* text = "";
    int index = -1;
    TimelineName(const char* t, int i = -1) : text(t), index(i) {}
};

// 56 bytes, no heap: recording one is a store into memory touched in advance.
struct TimelineEvent {
    std::int64_t start_ns = 0;  // since the timeline began
    std::int64_t dur_ns = 0;    // spans only
    TimelineName name{""};
    const char* category = "";  // "phase", "layer", "product", "attention", "other", "request", ...
    int args = -1;              // >= 0: its arguments are Timeline::args()[args]; a counter's values
    int process = 1, track = 1;
    char kind = 'X';            // 'X' span, 'i' instant, 'C' counter (Chrome's "ph")
};

// Where spans go: a track of a process.
struct TimelinePlace {
    int process = 1, track = 1;
};

// A track's name and its place in the viewer's list (lower first).
struct TimelineTrackName {
    TimelinePlace place;
    std::string name;
    int sort = 0;
};

class Timeline {
public:
    // Room for `max_events` is allocated and touched now, before the run, so
    // that recording never waits for the system to map a fresh page (in a VM
    // that made an event cost 300 ns instead of 65). Past it, events are
    // counted and dropped: memory stays bounded (28 MB at the default, about
    // 0.15 s to touch).
    explicit Timeline(TimelineDetail detail, std::size_t max_events = 500000);

    TimelineDetail detail() const { return detail_; }
    std::int64_t now_ns() const;  // the monotonic clock, since the timeline began
    // A stamp of std::chrono::steady_clock in seconds (as another thread or
    // process on this machine took it) on the timeline's clock.
    std::int64_t steady_s_to_ns(double steady_s) const;

    // A new process (a run), named; returns its id. Process 1 exists from the start.
    int add_process(const std::string& name);
    void name_process(int process, const std::string& name);
    void name_track(TimelinePlace place, const std::string& name, int sort = 0);

    // Where the engine's forward passes record (process 1, track 1 unless moved).
    TimelinePlace engine_place() const;
    void set_engine_place(TimelinePlace place);

    void span(TimelinePlace at, TimelineName name, const char* category, std::int64_t start_ns,
              std::int64_t end_ns, std::vector<TimelineArg> args = {});
    void instant(TimelinePlace at, TimelineName name, const char* category, std::int64_t at_ns,
                 std::vector<TimelineArg> args = {});
    // A counter of a process: each arg is one series ("used" = 12 blocks).
    void counter(int process, TimelineName name, std::int64_t at_ns, std::vector<TimelineArg> values);

    // What was recorded (for the writer, once the run is over).
    std::vector<TimelineEvent> events() const;
    std::vector<std::vector<TimelineArg>> args() const;
    std::vector<std::pair<int, std::string>> process_names() const;
    std::vector<TimelineTrackName> track_names() const;
    std::size_t dropped() const;
    std::size_t max_events() const { return max_events_; }

private:
    void add(TimelineEvent e, std::vector<TimelineArg> args);

    TimelineDetail detail_;
    std::size_t max_events_;
    std::int64_t origin_ns_;
    mutable std::mutex mutex_;
    std::vector<TimelineEvent> events_;  // (max_events) touched at construction
    std::size_t count_ = 0;              // events recorded
    std::deque<std::vector<TimelineArg>> args_;  // the arguments of the events that have some
    std::size_t dropped_ = 0;
    std::vector<std::pair<int, std::string>> processes_;
    std::vector<TimelineTrackName> tracks_;
    TimelinePlace engine_place_;
};

// The timeline being recorded, or null (the default: nothing is recorded).
Timeline* active_timeline();
void set_active_timeline(Timeline* t);

// A span on the engine's track from construction to destruction. Inert (no
// clock read, no allocation) when no timeline is active.
class TimelineScope {
public:
    TimelineScope(const char* name, const char* category);
    ~TimelineScope();
    TimelineScope(const TimelineScope&) = delete;
    TimelineScope& operator=(const TimelineScope&) = delete;
    // Adds an argument shown with the span (ignored when inert).
    void arg(const char* key, double value);
    void arg(const char* key, std::string text);

private:
    Timeline* tl_;
    const char* name_;
    const char* category_;
    std::int64_t start_ns_ = 0;
    std::vector<TimelineArg> args_;
};

// Back-to-back spans on the engine's track, for the parts of a layer: each
// mark() ends the span begun by the previous one (or by construction), so the
// parts tile the time between them with one clock read each. enclose() adds
// a span around the marks since a saved point ("layer 3" around its parts).
// Inert when `on` is false.
class TimelineLaps {
public:
    TimelineLaps(Timeline* tl, bool on);
    void mark(const char* name, const char* category);
    std::int64_t last_ns() const { return last_ns_; }
    void enclose(std::int64_t since_ns, TimelineName name, const char* category);

private:
    Timeline* tl_;
    TimelinePlace at_;
    std::int64_t last_ns_ = 0;
};

}  // namespace pd
