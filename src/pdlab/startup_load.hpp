// The machine's load as the program started (measure/machine_load.hpp), and
// what is chosen from it: how many OpenMP threads pdlab and the lab programs
// run and how they wait at a barrier (machine_load.hpp's openmp_choice_for
// says why), and whether the timings they print can be trusted.
//
// The OpenMP runtime reads OMP_NUM_THREADS and OMP_WAIT_POLICY once, as it
// loads, so the choice runs from the program's .preinit_array, ahead of every
// library's constructor, and where it changes them runs the program again with
// them set (PDLAB_OPENMP_FROM_LOAD marks that start; processes it starts
// inherit the three). What the environment already says (OMP_NUM_THREADS,
// OMP_WAIT_POLICY, GOMP_SPINCOUNT) is kept, and --threads overrides the count.
#pragma once

#include <string>

#include "measure/machine_load.hpp"

namespace pd::cli {

struct StartupLoad {
    MachineLoad machine;        // read before anything of this program ran
    double busy_cores = 0;      // other work on the cores then
    int threads = 0;            // the default set here (0: the environment's OMP_NUM_THREADS)
    bool passive = false;       // OMP_WAIT_POLICY=PASSIVE was set here
    bool user_policy = false;   // OMP_WAIT_POLICY or GOMP_SPINCOUNT was already set
};

const StartupLoad& startup_load();

// The default thread count and why, for --help: "2: all 2 cores are free".
std::string default_threads_note();

// For the commands that time decode steps, on stderr: with no --threads
// (threads_option 0), the default count and why; with one, a note only when
// the threads were set here to wait passively (a busy machine), what that
// costs and how to turn it off.
void print_threads_note(int threads_option);

// Prints a one-line warning to stderr when other work or a hypervisor took
// CPU time since the program started (the timings it prints are unreliable).
// Every command and lab program that prints timings calls it at the end.
void warn_if_timings_unreliable();

}  // namespace pd::cli
