// pdlab-grade: grades a class's submissions for one lab against the reference
// solution. Run with --help; docs/instructors.md is the guide.
//
// How a run goes:
//   1. WORK/pristine gets the kit's files without solutions/, WORK/src a copy of
//      them; WORK/build is one meson build of WORK/src with -Dexercises=starter
//      (configured once, reused with --work).                         build.cpp
//   2. The reference solution's exercise files go into the lab folder; ninja
//      builds the lab's program and test binary (and, the first time, the
//      engine). Every rubric check must pass with it under this run's seed,
//      and each output check's reference JSON is kept.            reference.cpp
//   3. For each student: WORK/src is restored from WORK/pristine, the student's
//      exercise files replace the lab's, ninja rebuilds only that lab, and each
//      check runs under a time and a memory limit with PDLAB_TEST_SEED set.
//                                              submissions.cpp, build.cpp, checks.cpp
//   4. OUT/gradebook.csv, OUT/reports/<student>.md and OUT/grading.md. report.cpp
// This file: the command line, and the run from step 1 to 4.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "build.hpp"
#include "checks.hpp"
#include "context.hpp"
#include "lab.hpp"
#include "process.hpp"
#include "reference.hpp"
#include "sandbox.hpp"
#include "shard.hpp"
#include "report.hpp"
#include "submissions.hpp"
#include "workdir.hpp"
#include "base/kit_root.hpp"  // the default --kit

