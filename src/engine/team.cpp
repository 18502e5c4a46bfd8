#include "engine/team.hpp"

#include <sched.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pd {
namespace team_detail {

Member& member() {
    thread_local Member me;
    return me;
}

static void spin_pause() {
#if defined(__x86_64__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// The last to arrive starts the next generation; the others spin until it
// does. After many spins a waiter yields its core, so that a member the OS
// has descheduled can run (a spin costs about 10-40 ns: 2^14 of them are
// well past a product's time).
void Team::barrier() {
    const int gen = generation.load(std::memory_order_relaxed);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) == size - 1) {
        arrived.store(0, std::memory_order_relaxed);
        generation.store(gen + 1, std::memory_order_release);
        return;
    }
    for (int spins = 0; generation.load(std::memory_order_acquire) == gen; spins++) {
        if (spins < (1 << 14)) spin_pause();
        else sched_yield();
    }
}

}  // namespace team_detail

}  // namespace pd
