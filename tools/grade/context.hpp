// One grading run: the instructor's options, the lab and its rubric, the work
// folder's parts (see workdir.hpp) and what the build and the reference
// solution told us. main() fills the options, lab and paths; the rest is
// filled once by prepare_reference() before any student is graded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab.hpp"
#include "observations.hpp"
#include "rubric.hpp"

namespace pd::grade {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Options {
    fs::path kit, submissions, out, work;
    std::string lab;
    double timeout_s = 60;
    double build_timeout_s = 600;
    std::size_t mem_mb = 4096;
    int jobs = 0;
    int threads = 2;
    std::optional<std::uint64_t> seed;
    std::vector<std::string> students;  // only these (default: all)
    bool sandbox = true;                // false: --unsafe-no-sandbox
    unsigned sandbox_uid = 64000;       // --sandbox-uid: the uid (and gid) sandboxes run as when the grader is root
    std::string shard;                  // "K/N": grade only that part (shard.hpp)
    std::vector<fs::path> merge;        // --merge: the shards' --out folders
};

// Processes (threads count too) one sandboxed build or check may add: the
// lab programs use a few OpenMP threads, a compile a handful of processes.
inline constexpr std::size_t kSandboxProcesses = 256;
// The same with a dedicated uid: RLIMIT_NPROC then counts only the sandbox's
// own processes (threads included), so it can be small, and with RLIMIT_AS on
// each it bounds a check's memory: at most (32 + --threads) x --mem-mb.
inline constexpr std::size_t kSandboxUidProcesses = 32;

struct Context {
    Options opt;
    Lab lab;
    Rubric rubric;
    std::uint64_t seed = 0;
    fs::path work_pristine;  // the kit's files as they were when the run started
    fs::path work_src, work_build, work_runs;
    std::vector<std::string> kit_file_list;
    std::set<std::string> lab_source_paths;  // relative, in WORK/src
    std::vector<fs::path> test_bins;
    std::map<std::string, std::string> test_env;
    fs::path program;
    std::vector<std::string> ninja_targets;
    // Per exercise source: the compile that writes it unoptimised, nothing inlined
    // (forbidden.hpp), from compile_commands.json as meson wrote it, before any
    // student's build could change the file.
    std::vector<std::vector<std::string>> unoptimized_compiles;
    std::vector<std::optional<json>> reference_json;  // per check
    std::vector<int> reference_cases;                 // per test check: how many test cases the solution ran
    // Per test check: what the solution's test cases observed (observations.hpp);
    // empty while the reference itself runs.
    std::vector<std::vector<CaseObservations>> reference_observed;
};

// Reports speak of the student's kit, not of the work folder: a built file as
// "build/...", and the work folder's paths cut out of the tools' output.
std::string in_kit(const Context& c, const fs::path& built);
std::string tidy(const Context& c, const std::string& text);

// `s` as one shell word, quoted only when it needs to be.
std::string shell_quote(const std::string& s);

// A progress line on stderr: "pdlab-grade: <line>".
void say(const std::string& line);

// An empty scratch folder WORK/runs/<name>, the working directory of checks,
// owned by the sandbox's uid when there is one.
fs::path fresh_scratch(const Context& c, const std::string& name);

// The uid sandboxes run as: --sandbox-uid when the grader is root and
// sandboxes are on (it can switch uid, and root ignores RLIMIT_NPROC), else
// none (they run as the grader's own uid).
std::optional<unsigned> sandbox_uid(const Context& c);
// Processes one sandboxed build (`build`) or check may start (RLIMIT_NPROC).
std::size_t sandbox_processes(const Context& c, bool build);
// Makes `dir` and everything in it the sandbox uid's, so a sandbox may write
// there; nothing without one.
void hand_to_sandbox(const Context& c, const fs::path& dir);
// Throws UsageError when the sandbox uid could not pass through a folder
// above `dir` (bwrap, run as that uid, binds WORK/src and WORK/build).
void check_sandbox_reaches(const Context& c, const fs::path& dir);

}  // namespace pd::grade