namespace pd::grade {
namespace {

std::string local_time_now() {
    char started[64];
    std::time_t now = std::time(nullptr);
    std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    return started;
}

void check_kit(Options& opt) {
    if (opt.kit.empty()) throw UsageError("say where the kit is: --kit DIR");
    opt.kit = fs::weakly_canonical(opt.kit);
    if (!fs::is_regular_file(opt.kit / "meson.build") || !fs::is_directory(opt.kit / "labs"))
        throw UsageError(fmt::format("--kit {}: not the lab kit (no meson.build and labs/ there)", opt.kit.string()));
}

void check_submissions(Options& opt) {
    if (opt.submissions.empty()) throw UsageError("say where the submissions are: pdlab-grade SUBMISSIONS --lab NN");
    if (!fs::is_directory(opt.submissions))
        throw UsageError(fmt::format("{}: no such folder (SUBMISSIONS holds one folder per student)",
                                     opt.submissions.string()));
    opt.submissions = fs::weakly_canonical(opt.submissions);
}

// Probed once: without a sandbox, student code could read the solutions and
// other students' work, so grading needs the instructor's explicit consent.
void refuse_without_sandbox(const Options& opt) {
    if (!opt.sandbox) {
        say("warning: --unsafe-no-sandbox: student code runs as you, with limits but no sandbox");
        return;
    }
    if (auto why = sandbox_unavailable(geteuid() == 0 ? std::optional<unsigned>(opt.sandbox_uid) : std::nullopt))
        throw UsageError(*why + "\n  the grader runs student code only in a sandbox; pass --unsafe-no-sandbox to "
                                "grade without one (inside a throwaway container or VM)");
}

// By default next to the submissions, never inside the kit (./kit runs from
// the kit's folder, and grades must not end up in a commit or a handout). The
// reports of an earlier run go: a student graded then but not now would
// otherwise keep a stale report.
void make_out(Options& opt, const Lab& lab) {
    if (opt.out.empty()) opt.out = opt.submissions.parent_path() / fmt::format("grades-lab{}", lab.number);
    fs::create_directories(opt.out / "reports");
    opt.out = fs::weakly_canonical(opt.out);
    for (const auto& e : fs::directory_iterator(opt.out / "reports"))
        if (e.path().extension() == ".md") fs::remove(e.path());
}

// Without --work, a temporary work folder, removed when the run ends.
class WorkFolder {
public:
    explicit WorkFolder(fs::path& work) : temporary_(work.empty()) {
        if (temporary_) {
            std::string tmpl = (fs::temp_directory_path() / "pdlab-grade.XXXXXX").string();
            if (!mkdtemp(tmpl.data())) throw KitError("cannot make a temporary work folder");
            // mkdtemp makes it 0700: the sandbox's uid must pass through it (not list it).
            fs::permissions(tmpl, fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
            work = tmpl;
        }
        fs::create_directories(work);
        work = fs::weakly_canonical(work);
        dir_ = work;
    }
    ~WorkFolder() {
        std::error_code ec;
        if (temporary_) fs::remove_all(dir_, ec);
    }
    WorkFolder(const WorkFolder&) = delete;
    WorkFolder& operator=(const WorkFolder&) = delete;
    bool temporary() const { return temporary_; }

private:
    bool temporary_;
    fs::path dir_;
};

// A fresh seed each run unless --seed: students cannot tune their code to the
// inputs they saw.
std::uint64_t pick_seed(const Options& opt) {
    if (opt.seed) return *opt.seed;
    std::random_device rd;
    return std::uniform_int_distribution<std::uint64_t>(100000000, 999999999)(rd);
}

void set_work_paths(Context& c) {
    c.work_pristine = c.opt.work / "pristine";
    c.work_src = c.opt.work / "src";
    c.work_build = c.opt.work / "build";
    c.work_runs = c.opt.work / "runs";
}

// One student's failure is one row: whatever grading them throws (a file the
// grader could not read, a full disk) ends their grading, never the run.
StudentResult grade_one(const Context& c, const std::string& name, const fs::path& dir, std::size_t i) {
    try {
        return grade_student(c, locate(name, dir, c.lab, c.opt.kit), i);
    } catch (const std::exception& e) {
        StudentResult r;
        r.name = name;
        r.status = "grader error";
        r.notes.push_back(fmt::format("the grader could not grade this submission: {}", e.what()));
        CheckResult not_run;
        not_run.reason = "not run (grader error)";
        r.checks.assign(c.rubric.checks.size(), not_run);
        return r;
    }
}

std::vector<StudentResult> grade_students(const Context& c, const Students& students) {
    std::vector<StudentResult> results;
    const auto& folders = students.folders;
    for (std::size_t i = 0; i < folders.size(); i++) {
        const auto& [name, dir] = folders[i];
        std::fprintf(stderr, "[%zu/%zu] %s: ", i + 1, folders.size(), name.c_str());
        std::fflush(stderr);
        StudentResult r = grade_one(c, name, dir, i);
        int passed = 0;
        for (const auto& ch : r.checks) passed += ch.outcome == Outcome::passed;
        std::fprintf(stderr, "%d/%zu checks, %s/%s points%s\n", passed, r.checks.size(), fmt_points(r.total).c_str(),
                     fmt_points(c.rubric.max_points()).c_str(), r.status == "ok" ? "" : (" (" + r.status + ")").c_str());
        results.push_back(std::move(r));
        write_report(c, results.back());
        write_gradebook(c, results);  // after every student: an interrupted run keeps what it has
    }
    return results;
}

void print_done(const Context& c, std::size_t students, double seconds, bool temporary_work) {
    std::fprintf(stderr,
                 "pdlab-grade: graded %zu students in %.0f s\n  gradebook: %s\n  reports:   %s/\n  summary:   %s\n",
                 students, seconds, (c.opt.out / "gradebook.csv").c_str(), (c.opt.out / "reports").c_str(),
                 (c.opt.out / "grading.md").c_str());
    if (!temporary_work) std::fprintf(stderr, "  work:      %s (kept: the next run with --work reuses its build)\n",
                                      c.opt.work.c_str());
}

// --merge: the shards' gradebooks into one (shard.hpp).
int merge(const Options& opt) {
    if (opt.out.empty()) throw UsageError("--merge needs --out DIR: where the merged gradebook goes");
    merge_gradebooks(opt.out, opt.merge);
    std::fprintf(stderr, "pdlab-grade: merged %zu shards into %s\n", opt.merge.size(),
                 (opt.out / "gradebook.csv").c_str());
    return 0;
}

// Shards must draw the same hidden inputs, or their rows would not compare.
void check_shard(const Options& opt) {
    if (opt.shard.empty()) return;
    parse_shard(opt.shard);
    if (!opt.seed) throw UsageError("--shard needs --seed: every shard must grade with the same hidden inputs");
}

int grade(Options opt) {
    if (!opt.merge.empty()) return merge(opt);
    if (opt.lab.empty()) throw UsageError("say which lab: --lab NN");
    check_shard(opt);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string started = local_time_now();
    check_kit(opt);
    Context c;
    c.lab = find_lab(opt.kit, opt.lab);
    c.rubric = load_lab_rubric(c.lab);
    check_submissions(opt);
    Students students = list_students(opt.submissions, opt.students, c.lab);
    // After the usage checks, which need no sandbox: a mistyped command gets its
    // own message first, also where bwrap cannot run.
    refuse_without_sandbox(opt);
    if (!opt.shard.empty()) students.folders = shard_of(students.folders, parse_shard(opt.shard));
    make_out(opt, c.lab);
    if (!opt.shard.empty()) write_shard_mark(opt.out, parse_shard(opt.shard));
    WorkFolder work(opt.work);
    WorkLock lock(opt.work);
    if (opt.jobs <= 0) opt.jobs = int(std::max(1u, std::thread::hardware_concurrency()));
    c.seed = pick_seed(opt);
    c.opt = opt;
    set_work_paths(c);
    check_sandbox_reaches(c, c.opt.work);

    std::fprintf(stderr, "pdlab-grade: lab %s (%s/%s): %zu checks worth %s points, %zu students, seed %llu\n",
                 c.lab.number.c_str(), c.lab.track.c_str(), c.lab.folder.c_str(), c.rubric.checks.size(),
                 fmt_points(c.rubric.max_points()).c_str(), students.folders.size(), (unsigned long long)c.seed);
    for (const auto& s : students.stray) say(fmt::format("note: {} is a file, not a student folder: skipped", s));
    setup_work(c);
    prepare_reference(c);
    std::vector<StudentResult> results = grade_students(c, students);
    // Leave the work folder's lab as the kit has it.
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, {});

    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_summary(c, results, started, seconds);
    print_done(c, results.size(), seconds, work.temporary());
    return 0;
}

const char* kFooter = R"(
WHAT IT DOES
  For each folder of SUBMISSIONS (one per student, holding that student's
  exercise.cpp of the lab), it builds the lab with the student's code and runs
  the checks of the lab's rubric, solutions/<track>/<NN-name>/rubric.json:
    "test"   checks run the lab's doctest binary with --test-case=PATTERN;
             all points when at least one test case ran and none failed.
    "output" checks run the lab program with the rubric's args and --json,
             and compare the named JSON fields with the reference solution's.
  Every check is all or nothing, except an output check whose "compare" has a
  "scale": its points scale with one of the program's numbers against the
  reference's (lab 17's goodput), never above full. A compile error, a crash, a timeout or a wrong
  answer scores 0 for what it affects, with the reason in the report; the run
  always goes on to the next student.

