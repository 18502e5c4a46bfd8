// Running one program under limits: a wall-clock time limit (the whole process
// group is killed when it runs out), RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE and
// RLIMIT_NPROC (set before exec, so every child inherits them), optionally
// inside the sandbox (sandbox.hpp), no core files, stdin from /dev/null, and stdout and stderr captured together in
// the order they were written.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox.hpp"

namespace pd::grade {

struct RunSpec {
    std::vector<std::string> argv;              // argv[0] is looked up on PATH when it has no '/'
    std::string cwd;                            // empty: the grader's own
    std::map<std::string, std::string> env;     // set (or replaced) on top of the grader's environment
    double timeout_s = 0;                       // 0: no time limit
    std::size_t mem_bytes = 0;                  // RLIMIT_AS; 0: no limit
    std::size_t file_bytes = 0;                 // RLIMIT_FSIZE; 0: no limit
    std::size_t keep_bytes = 256 * 1024;        // output kept: the first and the last keep_bytes / 2
    double cpu_s = 0;                           // RLIMIT_CPU of each process; 0: no limit
    // RLIMIT_NPROC: processes it may add beyond those of the uid it runs as
    // when it starts (the limit counts every process of the real uid, and
    // does not bind root: a sandbox run as root needs run_as).
    std::size_t extra_procs = 0;
    // Set: the child drops to this uid and gid (no supplementary groups)
    // before exec; needs root. Every process it starts is then that uid's,
    // so RLIMIT_NPROC caps them all together.
    std::optional<unsigned> run_as;
    std::optional<SandboxSpec> sandbox;         // set: argv runs inside bwrap (sandbox.hpp)
};

struct RunResult {
    bool started = false;        // false: the program could not be started (see error)
    std::string error;           // why it could not be started
    int exit_code = -1;          // when it exited by itself
    int signal = 0;              // when a signal ended it (not our time-limit kill)
    bool timed_out = false;      // it ran past timeout_s and was killed
    double seconds = 0;
    std::string output;          // stdout + stderr, with the middle cut out when it was long
    std::size_t output_bytes = 0;  // everything it wrote, kept or not

    bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
    // "exit status 1", "killed by signal 11 (SIGSEGV, Segmentation fault)", "timed out after 10 s", ...
    std::string describe() const;
};

RunResult run_process(const RunSpec& spec);

// On SIGINT, SIGTERM or SIGHUP, kill the process group run_process() is
// waiting for, then die of the same signal: no student program outlives ^C.
void install_interrupt_handlers();

// "SIGSEGV, Segmentation fault" for 11.
std::string signal_name(int sig);

}  // namespace pd::grade
