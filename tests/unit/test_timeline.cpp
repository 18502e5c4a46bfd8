// engine.timing.timeline_*: the recorder (base/timeline.hpp) and its Chrome
// trace (measure/timeline_file.hpp), without a model: nothing is recorded
// unless a timeline is active, laps tile the time between their marks,
// memory stays bounded, and the JSON has Chrome's fields, parents first.
#include <chrono>

#include "check.hpp"
#include "base/timeline.hpp"
#include "measure/timeline_file.hpp"

using namespace pd;

namespace {

// Makes `t` the active timeline for the scope of a test.
struct Activate {
    explicit Activate(Timeline& t) { set_active_timeline(&t); }
    ~Activate() { set_active_timeline(nullptr); }
};

}  // namespace

TEST_CASE("engine.timing.timeline_off_records_nothing") {
    Timeline t(TimelineDetail::layers, 16);
    REQUIRE(active_timeline() == nullptr);
    {
        TimelineScope span("decode", "phase");
        span.arg("rows", 1);
        TimelineLaps laps(active_timeline(), true);
        laps.mark("qkv", "product");
        laps.enclose(0, {"layer", 0}, "layer");
    }
    CHECK(t.events().empty());
    {
        Activate on(t);
        TimelineScope span("decode", "phase");
        span.arg("rows", 1);
    }
    const auto events = t.events();
    REQUIRE(events.size() == 1);
    CHECK(std::string(events[0].name.text) == "decode");
    CHECK(events[0].dur_ns >= 0);
    REQUIRE(events[0].args >= 0);
    CHECK(t.args()[std::size_t(events[0].args)][0].number == 1);
}

TEST_CASE("engine.timing.timeline_laps_tile_their_span") {
    Timeline t(TimelineDetail::layers, 16);
    Activate on(t);
    TimelineLaps laps(&t, true);
    const std::int64_t start = laps.last_ns();
    laps.mark("norm", "other");
    laps.mark("qkv", "product");
    laps.mark("attention", "attention");
    laps.enclose(start, {"layer", 3}, "layer");
    const auto e = t.events();
    REQUIRE(e.size() == 4);
    CHECK(e[0].start_ns == start);
    CHECK(e[1].start_ns == e[0].start_ns + e[0].dur_ns);  // each part starts where the last ended
    CHECK(e[2].start_ns == e[1].start_ns + e[1].dur_ns);
    CHECK(e[3].start_ns == start);                        // the layer spans exactly its parts
    CHECK(e[3].dur_ns == e[0].dur_ns + e[1].dur_ns + e[2].dur_ns);
    CHECK(e[3].name.index == 3);
    // Inert laps: no clock, no events.
    TimelineLaps off(&t, false);
    off.mark("norm", "other");
    CHECK(t.events().size() == 4);
}

// A steady_clock stamp taken elsewhere (another rank on this machine) lands
// where the timeline's own clock puts that moment.
TEST_CASE("engine.timing.timeline_steady_seconds") {
    pd::Timeline tl(pd::TimelineDetail::phases, 16);
    const std::int64_t before = tl.now_ns();
    const double steady_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    const std::int64_t after = tl.now_ns();
    const std::int64_t at = tl.steady_s_to_ns(steady_s);
    // A double holds the epoch's seconds to about a microsecond.
    CHECK(at >= before - 2000);
    CHECK(at <= after + 2000);
}

TEST_CASE("engine.timing.timeline_bounded") {
    Timeline t(TimelineDetail::phases, 3);
    for (int i = 0; i < 5; i++) t.span({1, 1}, "step", "scheduler", i * 10, i * 10 + 5);
    CHECK(t.events().size() == 3);
    CHECK(t.dropped() == 2);
    const nlohmann::json j = chrome_trace(t);
    CHECK(j["otherData"]["dropped_events"] == 2);
}

TEST_CASE("engine.timing.timeline_chrome_trace") {
    Timeline t(TimelineDetail::layers, 16);
    t.name_process(1, "pdlab test");
    const int replay = t.add_process("replay");
    t.name_track({replay, 10}, "request 0", 10);
    // A child recorded before its parent, both starting at 1000 ns: the parent comes first.
    t.span({1, 1}, "norm", "other", 1000, 1250);
    t.span({1, 1}, {"layer", 2}, "layer", 1000, 3001);
    t.instant({replay, 10}, "finished", "request", 4000, {{"reason", 0, "length"}});
    t.counter(replay, "KV blocks", 4000, {{"used", 7, {}}});
    const nlohmann::json j = chrome_trace(t);
    const auto& ev = j["traceEvents"];
    std::vector<nlohmann::json> spans, metadata;
    for (const auto& e : ev) (e["ph"] == "M" ? metadata : spans).push_back(e);
    REQUIRE(spans.size() == 4);
    CHECK(spans[0]["name"] == "layer 2");
    CHECK(spans[0]["ph"] == "X");
    CHECK(spans[0]["ts"].get<double>() == doctest::Approx(1.0));      // microseconds
    CHECK(spans[0]["dur"].get<double>() == doctest::Approx(2.001));   // nanoseconds kept as decimals
    CHECK(spans[1]["name"] == "norm");
    CHECK(spans[2]["ph"] == "i");
    CHECK(spans[2]["s"] == "t");
    CHECK(spans[2]["args"]["reason"] == "length");
    CHECK(spans[3]["ph"] == "C");
    CHECK(spans[3]["args"]["used"] == 7);
    CHECK(spans[3]["pid"] == replay);
    bool named_process = false, named_track = false;
    for (const auto& m : metadata) {
        named_process |= m["name"] == "process_name" && m["pid"] == replay && m["args"]["name"] == "replay";
        named_track |= m["name"] == "thread_name" && m["tid"] == 10 && m["args"]["name"] == "request 0";
    }
    CHECK(named_process);
    CHECK(named_track);
}
