// engine.team: parallel_items hands every item out exactly once, and a call
// returns only when all of its items are done, inside a team (a decode step)
// and outside one.
#include <omp.h>

#include <atomic>
#include <vector>

#include "check.hpp"
#include "engine/team.hpp"

using namespace pd;

namespace {

// Calls of 0, 1, 2, 5 and 17 items, `calls` times over. Each item counts its
// runs and records its call; after each call the calling thread checks that
// every item of that call has run (the call's barrier, or sync_with_team after
// a call of one item). Returns the errors seen.
// `last` is shared by the members of a team, as what a pass writes is.
int run_calls(Schedule schedule, int calls, std::vector<std::atomic<int>>& runs, std::vector<std::atomic<int>>& last) {
    const int sizes[] = {0, 1, 2, 5, 17};
    int errors = 0;
    for (int c = 0; c < calls; c++) {
        const int n = sizes[c % 5];
        parallel_items(n, schedule, [&](int i) {
            runs[std::size_t(c) * 17 + i]++;
            last[i].store(c, std::memory_order_relaxed);
        });
        // A call of one item runs on thread 0 while the others go on: they see
        // it once they sync. Another member may have gone on to later calls
        // already (thread 0 through calls of one item), so a later call's mark
        // is no error; an earlier one is.
        if (n == 1) sync_with_team();
        for (int i = 0; i < n; i++)
            if (last[i].load(std::memory_order_relaxed) < c) errors++;
    }
    return errors;
}

void check_each_ran_once(const std::vector<std::atomic<int>>& runs, int calls) {
    const int sizes[] = {0, 1, 2, 5, 17};
    int wrong = 0;
    for (int c = 0; c < calls; c++)
        for (int i = 0; i < 17; i++) wrong += runs[std::size_t(c) * 17 + i] != (i < sizes[c % 5] ? 1 : 0);
    CHECK(wrong == 0);
}

// omp_set_num_threads for one scope.
struct Threads {
    int saved = omp_get_max_threads();
    explicit Threads(int n) { omp_set_num_threads(n); }
    ~Threads() { omp_set_num_threads(saved); }
};

}  // namespace

TEST_CASE("engine.team.items_once_each_inside_and_outside_a_team") {
    const int calls = 500;
    for (int threads : {1, 2, 3})
        for (Schedule schedule : {Schedule::fixed, Schedule::dynamic})
            for (bool team : {false, true}) {
                INFO(fmt::format("threads {}, {} schedule, {}", threads, schedule == Schedule::fixed ? "fixed" : "dynamic",
                                 team ? "in a team" : "outside a team"));
                Threads t(threads);
                if (team && threads > 1) REQUIRE(team_possible());  // else this case tests nothing new
                std::vector<std::atomic<int>> runs(std::size_t(calls) * 17), last(17);
                for (auto& l : last) l = -1;
                std::atomic<int> errors = 0, members = 0;
                with_team(team && team_possible(), [&] {
                    members++;
                    errors += run_calls(schedule, calls, runs, last);
                });
                CHECK(members == (team && threads > 1 ? threads : 1));
                CHECK(errors == 0);
                check_each_ran_once(runs, calls);
            }
}

TEST_CASE("engine.team.a_call_from_an_item_runs_there") {
    // rmsnorm on one row from inside a row's item, say: the nested call's
    // items run on the item's thread, once each, and nobody waits for the others.
    Threads t(3);
    REQUIRE(team_possible());
    std::atomic<int> inner = 0, outer = 0, members_in_team = 0, nested_possible = 0;
    with_team(true, [&] {
        members_in_team += in_team();
        nested_possible += team_possible();  // no team inside a team
        parallel_items(4, Schedule::dynamic, [&](int) {
            outer++;
            parallel_items(5, Schedule::fixed, [&](int) { inner++; });
        });
    });
    CHECK(members_in_team == 3);
    CHECK(nested_possible == 0);
    CHECK(outer == 4);
    CHECK(inner == 20);
    CHECK_FALSE(in_team());
}
