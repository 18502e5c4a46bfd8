#include "build.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "forbidden.hpp"
#include "outputs.hpp"
#include "workdir.hpp"

namespace pd::grade {

namespace {

// One step of a build in WORK/build (ninja, strip): a student's in the sandbox.
RunResult build_step(const Context& c, std::vector<std::string> argv, double timeout_s, bool student) {
    RunSpec r;
    r.argv = std::move(argv);
    r.timeout_s = timeout_s;
    if (student && c.opt.sandbox) {
        // A compile reads what the code #includes: in the sandbox only the
        // system and the work folder exist. No ccache (its shared cache
        // would be writable by one student and read by the next).
        r.sandbox = SandboxSpec{{c.work_src}, {c.work_build}, c.work_build};
        r.env = {{"CCACHE_DISABLE", "1"}};
        r.extra_procs = sandbox_processes(c, true);
        r.run_as = sandbox_uid(c);
        hand_to_sandbox(c, c.work_build);
        r.file_bytes = std::size_t(1) << 30;
    }
    return run_process(r);
}

RunResult ninja(const Context& c, double timeout_s, const std::vector<std::string>& targets, bool student) {
    std::vector<std::string> argv = {"ninja", "-C", c.work_build.string()};
    if (c.opt.jobs > 0) argv.push_back("-j" + std::to_string(c.opt.jobs));
    argv.insert(argv.end(), targets.begin(), targets.end());
    return build_step(c, std::move(argv), timeout_s, student);
}

// The lab's program and test binaries without their symbol tables: the
// engine's functions are linked into them (the tests' references), and a
// student who looked a forbidden one up by name at run time (dlsym is no
// help: nothing is exported, but /proc/self/exe's .symtab names every
// function) would call it with no symbol in the exercise object for the
// may_not_use check to see (forbidden.hpp). Stripped, no name leads to it.
RunResult strip_lab(const Context& c, double timeout_s, bool student) {
    std::vector<std::string> argv = {"strip", "--strip-all"};
    for (const auto& t : c.ninja_targets) argv.push_back((c.work_build / t).string());
    return build_step(c, std::move(argv), timeout_s, student);
}

void copy_kit(Context& c) {
    std::vector<fs::path> exclude = {fs::weakly_canonical(c.opt.out), fs::weakly_canonical(c.opt.work),
                                     fs::weakly_canonical(c.opt.submissions)};
    c.kit_file_list = kit_files(c.opt.kit, exclude);
    for (const auto& s : c.lab.sources) c.lab_source_paths.insert((c.lab.rel / s).string());
    say(fmt::format("copying the kit ({} files, without solutions/) into {}", c.kit_file_list.size(),
                    c.opt.work.string()));
    sync_tree(c.opt.kit, c.kit_file_list, c.work_pristine, {});
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, {});
}

// The lab's exercises compiled as their starters, so a student's missing file
// is the kit's starter; no CUDA, so grading needs no GPU.
const std::vector<std::string> kBuildOptions = {"-Dexercises=starter", "-Dcuda=disabled", "-Dtests=true"};

void meson(const Context& c, const std::string& command, const std::string& failure) {
    RunSpec r;
    r.argv = {"meson", command, c.work_build.string()};
    if (command == "setup") r.argv.push_back(c.work_src.string());
    r.argv.insert(r.argv.end(), kBuildOptions.begin(), kBuildOptions.end());
    r.timeout_s = 600;
    RunResult out = run_process(r);
    if (!out.ok()) throw KitError(failure + why_failed(out));
}

// A reused work folder: regenerate if the kit's meson files changed, and make
// sure it still builds the starters.
void refresh_build(const Context& c) {
    RunResult out = ninja(c, 600, {"build.ninja"}, false);
    if (!out.ok()) throw KitError("the kit does not configure:\n" + why_failed(out));
    json opts = json::parse(read_file(c.work_build / "meson-info" / "intro-buildoptions.json"));
    bool starter = false;
    for (const auto& o : opts)
        if (o.value("name", "") == "exercises" && o.value("value", json()).is_string())
            starter = o["value"].get<std::string>() == "starter";
    if (!starter) meson(c, "configure", "meson configure failed:\n");
}

// The lab's test binaries (and the environment meson gives them) and program,
// from meson's introspection files.
void introspect(Context& c) {
    json tests = json::parse(read_file(c.work_build / "meson-info" / "intro-tests.json"));
    std::string suite = c.lab.track + "-" + c.lab.number;
    for (const auto& t : tests) {
        bool in_suite = false;
        for (const auto& s : t.value("suite", json::array())) {
            std::string name = s.get<std::string>();
            auto colon = name.find(':');
            if ((colon == std::string::npos ? name : name.substr(colon + 1)) == suite) in_suite = true;
        }
        if (!in_suite || t["cmd"].empty()) continue;
        fs::path bin = t["cmd"][0].get<std::string>();
        // A case another program runs (lab 09's under mpirun) is not one of the lab's test binaries.
        if (bin.lexically_relative(c.work_build).string().starts_with("..")) continue;
        if (std::find(c.test_bins.begin(), c.test_bins.end(), bin) == c.test_bins.end()) c.test_bins.push_back(bin);
        if (t.contains("env") && t["env"].is_object())
            for (const auto& [k, v] : t["env"].items())
                if (v.is_string()) c.test_env[k] = v.get<std::string>();
    }
    json targets = json::parse(read_file(c.work_build / "meson-info" / "intro-targets.json"));
    for (const auto& t : targets)
        if (t.value("type", "") == "executable" && t.value("name", "") == c.lab.folder && !t["filename"].empty())
            c.program = t["filename"][0].get<std::string>();

    bool has_tests = false, has_outputs = false;
    for (const auto& k : c.rubric.checks) (k.kind == "test" ? has_tests : has_outputs) = true;
    if (has_tests && c.test_bins.empty())
        throw KitError(fmt::format("the build has no tests in suite {}: does {}/meson.build register its tests "
                                   "with suite : ['{}', ...]?",
                                   suite, c.lab.rel.string(), suite));
    if (has_outputs && c.program.empty())
        throw KitError(fmt::format("the build has no program named {} (the lab's executable)", c.lab.folder));
    for (const auto& b : c.test_bins) c.ninja_targets.push_back(b.lexically_relative(c.work_build).string());
    if (!c.program.empty()) c.ninja_targets.push_back(c.program.lexically_relative(c.work_build).string());
    c.unoptimized_compiles = unoptimized_compiles(c);
}

// Marks every check with why it could not run.
StudentResult not_built(StudentResult r, const std::string& status, const std::string& why) {
    r.status = status;
    for (auto& ch : r.checks) ch.reason = why;
    return r;
}

}  // namespace