  The kit's own files are always used except the student's exercise sources:
  a changed exercise.hpp is ignored (the report says so).

HIDDEN INPUTS
  The tests draw their random inputs from PDLAB_TEST_SEED. The grader sets it
  to --seed, or to a fresh random number each run, so students cannot tune
  their code to the inputs they saw. The seed is in the gradebook and the
  reports; rerun with --seed to reproduce a run exactly. Before grading, the
  reference solution must pass every check with that seed.

OUTPUT (in --out DIR; default: grades-labNN next to SUBMISSIONS)
  gradebook.csv         student, one column per check (points), total, max,
                        status (ok, compile error, crash, timeout, wrong
                        answer, not implemented, ...), seed
  reports/STUDENT.md    each check's result and reason, the failing output,
                        and the commands that reproduce it in a student's kit
  grading.md            the run: seed, limits, rubric, every student's total

SPEED
  The engine is compiled once per work folder; each student then costs one
  compile of their exercise and a link. Give --work DIR to keep that build for
  the next run (a regrade then starts in seconds).

MANY MACHINES
  --shard K/N grades part K of N (sorted students, every N-th from K); then
  --merge DIR... --out OUT joins the parts' gradebooks, byte-identical to a
  single run with the same --seed (docs/instructors.md: Slurm, mpirun).

EXAMPLES
  ./kit grade ~/course/lab03-submissions --lab 03
  ./kit grade subs --lab 03 --out grades/lab03 --timeout 30 --seed 424242
  ./kit grade subs --lab 03 --student alice --work /tmp/grade-work

EXIT STATUS
  0 graded (whatever the students scored), 2 bad usage (unknown lab, missing
  or empty SUBMISSIONS, missing or bad rubric), 1 the kit itself fails (it
  does not build, or the reference solution fails a check).

