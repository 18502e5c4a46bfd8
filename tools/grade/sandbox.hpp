// The sandbox every student build and check runs in: bubblewrap (bwrap) with
// new user, pid, net, ipc, uts and cgroup namespaces, a uid of 1000 inside,
// a private /tmp and /dev/shm, the system read-only, and only the folders the
// run names bound in (the work folder's build read-only or writable, the
// check's scratch folder writable). Nothing else of the machine is there: no
// submissions, no gradebook, no instructor's kit, no solutions/.
//
// Limits that cover children come from run_process: RLIMIT_AS, RLIMIT_CPU,
// RLIMIT_FSIZE and RLIMIT_NPROC are set before bwrap is exec'd and inherit to
// every process in the sandbox. bwrap runs with --die-with-parent and its
// child is the pid namespace's init: when the grader kills bwrap (timeout),
// the kernel kills every process of the namespace, daemons included.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pd::grade {

namespace fs = std::filesystem;

struct SandboxSpec {
    std::vector<fs::path> read_only;  // bound at the same path, read-only
    std::vector<fs::path> writable;   // bound at the same path, writable
    fs::path cwd;                     // inside; must be one of the above or below one
};

// The command line that runs `argv` in the sandbox with exactly `env` (plus
// PATH and HOME=/tmp): the grader's own environment does not go in.
std::vector<std::string> sandboxed_argv(const SandboxSpec& box, const std::map<std::string, std::string>& env,
                                        const std::vector<std::string>& argv);

// Tries to make a sandbox once (bwrap running /bin/true, as `run_as` when
// set): nullopt when it works, else why not (bwrap missing, user namespaces
// off or closed to unprivileged users, ...).
std::optional<std::string> sandbox_unavailable(std::optional<unsigned> run_as);

}  // namespace pd::grade
