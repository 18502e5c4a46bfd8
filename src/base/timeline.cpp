#include "base/timeline.hpp"

#include <atomic>
#include <chrono>

namespace pd {

namespace {

std::int64_t clock_ns() {
    using namespace std::chrono;
    return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

std::atomic<Timeline*> active{nullptr};

}  // namespace

Timeline* active_timeline() { return active.load(std::memory_order_relaxed); }
void set_active_timeline(Timeline* t) { active.store(t, std::memory_order_relaxed); }

Timeline::Timeline(TimelineDetail detail, std::size_t max_events)
    : detail_(detail),
      max_events_(max_events),
      origin_ns_(clock_ns()),
      events_(max_events),  // value-initialised: every page written once, now
      processes_{{1, "pdlab"}} {}

std::int64_t Timeline::now_ns() const { return clock_ns() - origin_ns_; }

std::int64_t Timeline::steady_s_to_ns(double steady_s) const { return std::int64_t(steady_s * 1e9) - origin_ns_; }

int Timeline::add_process(const std::string& name) {
    std::lock_guard lock(mutex_);
    const int id = processes_.back().first + 1;
    processes_.emplace_back(id, name);
    return id;
}

void Timeline::name_process(int process, const std::string& name) {
    std::lock_guard lock(mutex_);
    for (auto& [id, n] : processes_)
        if (id == process) n = name;
}

void Timeline::name_track(TimelinePlace place, const std::string& name, int sort) {
    std::lock_guard lock(mutex_);
    tracks_.push_back({place, name, sort});
}

TimelinePlace Timeline::engine_place() const {
    std::lock_guard lock(mutex_);
    return engine_place_;
}

void Timeline::set_engine_place(TimelinePlace place) {
    std::lock_guard lock(mutex_);
    engine_place_ = place;
}

void Timeline::add(TimelineEvent e, std::vector<TimelineArg> args) {
    std::lock_guard lock(mutex_);
    if (count_ == max_events_) {
        dropped_++;
        return;
    }
    if (!args.empty()) {
        e.args = int(args_.size());
        args_.push_back(std::move(args));
    }
    events_[count_++] = e;
}

void Timeline::span(TimelinePlace at, TimelineName name, const char* category, std::int64_t start_ns,
                    std::int64_t end_ns, std::vector<TimelineArg> args) {
    add({start_ns, end_ns - start_ns, name, category, -1, at.process, at.track, 'X'}, std::move(args));
}

void Timeline::instant(TimelinePlace at, TimelineName name, const char* category, std::int64_t at_ns,
                       std::vector<TimelineArg> args) {
    add({at_ns, 0, name, category, -1, at.process, at.track, 'i'}, std::move(args));
}

void Timeline::counter(int process, TimelineName name, std::int64_t at_ns, std::vector<TimelineArg> values) {
    add({at_ns, 0, name, "counter", -1, process, 0, 'C'}, std::move(values));
}

std::vector<TimelineEvent> Timeline::events() const {
    std::lock_guard lock(mutex_);
    return {events_.begin(), events_.begin() + std::ptrdiff_t(count_)};
}

std::vector<std::vector<TimelineArg>> Timeline::args() const {
    std::lock_guard lock(mutex_);
    return {args_.begin(), args_.end()};
}

std::vector<std::pair<int, std::string>> Timeline::process_names() const {
    std::lock_guard lock(mutex_);
    return processes_;
}

std::vector<TimelineTrackName> Timeline::track_names() const {
    std::lock_guard lock(mutex_);
    return tracks_;
}

std::size_t Timeline::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

TimelineScope::TimelineScope(const char* name, const char* category)
    : tl_(active_timeline()), name_(name), category_(category) {
    if (tl_) start_ns_ = tl_->now_ns();
}

TimelineScope::~TimelineScope() {
    if (tl_) tl_->span(tl_->engine_place(), name_, category_, start_ns_, tl_->now_ns(), std::move(args_));
}

void TimelineScope::arg(const char* key, double value) {
    if (tl_) args_.push_back({key, value, {}});
}

void TimelineScope::arg(const char* key, std::string text) {
    if (tl_) args_.push_back({key, 0, std::move(text)});
}

TimelineLaps::TimelineLaps(Timeline* tl, bool on) : tl_(on ? tl : nullptr) {
    if (!tl_) return;
    at_ = tl_->engine_place();
    last_ns_ = tl_->now_ns();
}

void TimelineLaps::mark(const char* name, const char* category) {
    if (!tl_) return;
    const std::int64_t now = tl_->now_ns();
    tl_->span(at_, name, category, last_ns_, now);
    last_ns_ = now;
}

void TimelineLaps::enclose(std::int64_t since_ns, TimelineName name, const char* category) {
    if (tl_) tl_->span(at_, name, category, since_ns, last_ns_);
}

}  // namespace pd
