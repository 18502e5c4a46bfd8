// How the engine's kernels split their work among the OpenMP threads.
//
// Every parallel piece of a forward pass (the products' panels, attention's
// heads, the rows of a norm) goes through parallel_items(). Outside a team
// each call opens its own parallel region. A short pass (at most kSmallM
// rows: a decode step) runs whole as one team instead (with_team): every
// thread of the team runs the same code, each parallel_items() call hands its
// items out among them and ends at a spinning barrier (a call of one item
// runs on one thread, and the others go on), and code that is not in a call
// must not write what the threads share, nor read it before sync_with_team().
//
// Why: a decode step is about 60 short calls (a 125M-parameter int4 model's
// products take 5-30 us each at 2 threads). On the 2-vCPU VMs measured, a
// parallel region cost 3-4 us and libgomp's barrier 1.4 us, this barrier
// 0.3-0.4 us (docs/performance.md, "One team per decode step").
#pragma once

#include <omp.h>

#include <atomic>

namespace pd {

enum class Schedule {
    fixed,    // item i to thread i mod n: the same split every call
    dynamic,  // items in order, each to the next thread that is free
};

namespace team_detail {

// The threads of one team and what they share. On its own cache lines: the
// threads spin on `generation`, and `next` is written by every thread.
struct Team {
    alignas(64) std::atomic<int> arrived{0};
    alignas(64) std::atomic<int> generation{0};
    alignas(64) std::atomic<int> next[2]{0, 0};  // dynamic calls alternate, see parallel_items
    int size = 1;

    // Every thread waits here until all `size` have arrived.
    void barrier();
};

// The calling thread's place in a team (null outside one).
struct Member {
    Team* team = nullptr;
    int id = 0;          // 0 .. team->size - 1; 0 is the thread that called with_team
    unsigned calls = 0;  // parallel_items calls made so far: the same count on every member
    bool in_item = false;      // running an item: a call made from one runs inline (one thread is there)
    bool after_alone = false;  // the last call ran on thread 0 alone, with no barrier after it
};
Member& member();

}  // namespace team_detail

// True on the threads of a team (with_team's body).
inline bool in_team() { return team_detail::member().team != nullptr; }

// This thread's number in its team (0 outside one): 0 is the one that started it.
inline int team_thread() { return team_detail::member().id; }

// The threads a parallel_items() call spreads over.
inline int worker_count() {
    const team_detail::Member& me = team_detail::member();
    return me.team ? me.team->size : omp_get_max_threads();
}

// Whether with_team() may run a pass as a team here: several threads, and
// not already inside a parallel region. Also with OMP_WAIT_POLICY=passive
// (what pdlab picks on a busy machine): its threads sleep between passes, and
// a team wakes them once a pass instead of once a product.
inline bool team_possible() { return omp_get_max_threads() > 1 && !omp_in_parallel() && !in_team(); }

// Runs item(0 .. items-1) once each, on the threads, and returns when all are
// done. In a team every member must make the same calls in the same order, and
// a call of one item runs on thread 0 while the others go on to the next call
// (which waits for it if it is shared); a call from inside an item runs its
// items there, on that thread. Outside a team, no item or one, one thread, or
// a call from inside a parallel region runs in a plain loop, not through an
// "if" clause: libgomp allocates a team for every parallel region it
// serialises, and decode must not allocate.
template <typename Item>
void parallel_items(int items, Schedule schedule, Item&& item) {
    team_detail::Member& me = team_detail::member();
    if (me.team && me.in_item) {
        for (int i = 0; i < items; i++) item(i);
    } else if (me.team) {
        team_detail::Team& t = *me.team;
        const unsigned call = me.calls++;
        const bool alone = items <= 1 || t.size == 1;  // thread 0 runs it; the others go on
        // The members see what thread 0 wrote alone before they share a call
        // (which may read it), and thread 0 sees what they wrote in one after
        // it. Calls alone one after another need no barrier: a decode step's
        // norm, rope, cache writes and residual adds are one row each.
        if (!alone && me.after_alone) t.barrier();
        me.in_item = true;
        if (alone) {
            if (me.id == 0)
                for (int i = 0; i < items; i++) item(i);
        } else if (schedule == Schedule::fixed) {
            for (int i = me.id; i < items; i += t.size) item(i);
        } else {
            std::atomic<int>& next = t.next[call % 2];
            for (int i = next.fetch_add(1, std::memory_order_relaxed); i < items;
                 i = next.fetch_add(1, std::memory_order_relaxed))
                item(i);
        }
        // Counter `call % 2` hands out a dynamic call's items. The other one was
        // last used by an earlier shared call, which every member has left (its
        // barrier), and is next used after a barrier this thread reaches later:
        // reset it now, whatever this call is.
        if (me.id == 0) t.next[(call + 1) % 2].store(0, std::memory_order_relaxed);
        me.in_item = false;
        if (!alone) t.barrier();
        me.after_alone = alone;
    } else if (items <= 1 || omp_get_max_threads() == 1 || omp_in_parallel()) {
        for (int i = 0; i < items; i++) item(i);
    } else if (schedule == Schedule::dynamic) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < items; i++) item(i);
    } else {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < items; i++) item(i);
    }
}

// Before a member reads, outside a parallel_items() call, what earlier calls
// wrote (a product preparing its copy of x, say): waits for a call thread 0
// ran alone. Nothing to do outside a team, or after a shared call.
inline void sync_with_team() {
    team_detail::Member& me = team_detail::member();
    if (me.team && !me.in_item && me.after_alone) {
        me.team->barrier();
        me.after_alone = false;
    }
}

// Runs body() on one thread (the caller) when `use` is false, else on every
// thread as one team (see the top of this file). body must not throw.
template <typename Body>
void with_team(bool use, Body&& body) {
    if (!use) return body();
    team_detail::Team team;
#pragma omp parallel
    {
        team_detail::Member& me = team_detail::member();
#pragma omp single
        team.size = omp_get_num_threads();  // its implied barrier publishes it
        me = {&team, omp_get_thread_num(), 0};
        body();
        me = {};
    }
}

}  // namespace pd