void setup_work(Context& c) {
    copy_kit(c);
    if (!fs::exists(c.work_build / "build.ninja")) {
        say("configuring one starter build for the whole run (meson setup -Dexercises=starter -Dcuda=disabled)");
        meson(c, "setup", "the kit does not configure (meson setup failed):\n");
    } else {
        refresh_build(c);
    }
    introspect(c);
}

RunResult build_lab(const Context& c, const std::map<std::string, fs::path>& given, double timeout_s, bool student) {
    for (const auto& src : c.lab.sources) {
        auto it = given.find(src);
        fs::path from = it != given.end() ? it->second : c.work_pristine / c.lab.rel / src;
        if (fs::exists(from)) write_if_changed(c.work_src / c.lab.rel / src, read_file(from));
    }
    RunResult built = ninja(c, timeout_s, c.ninja_targets, student);
    if (!built.ok()) return built;
    RunResult stripped = strip_lab(c, timeout_s, student);
    stripped.seconds += built.seconds;
    return stripped;
}

std::string why_failed(const RunResult& r) {
    if (!r.started) return r.describe() + " (is it installed? ./kit setup installs meson and ninja)";
    return last_lines(r.output, 30) + (r.timed_out ? fmt::format("({})\n", r.describe()) : "");
}

StudentResult grade_student(const Context& c, const Submission& sub, std::size_t index) {
    StudentResult r;
    r.name = sub.name;
    r.notes = sub.notes;
    r.checks.resize(c.rubric.checks.size());
    // Undo anything the previous student's programs may have changed (from the
    // snapshot: every student is graded against the same kit, even if it is
    // edited while the run goes on).
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, c.lab_source_paths);
    if (!sub.problem.empty()) {
        r.notes.insert(r.notes.begin(), sub.problem_detail);
        return not_built(std::move(r), sub.problem, sub.problem_detail);
    }
    std::fprintf(stderr, "building... ");
    std::fflush(stderr);
    RunResult b = build_lab(c, sub.sources, c.opt.build_timeout_s, true);
    r.build_seconds = b.seconds;
    if (!b.ok()) {
        r.build_excerpt = tidy(c, compile_error_excerpt(b.output));
        if (b.timed_out)
            return not_built(std::move(r), "build timeout",
                             fmt::format("the build took longer than {:g} s and was stopped", c.opt.build_timeout_s));
        return not_built(std::move(r), "compile error", "does not compile: " + tidy(c, compile_error_reason(b.output)));
    }
    std::fprintf(stderr, "testing... ");
    std::fflush(stderr);
    r.checks = run_checks(c, fresh_scratch(c, fmt::format("{}", index)), nullptr);
    for (const auto& ch : r.checks) r.total += ch.points;
    r.status = status_of(r);
    apply_may_not_use(c, r);
    return r;
}

}  // namespace pd::grade
