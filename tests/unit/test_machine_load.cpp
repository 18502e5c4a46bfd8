// engine.timing.machine_load_*: reading how busy the machine is from /proc's
// text, the OpenMP threads and wait policy chosen from it, and when timings
// get a warning. Pure functions of the text: no test depends on the load.
#include "check.hpp"
#include "measure/machine_load.hpp"

using namespace pd;

namespace {

// /proc/stat as Linux writes it: the "cpu" line's eighth number is steal.
const char* kStat =
    "cpu  100 5 50 800 10 0 5 30 0 0\n"
    "cpu0 50 2 25 400 5 0 2 15 0 0\n"
    "intr 12345 0 0\n"
    "procs_running 3\n"
    "procs_blocked 0\n";

}  // namespace

TEST_CASE("engine.timing.machine_load_parse") {
    const MachineLoad m = parse_machine_load("2.50 1.20 0.80 3/150 4242\n", kStat, 2);
    CHECK(m.cores == 2);
    CHECK(m.load1 == doctest::Approx(2.5));
    CHECK(m.runnable_now == 3);
    CHECK(m.steal_ticks == 30);
    CHECK(m.total_ticks == 100 + 5 + 50 + 800 + 10 + 0 + 5 + 30);
    // Unreadable files read as "": an idle machine of at least one core, not a crash.
    const MachineLoad none = parse_machine_load("", "", 0);
    CHECK(none.cores == 1);
    CHECK(none.load1 == 0);
    CHECK(none.runnable_now == 0);
}

TEST_CASE("engine.timing.machine_load_busy_cores") {
    MachineLoad m;
    m.cores = 2;
    // Two busy loops and this process: the average and the snapshot agree on 2.
    m.load1 = 2.0, m.runnable_now = 3;
    CHECK(busy_cores(m, 1) == doctest::Approx(2.0));
    // A run that just ended still weighs on the average; nothing runs now.
    m.load1 = 1.6, m.runnable_now = 1;
    CHECK(busy_cores(m, 1) == doctest::Approx(0.0));
    // A burst in the snapshot the average has not seen.
    m.load1 = 0.1, m.runnable_now = 6;
    CHECK(busy_cores(m, 1) == doctest::Approx(0.1));
}

TEST_CASE("engine.timing.machine_load_openmp_choice") {
    // Idle: every core, spinning at barriers.
    OpenmpChoice idle = openmp_choice_for(0.2, 2);
    CHECK(idle.threads == 2);
    CHECK(!idle.passive);
    // Both cores taken: one thread (no barriers), and it sleeps when it waits.
    OpenmpChoice busy = openmp_choice_for(2.0, 2);
    CHECK(busy.threads == 1);
    CHECK(busy.passive);
    // Far more work than cores: still one thread.
    CHECK(openmp_choice_for(9.0, 2).threads == 1);
    // One of eight cores taken: seven threads, passive.
    OpenmpChoice some = openmp_choice_for(1.0, 8);
    CHECK(some.threads == 7);
    CHECK(some.passive);
}

TEST_CASE("engine.timing.machine_load_warning") {
    MachineLoad start = parse_machine_load("0.10 0.1 0.1 1/100 1", kStat, 2);
    MachineLoad end = start;
    end.total_ticks += 1000;
    CHECK(unreliable_timing_warning(start, end) == "");
    // Other work on a core as the timing started.
    MachineLoad loaded = parse_machine_load("2.0 1.0 1.0 3/100 1", kStat, 2);
    const std::string w = unreliable_timing_warning(loaded, end);
    CHECK(w.find("unreliable") != std::string::npos);
    CHECK(w.find("2.0 of the 2 cores") != std::string::npos);
    // A hypervisor took 10% of the time meanwhile.
    end.steal_ticks += 100;
    CHECK(unreliable_timing_warning(start, end).find("hypervisor took 10%") != std::string::npos);
}