  Every student build and check runs in a bubblewrap sandbox (new user, pid,
  net and ipc namespaces; only the work folder's build and the check's own
  folder bound in; rlimits on processes, memory, CPU time and file size).
  Run as root, the grader starts each sandbox as --sandbox-uid (default 64000),
  so the process limit counts only the sandbox's processes and bounds its memory.
  Where bwrap cannot make one, the grader refuses unless --unsafe-no-sandbox.
  See docs/instructors.md.)";


}  // namespace
}  // namespace pd::grade

int main(int argc, char** argv) {
    using namespace pd::grade;
    Options opt;
    opt.kit = pd::kit_root().string();  // the kit this program lies in (or $PDLAB_KIT); --kit overrides it
    CLI::App app{"pdlab-grade: grade a class's submissions for one lab of the prefill/decode kit.\n"
                 "Usually run as: ./kit grade SUBMISSIONS --lab NN [--out DIR]",
                 "pdlab-grade"};
    app.get_formatter()->column_width(30);
    app.footer(kFooter);
    std::uint64_t seed = 0;
    app.add_option("SUBMISSIONS", opt.submissions, "folder with one subfolder per student (required unless --merge)");
    app.add_option("--lab,-l", opt.lab, "the lab: 03, 3, 03-cache-and-gqa or track1/03 (required unless --merge)");
    app.add_option("--shard", opt.shard, "grade only part K of N of the class (K/N; needs --seed)");
    app.add_option("--merge", opt.merge, "merge these shards' --out folders into --out, then stop")->expected(1, -1);
    app.add_option("--out,-o", opt.out, "where the gradebook and reports go (default: grades-labNN next to SUBMISSIONS)");
    app.add_option("--timeout", opt.timeout_s, "seconds each check may run (a rubric check may set its own)")
        ->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--build-timeout", opt.build_timeout_s, "seconds one student's build may take")
        ->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("--mem-mb", opt.mem_mb, "address-space limit of each check, in MB")
        ->capture_default_str()->check(CLI::Range(64, 1 << 22));
    app.add_option("--jobs,-j", opt.jobs, "parallel compile jobs for the builds (default: all cores)")
        ->check(CLI::PositiveNumber);
    app.add_option("--threads", opt.threads, "OMP_NUM_THREADS for every check")
        ->capture_default_str()->check(CLI::PositiveNumber);
    app.add_flag("!--unsafe-no-sandbox", opt.sandbox,
                 "run student code without the bubblewrap sandbox (only where bwrap cannot run)");
    app.add_option("--sandbox-uid", opt.sandbox_uid,
                   "when run as root: the unprivileged uid (and gid) every sandbox runs as")
        ->capture_default_str()->check(CLI::Range(1u, 4294967294u));
    auto* seed_opt = app.add_option("--seed", seed, "PDLAB_TEST_SEED for every check (default: random per run)");
    app.add_option("--student", opt.students, "grade only this student (repeatable)");
    app.add_option("--work", opt.work,
                   "work folder to build in and keep for the next run (default: a temporary one, removed)");
    app.add_option("--kit", opt.kit, "the instructor's kit, with solutions/")
        ->capture_default_str()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    if (seed_opt->count()) opt.seed = seed;
    install_interrupt_handlers();
    try {
        return grade(opt);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "pdlab-grade: error: %s\n", e.what());
        return 2;
    } catch (const KitError& e) {
        std::fprintf(stderr, "pdlab-grade: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pdlab-grade: error: %s\n", e.what());
        return 1;
    }
}
