// How much of the machine other work is taking: the load average, the tasks
// runnable right now, and the CPU time a hypervisor stole. Timings taken while
// other work runs measure the sharing as much as the code; and OpenMP threads
// that spin at barriers while their core is taken make a busy machine cost 50x
// instead of 2x (src/pdlab/startup_load.cpp chooses how they run from this).
// Read with plain system calls into fixed buffers, so that it also works before
// the C++ runtime has started.
#pragma once

#include <string>

namespace pd {

struct MachineLoad {
    int cores = 1;              // online logical CPUs
    double load1 = 0;           // 1-minute load average (every task, this process's too)
    int runnable_now = 0;       // tasks running or ready to run right now, this process's too
    long long steal_ticks = 0;  // since boot, from /proc/stat's "cpu" line
    long long total_ticks = 0;  // all CPU time since boot, same line
};

MachineLoad read_machine_load();
// The parse behind it, for tests: /proc/loadavg's text, /proc/stat's text.
MachineLoad parse_machine_load(const char* loadavg, const char* stat, int cores);

// Cores other work keeps busy: the smaller of the load average (taken before
// this process has weighed on it) and the tasks runnable now besides
// `own_runnable` (this process's running threads). The
// smaller, because each alone misleads: the average still counts a run that
// just ended for a minute, and the snapshot counts a burst as if it lasted.
double busy_cores(const MachineLoad& m, int own_runnable);

// How OpenMP should run beside `busy` cores of other work on `cores` cores:
// threads for the cores left free (at least 1), and waiting at barriers by
// sleeping at once (passive) rather than spinning first, once other work
// takes half a core. Why: a thread spinning at a barrier burns the core time
// the thread it waits for needs, and a thread on a core another process holds
// loses its turn for ms at every barrier: prefill went 50x slower under two
// compiles (issue #36). On an idle machine spinning saves a futex wake per
// step (passive doubles a tiny model's decode step), so idle keeps it.
struct OpenmpChoice {
    int threads = 1;
    bool passive = false;
};
OpenmpChoice openmp_choice_for(double busy, int cores);

// "" when timings taken between `start` and `end` can be trusted, else a
// one-line warning saying why (other work on the cores, or stolen time).
std::string unreliable_timing_warning(const MachineLoad& start, const MachineLoad& end);

}  // namespace pd
