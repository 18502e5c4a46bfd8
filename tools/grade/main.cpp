// pdlab-grade: grades a class's submissions for one lab against the reference
// solution. Run with --help; docs/instructors.md is the guide.
//
// How a run goes:
//   1. WORK/pristine gets the kit's files without solutions/, WORK/src a copy of
//      them; WORK/build is one meson build of WORK/src with -Dexercises=starter
//      (configured once, reused with --work).
//   2. The reference solution's exercise files go into the lab folder; ninja
//      builds the lab's program and test binary (and, the first time, the
//      engine). Every rubric check must pass with it under this run's seed,
//      and each output check's reference JSON is kept.
//   3. For each student: WORK/src is restored from WORK/pristine, the student's
//      exercise files replace the lab's, ninja rebuilds only that lab, and each
//      check runs under a time and a memory limit with PDLAB_TEST_SEED set.
//   4. OUT/gradebook.csv, OUT/reports/<student>.md and OUT/grading.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compare.hpp"
#include "outputs.hpp"
#include "process.hpp"
#include "rubric.hpp"
#include "workdir.hpp"

namespace pd::grade {
namespace {

// ------------------------------------------------------------------ options

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
};

// ------------------------------------------------------------------ the lab

struct Lab {
    std::string track, folder, number;  // "track1", "03-cache-and-gqa", "03"
    fs::path rel;                       // labs/track1/03-cache-and-gqa
    fs::path solution_dir;              // KIT/solutions/track1/03-cache-and-gqa
    std::vector<std::string> sources;   // what students hand in: exercise.cpp (+ other .cpp)
};

std::string list_labs(const fs::path& kit) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(kit / "labs", ec)) {
        if (!t.is_directory() || t.path().filename().string().rfind("track", 0) != 0) continue;
        for (const auto& l : fs::directory_iterator(t.path()))
            if (l.is_directory() && std::isdigit(static_cast<unsigned char>(l.path().filename().string()[0])))
                names.push_back(t.path().filename().string() + "/" + l.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "(none)" : s;
}

bool is_source_name(const std::string& name) {
    for (const char* ext : {".cpp", ".cc", ".cxx", ".c"}) {
        std::string e(ext);
        if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) return true;
    }
    return false;
}

// "03", "3", "03-cache-and-gqa", "track1/03", "track1-03" -> the lab.
Lab find_lab(const fs::path& kit, const std::string& arg) {
    std::string track, rest = arg;
    if (rest.rfind("track", 0) == 0) {
        auto cut = rest.find_first_of("/-");
        track = rest.substr(0, cut);
        rest = cut == std::string::npos ? "" : rest.substr(cut + 1);
    }
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) digits++;
    if (digits == 0)
        throw UsageError(fmt::format("--lab {}: give the lab's number, e.g. --lab 03; the labs are: {}", arg,
                                     list_labs(kit)));
    std::string number = rest.substr(0, digits);
    while (number.size() < 2) number = "0" + number;
    while (number.size() > 2 && number[0] == '0') number.erase(0, 1);
    std::string full = rest.size() > digits ? number + rest.substr(digits) : "";

    std::vector<Lab> found;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(kit / "labs", ec)) {
        std::string tname = t.path().filename().string();
        if (!t.is_directory() || tname.rfind("track", 0) != 0 || (!track.empty() && tname != track)) continue;
        for (const auto& l : fs::directory_iterator(t.path())) {
            std::string name = l.path().filename().string();
            if (!l.is_directory() || name.rfind(number + "-", 0) != 0) continue;
            if (!full.empty() && name != full) continue;
            Lab lab;
            lab.track = tname;
            lab.folder = name;
            lab.number = number;
            lab.rel = fs::path("labs") / tname / name;
            found.push_back(lab);
        }
    }
    if (found.empty())
        throw UsageError(fmt::format("--lab {}: there is no such lab; the labs are: {}", arg, list_labs(kit)));
    if (found.size() > 1)
        throw UsageError(fmt::format("--lab {} matches several labs ({}/{} and {}/{}): give the track too, "
                                     "e.g. --lab {}/{}",
                                     arg, found[0].track, found[0].folder, found[1].track, found[1].folder,
                                     found[0].track, found[0].number));
    Lab lab = found[0];
    lab.solution_dir = kit / "solutions" / lab.track / lab.folder;
    if (!fs::is_directory(kit / "solutions"))
        throw UsageError(fmt::format("{} has no solutions/ folder (is it a student handout?): grade with the "
                                     "instructor's copy of the kit (--kit DIR)",
                                     kit.string()));
    if (!fs::is_directory(lab.solution_dir))
        throw UsageError(fmt::format("lab {} has no reference solution: {} is missing", lab.folder,
                                     lab.solution_dir.string()));
    for (const auto& f : fs::directory_iterator(lab.solution_dir))
        if (f.is_regular_file() && is_source_name(f.path().filename().string()))
            lab.sources.push_back(f.path().filename().string());
    std::sort(lab.sources.begin(), lab.sources.end());
    if (lab.sources.empty())
        throw UsageError(fmt::format("{} holds no exercise source (.cpp) to compare against",
                                     lab.solution_dir.string()));
    return lab;
}

// ------------------------------------------------------------------ submissions

struct Submission {
    std::string name;
    fs::path dir;
    std::map<std::string, fs::path> sources;  // file name -> the student's file
    std::vector<std::string> notes;           // shown in the report
    std::string problem;                      // set: nothing to build (status)
    std::string problem_detail;
};

std::string normalized(const std::string& text) {
    std::string out, line;
    std::stringstream ss(text);
    while (std::getline(ss, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        out += line + "\n";
    }
    while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
    return out;
}

std::vector<fs::path> find_named(const fs::path& dir, const std::string& name) {
    std::vector<fs::path> hits;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (ec) break;
        std::string f = it->path().filename().string();
        if (it->is_directory() && (f.empty() || f[0] == '.' || f == "__MACOSX" || it.depth() >= 5)) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file() && f == name) hits.push_back(it->path());
    }
    std::sort(hits.begin(), hits.end());
    return hits;
}

Submission locate(const std::string& name, const fs::path& dir, const Lab& lab, const fs::path& kit) {
    Submission s;
    s.name = name;
    s.dir = dir;
    fs::path base;
    for (const auto& src : lab.sources) {
        fs::path direct = dir / src;
        if (fs::is_regular_file(direct)) {
            s.sources[src] = direct;
        } else {
            auto hits = find_named(dir, src);
            if (hits.size() == 1) {
                s.sources[src] = hits[0];
                s.notes.push_back(fmt::format("{} was found in a subfolder: {}", src,
                                              hits[0].lexically_relative(dir).string()));
            } else if (hits.size() > 1) {
                s.problem = "ambiguous submission";
                std::string list;
                for (const auto& h : hits) list += "\n  " + h.lexically_relative(dir).string();
                s.problem_detail = fmt::format("the submission holds {} files named {}; hand in one:{}",
                                               hits.size(), src, list);
                return s;
            }
        }
        if (base.empty() && s.sources.count(src)) base = s.sources[src].parent_path();
    }
    if (s.sources.empty()) {
        s.problem = "no " + lab.sources[0];
        s.problem_detail = fmt::format("the submission has no {} (in {} or its subfolders)", lab.sources[0],
                                       dir.string());
        return s;
    }
    for (const auto& src : lab.sources)
        if (!s.sources.count(src))
            s.notes.push_back(fmt::format("{} is missing: graded with the kit's starter {}", src, src));

    // The kit's headers and programs are always the kit's own.
    fs::path kit_lab = kit / lab.rel;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(base, ec)) {
        if (!f.is_regular_file()) continue;
        std::string fname = f.path().filename().string();
        if (std::find(lab.sources.begin(), lab.sources.end(), fname) != lab.sources.end()) continue;
        if (fs::is_regular_file(kit_lab / fname)) {
            if (normalized(read_file(f.path())) != normalized(read_file(kit_lab / fname)))
                s.notes.push_back(fmt::format("{} differs from the kit's: graded with the kit's {}, "
                                              "unchanged (a lab's headers are not part of the exercise)",
                                              fname, fname));
        } else if (is_source_name(fname) || fname.ends_with(".hpp") || fname.ends_with(".h")) {
            s.notes.push_back(fmt::format("{} is not a file of this lab and was ignored", fname));
        }
    }
    static const std::regex include_re(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
    for (const auto& [src, path] : s.sources) {
        std::stringstream ss(read_file(path));
        std::string line;
        int n = 0;
        while (std::getline(ss, line)) {
            n++;
            std::smatch m;
            if (!std::regex_search(line, m, include_re)) continue;
            std::string inc = m[1];
            if (inc[0] == '/' || inc.find("solutions") != std::string::npos)
                s.notes.push_back(fmt::format("{} line {} includes \"{}\", outside the lab: look at it by hand",
                                              src, n, inc));
        }
    }
    return s;
}

// ------------------------------------------------------------------ results

enum class Outcome { passed, wrong, not_implemented, crash, timeout, memory, error, not_run };

const char* outcome_name(Outcome o) {
    switch (o) {
        case Outcome::passed: return "passed";
        case Outcome::wrong: return "wrong answer";
        case Outcome::not_implemented: return "not implemented";
        case Outcome::crash: return "crash";
        case Outcome::timeout: return "timeout";
        case Outcome::memory: return "memory limit";
        case Outcome::error: return "error";
        case Outcome::not_run: return "not run";
    }
    return "?";
}

struct CheckResult {
    Outcome outcome = Outcome::not_run;
    double points = 0;
    std::string detail;   // "4 test cases passed"
    std::string reason;   // one line: why it failed
    std::string excerpt;  // the failing output
    double seconds = 0;
    std::string command;  // how to run it by hand
    int cases = 0;        // test checks: the test cases that ran
};

struct StudentResult {
    std::string name;
    std::string status;
    double total = 0;
    std::vector<CheckResult> checks;
    std::vector<std::string> notes;
    std::string build_excerpt;
    double build_seconds = 0;
};

// ------------------------------------------------------------------ context

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
    std::vector<std::optional<json>> reference_json;  // per check
    std::vector<int> reference_cases;                 // per test check: how many test cases the solution ran
};

std::string shell_quote(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") ==
                          std::string::npos)
        return s;
    return "'" + replace_all(s, "'", "'\\''") + "'";
}

std::string in_kit(const Context& c, const fs::path& built) {
    return (fs::path("build") / built.lexically_relative(c.work_build)).string();
}

std::string tidy(const Context& c, const std::string& text) {
    std::string t = replace_all(text, c.work_src.string() + "/", "");
    t = replace_all(t, c.work_build.string() + "/", "build/");
    return replace_all(t, "../src/", "");
}

std::map<std::string, std::string> run_env(const Context& c) {
    auto env = c.test_env;
    env["PDLAB_TEST_SEED"] = std::to_string(c.seed);
    env["OMP_NUM_THREADS"] = std::to_string(c.opt.threads);
    return env;
}

std::vector<std::string> output_args(const Context& c, const Check& k) {
    std::vector<std::string> args;
    for (const auto& a : k.args) args.push_back(replace_all(a, "{seed}", std::to_string(c.seed)));
    return args;
}

RunSpec limited(const Context& c, const Check& k, const fs::path& scratch) {
    RunSpec r;
    r.cwd = scratch.string();
    r.env = run_env(c);
    r.timeout_s = k.timeout_s > 0 ? k.timeout_s : c.opt.timeout_s;
    r.mem_bytes = c.opt.mem_mb << 20;
    r.file_bytes = std::size_t(1) << 30;
    return r;
}

bool mentions_memory(const std::string& out) {
    for (const char* s : {"bad_alloc", "Cannot allocate memory", "Thread creation failed", "out of memory"})
        if (out.find(s) != std::string::npos) return true;
    return false;
}

// Time-outs, crashes and the memory limit read the same for every kind of check.
bool classify_abnormal(const Context& c, const RunResult& r, CheckResult& res) {
    if (!r.started) {
        res.outcome = Outcome::error;
        res.reason = r.describe();
        return true;
    }
    if (r.timed_out) {
        res.outcome = Outcome::timeout;
        res.reason = fmt::format("timed out: still running after {:g} s, killed (an endless loop, or far too slow)",
                                 r.seconds < 1 ? r.seconds : double(long(r.seconds + 0.5)));
        res.excerpt = tidy(c, last_lines(r.output, 20));
        return true;
    }
    if (r.signal) {
        bool mem = mentions_memory(r.output);
        res.outcome = mem ? Outcome::memory : Outcome::crash;
        res.reason = fmt::format("crashed: killed by signal {} ({})", r.signal, signal_name(r.signal));
        if (mem) res.reason += fmt::format(", after running out of memory (limit {} MB)", c.opt.mem_mb);
        std::string fatal = doctest_failure_reason(r.output);
        if (!fatal.empty()) res.reason += " in " + fatal;
        res.excerpt = tidy(c, doctest_failure_excerpt(r.output));
        if (res.excerpt.empty()) res.excerpt = tidy(c, last_lines(r.output, 20));
        return true;
    }
    return false;
}

CheckResult run_test_check(const Context& c, const Check& k, std::size_t index, const fs::path& scratch) {
    CheckResult res;
    res.command = fmt::format("PDLAB_TEST_SEED={} {} --test-case={}", c.seed, in_kit(c, c.test_bins[0]),
                              shell_quote(k.test_case));
    int cases = 0, passed = 0;
    for (const auto& bin : c.test_bins) {
        RunSpec r = limited(c, k, scratch);
        r.argv = {bin.string(), "--test-case=" + k.test_case, "--no-intro", "--no-colors", "--no-path-filenames"};
        RunResult out = run_process(r);
        res.seconds += out.seconds;
        if (classify_abnormal(c, out, res)) return res;
        DoctestSummary s = parse_doctest_summary(out.output);
        cases += s.cases;
        passed += s.passed;
        if (out.exit_code == 0 && s.found && s.failed == 0) continue;
        std::string why = doctest_failure_reason(out.output);
        if (mentions_memory(out.output)) {
            res.outcome = Outcome::memory;
            res.reason = fmt::format("ran out of memory (limit {} MB): {}", c.opt.mem_mb, why);
        } else if (why.find("not implemented yet") != std::string::npos) {
            res.outcome = Outcome::not_implemented;
            res.reason = why;
        } else if (s.found && s.failed > 0) {
            res.outcome = Outcome::wrong;
            res.reason = why.empty() ? fmt::format("{} of {} test cases failed", s.failed, s.cases) : why;
        } else {
            res.outcome = Outcome::error;
            res.reason = fmt::format("the test program ended with {} and no doctest summary", out.describe());
        }
        if (s.found && s.cases > 1)
            res.reason = fmt::format("{} of {} test cases failed; first: {}", s.failed, s.cases, res.reason);
        res.excerpt = tidy(c, doctest_failure_excerpt(out.output));
        if (res.excerpt.empty()) res.excerpt = tidy(c, last_lines(out.output, 20));
        return res;
    }
    if (cases == 0) {
        res.outcome = Outcome::error;
        res.reason = fmt::format("no test case matches \"{}\"", k.test_case);
        return res;
    }
    // The same tests ran as for the reference solution: a program that ends early
    // (exit(0) in an exercise) cannot pass on what it skipped.
    if (index < c.reference_cases.size() && c.reference_cases[index] > 0 && cases != c.reference_cases[index]) {
        res.outcome = Outcome::error;
        res.reason = fmt::format("{} test cases reported, but the check has {}: the test program did not run "
                                 "to its end normally",
                                 cases, c.reference_cases[index]);
        return res;
    }
    res.outcome = Outcome::passed;
    res.points = k.points;
    res.cases = cases;
    res.detail = fmt::format("{} test case{} passed", passed, passed == 1 ? "" : "s");
    return res;
}

CheckResult run_output_check(const Context& c, const Check& k, std::size_t index, const fs::path& scratch,
                             json* produced) {
    CheckResult res;
    fs::path json_file = scratch / fmt::format("check{}.json", index + 1);
    std::error_code ec;
    fs::remove(json_file, ec);
    RunSpec r = limited(c, k, scratch);
    r.argv = {c.program.string()};
    for (const auto& a : output_args(c, k)) r.argv.push_back(a);
    r.argv.push_back("--json");
    r.argv.push_back(json_file.string());
    {
        std::string cmd = in_kit(c, c.program);
        for (const auto& a : output_args(c, k)) cmd += " " + shell_quote(a);
        res.command = cmd + " --json out.json";
    }
    RunResult out = run_process(r);
    res.seconds = out.seconds;
    if (classify_abnormal(c, out, res)) return res;
    // Exit status 1: the program ran and wrote its JSON, but one of its own checks
    // failed (labs/README.md); the JSON comparison then says where.
    if (out.exit_code != 0 && out.exit_code != 1) {
        res.excerpt = tidy(c, last_lines(out.output, 20));
        if (out.exit_code == 3) {
            res.outcome = Outcome::not_implemented;
            std::string line;
            std::stringstream ss(out.output);
            while (std::getline(ss, line))
                if (line.find("not implemented yet") != std::string::npos) break;
            res.reason = "the lab program stopped: " + trim(line.empty() ? "an exercise is not implemented" : line);
        } else if (mentions_memory(out.output)) {
            res.outcome = Outcome::memory;
            res.reason = fmt::format("ran out of memory (limit {} MB), exit status {}", c.opt.mem_mb, out.exit_code);
        } else {
            res.outcome = Outcome::error;
            res.reason = fmt::format("the lab program failed with exit status {}: {}", out.exit_code,
                                     trim(last_lines(out.output, 1)));
        }
        return res;
    }
    json doc;
    try {
        doc = json::parse(read_file(json_file));
    } catch (const std::exception& e) {
        res.outcome = out.exit_code == 0 ? Outcome::wrong : Outcome::error;
        res.reason = fs::exists(json_file) ? "the lab program wrote a --json file that is not valid JSON"
                                           : "the lab program wrote no --json file";
        if (out.exit_code != 0) res.reason += fmt::format(" and ended with exit status {}", out.exit_code);
        res.excerpt = tidy(c, last_lines(out.output, 20));
        return res;
    }
    // A document that is one string holding JSON (a program that wrote an already
    // dumped text through a json value) is read as the JSON it holds.
    if (doc.is_string()) {
        try {
            json inner = json::parse(doc.get<std::string>());
            if (inner.is_object() || inner.is_array()) doc = std::move(inner);
        } catch (const std::exception&) {
        }
    }
    if (produced) *produced = doc;
    if (!c.reference_json[index]) {  // the reference run itself
        if (out.exit_code != 0) {
            res.outcome = Outcome::error;
            res.reason = fmt::format("the lab program ended with exit status {}: one of its own checks failed",
                                     out.exit_code);
            res.excerpt = last_lines(out.output, 30);
            return res;
        }
        res.outcome = Outcome::passed;
        res.points = k.points;
        return res;
    }
    auto diffs = compare_json(doc, *c.reference_json[index], k.compare);
    if (!diffs.empty()) {
        res.outcome = Outcome::wrong;
        res.reason = "output differs from the reference: " + diffs[0];
        for (const auto& d : diffs) res.excerpt += d + "\n";
        if (out.exit_code != 0)
            res.excerpt += fmt::format("\nThe lab program ended with exit status {} (one of its own checks "
                                       "failed); its last lines:\n{}",
                                       out.exit_code, tidy(c, last_lines(out.output, 12)));
        return res;
    }
    if (out.exit_code != 0) {
        res.outcome = Outcome::wrong;
        res.reason = fmt::format("the lab program ended with exit status {}: one of its own checks failed "
                                 "(the rows marked in its output)",
                                 out.exit_code);
        res.excerpt = tidy(c, last_lines(out.output, 30));
        return res;
    }
    res.outcome = Outcome::passed;
    res.points = k.points;
    res.detail = k.compare.fields.empty() ? "the whole JSON matches"
                                          : fmt::format("{} field{} match", k.compare.fields.size(),
                                                        k.compare.fields.size() == 1 ? "" : "s");
    return res;
}

// ------------------------------------------------------------------ building

RunResult ninja(const Context& c, double timeout_s, const std::vector<std::string>& targets) {
    RunSpec r;
    r.argv = {"ninja", "-C", c.work_build.string()};
    if (c.opt.jobs > 0) r.argv.push_back("-j" + std::to_string(c.opt.jobs));
    for (const auto& t : targets) r.argv.push_back(t);
    r.timeout_s = timeout_s;
    return run_process(r);
}

// Puts `files` (file name -> content) into the lab folder of WORK/src and
// rebuilds the lab's program and tests.
RunResult build_lab(const Context& c, const std::map<std::string, std::string>& files, double timeout_s) {
    for (const auto& [name, content] : files) write_if_changed(c.work_src / c.lab.rel / name, content);
    return ninja(c, timeout_s, c.ninja_targets);
}

std::map<std::string, std::string> source_contents(const Context& c, const std::map<std::string, fs::path>& given) {
    std::map<std::string, std::string> files;
    for (const auto& src : c.lab.sources) {
        auto it = given.find(src);
        fs::path from = it != given.end() ? it->second : c.work_pristine / c.lab.rel / src;
        if (fs::exists(from)) files[src] = read_file(from);
    }
    return files;
}

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
}

// ------------------------------------------------------------------ reports

std::string fmt_points(double p) { return fmt::format("{:g}", p); }

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    return "\"" + replace_all(s, "\"", "\"\"") + "\"";
}

void write_gradebook(const Context& c, const std::vector<StudentResult>& results) {
    std::string csv = "student";
    for (const auto& k : c.rubric.checks) csv += fmt::format(",{}", csv_field(k.name));
    csv += ",total,max,status,seed\n";
    for (const auto& r : results) {
        csv += csv_field(r.name);
        for (const auto& ch : r.checks) csv += fmt::format(",{}", fmt_points(ch.points));
        csv += fmt::format(",{},{},{},{}\n", fmt_points(r.total), fmt_points(c.rubric.max_points()),
                           csv_field(r.status), c.seed);
    }
    std::ofstream(c.opt.out / "gradebook.csv") << csv;
}

std::string fence(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return "````text\n" + t + "\n````\n";
}

std::string check_label(const Check& k) {
    return k.kind == "test" ? fmt::format("test `{}`", k.test_case) : std::string("program output");
}

void write_report(const Context& c, const StudentResult& r) {
    const double max = c.rubric.max_points();
    int passed = 0;
    for (const auto& ch : r.checks) passed += ch.outcome == Outcome::passed;
    std::string md = fmt::format("# Lab {} ({}): {}\n\n", c.lab.number, c.lab.folder, r.name);
    md += fmt::format("**{} / {} points**, {} of {} checks passed. Status: **{}**.\n\n", fmt_points(r.total),
                      fmt_points(max), passed, r.checks.size(), r.status);
    md += fmt::format("Graded with the kit's tests on inputs drawn from seed {} (PDLAB_TEST_SEED), each check "
                      "under a {:g} s time limit and a {} MB memory limit, OMP_NUM_THREADS={}.\n\n",
                      c.seed, c.opt.timeout_s, c.opt.mem_mb, c.opt.threads);
    if (!r.notes.empty()) {
        md += "## Notes\n\n";
        for (const auto& n : r.notes) md += "- " + n + "\n";
        md += "\n";
    }
    md += "## Checks\n\n| check | what | points | result |\n| --- | --- | --- | --- |\n";
    for (std::size_t i = 0; i < r.checks.size(); i++) {
        const auto& k = c.rubric.checks[i];
        const auto& ch = r.checks[i];
        std::string result = ch.outcome == Outcome::passed
                                 ? "passed" + (ch.detail.empty() ? "" : " (" + ch.detail + ")")
                                 : std::string(outcome_name(ch.outcome));
        md += fmt::format("| {} | {} | {} / {} | {} |\n", k.name, check_label(k), fmt_points(ch.points),
                          fmt_points(k.points), result);
    }
    md += "\n";
    if (!r.build_excerpt.empty()) {
        md += "## Build\n\nThe lab did not build with this submission, so no check could run. "
              "The compiler said:\n\n" + fence(r.build_excerpt) + "\n";
    }
    bool any_failed = false;
    for (std::size_t i = 0; i < r.checks.size(); i++) {
        const auto& k = c.rubric.checks[i];
        const auto& ch = r.checks[i];
        if (ch.outcome == Outcome::passed || ch.outcome == Outcome::not_run) continue;
        if (!any_failed) md += "## Failures\n\n";
        any_failed = true;
        md += fmt::format("### {} ({} / {}): {}\n\n", k.name, fmt_points(ch.points), fmt_points(k.points),
                          outcome_name(ch.outcome));
        if (!k.description.empty()) md += k.description + "\n\n";
        md += ch.reason + "\n\n";
        if (!ch.excerpt.empty()) md += fence(ch.excerpt) + "\n";
        if (!ch.command.empty()) md += "Reproduce: `" + ch.command + "`\n\n";
    }
    md += "## Reproduce locally\n\n";
    std::string files;
    for (const auto& s : c.lab.sources) files += (files.empty() ? "" : ", ") + s;
    md += fmt::format("In your copy of the kit, put this submission's {} into `{}/`, then build and run a check "
                      "with the seed above:\n\n",
                      files, c.lab.rel.string());
    md += "```sh\n./kit build\n";
    std::set<std::string> shown;
    for (const auto& ch : r.checks)
        if (!ch.command.empty() && shown.insert(ch.command).second) md += ch.command + "\n";
    if (shown.empty())
        for (const auto& k : c.rubric.checks)
            if (k.kind == "test")
                md += fmt::format("PDLAB_TEST_SEED={} {} --test-case={}\n", c.seed, in_kit(c, c.test_bins[0]),
                                  shell_quote(k.test_case));
    md += "```\n\n";
    md += fmt::format("`./kit test {}-{}` runs the same tests on the default inputs.\n", c.lab.track, c.lab.number);
    std::ofstream(c.opt.out / "reports" / (r.name + ".md")) << md;
}

std::string kit_version(const fs::path& kit) {
    RunSpec r;
    r.argv = {"git", "-C", kit.string(), "describe", "--always", "--dirty"};
    r.timeout_s = 30;
    RunResult out = run_process(r);
    return out.ok() ? trim(out.output) : "unknown (not a git checkout)";
}

void write_summary(const Context& c, const std::vector<StudentResult>& results, const std::string& started,
                   double seconds) {
    std::string md = fmt::format("# Grading: lab {} ({}/{})\n\n", c.lab.number, c.lab.track, c.lab.folder);
    md += fmt::format("- started: {}, took {:.0f} s\n- kit: {} ({})\n- seed: {} (PDLAB_TEST_SEED for every "
                      "check; rerun with --seed {} for the same inputs)\n",
                      started, seconds, c.opt.kit.string(), kit_version(c.opt.kit), c.seed, c.seed);
    md += fmt::format("- limits: {:g} s per check, {:g} s per build, {} MB of memory, OMP_NUM_THREADS={}\n",
                      c.opt.timeout_s, c.opt.build_timeout_s, c.opt.mem_mb, c.opt.threads);
    md += fmt::format("- submissions: {}\n\n", c.opt.submissions.string());
    md += "## Rubric\n\n| check | what | points |\n| --- | --- | --- |\n";
    for (const auto& k : c.rubric.checks)
        md += fmt::format("| {} | {} | {} |\n", k.name, check_label(k), fmt_points(k.points));
    md += fmt::format("\nThe reference solution passed every check with this seed.\n\n## Students\n\n"
                      "| student | points | status |\n| --- | --- | --- |\n");
    double sum = 0;
    for (const auto& r : results) {
        md += fmt::format("| [{}](reports/{}.md) | {} / {} | {} |\n", r.name, r.name, fmt_points(r.total),
                          fmt_points(c.rubric.max_points()), r.status);
        sum += r.total;
    }
    if (!results.empty())
        md += fmt::format("\nMean: {:.1f} / {}\n", sum / double(results.size()), fmt_points(c.rubric.max_points()));
    std::ofstream(c.opt.out / "grading.md") << md;
}

// ------------------------------------------------------------------ grading

std::string status_of(const StudentResult& r) {
    std::vector<std::string> kinds;
    for (const auto& ch : r.checks) {
        if (ch.outcome == Outcome::passed) continue;
        std::string k = outcome_name(ch.outcome);
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    }
    if (kinds.empty()) return "ok";
    std::string s;
    for (const auto& k : kinds) s += (s.empty() ? "" : ", ") + k;
    return s;
}

// Runs every check; `produced` collects the output checks' JSON (the reference run).
std::vector<CheckResult> run_checks(const Context& c, const fs::path& scratch, std::vector<std::optional<json>>* produced) {
    std::vector<CheckResult> out;
    for (std::size_t i = 0; i < c.rubric.checks.size(); i++) {
        const auto& k = c.rubric.checks[i];
        if (k.kind == "test") {
            out.push_back(run_test_check(c, k, i, scratch));
        } else {
            json doc;
            out.push_back(run_output_check(c, k, i, scratch, &doc));
            if (produced && out.back().outcome == Outcome::passed) (*produced)[i] = doc;
        }
    }
    return out;
}

fs::path fresh_scratch(const Context& c, const std::string& name) {
    fs::path p = c.work_runs / name;
    std::error_code ec;
    fs::remove_all(p, ec);
    fs::create_directories(p);
    return p;
}

StudentResult grade_one(Context& c, const Submission& sub, std::size_t index) {
    StudentResult r;
    r.name = sub.name;
    r.notes = sub.notes;
    r.checks.resize(c.rubric.checks.size());
    // Undo anything the previous student's programs may have changed (from the
    // snapshot: every student is graded against the same kit, even if it is
    // edited while the run goes on).
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, c.lab_source_paths);
    if (!sub.problem.empty()) {
        r.status = sub.problem;
        r.notes.insert(r.notes.begin(), sub.problem_detail);
        for (auto& ch : r.checks) ch.reason = sub.problem_detail;
        return r;
    }
    std::fprintf(stderr, "building... ");
    std::fflush(stderr);
    RunResult b = build_lab(c, source_contents(c, sub.sources), c.opt.build_timeout_s);
    r.build_seconds = b.seconds;
    if (!b.ok()) {
        std::string why;
        if (b.timed_out) {
            r.status = "build timeout";
            why = fmt::format("the build took longer than {:g} s and was stopped", c.opt.build_timeout_s);
        } else {
            r.status = "compile error";
            why = "does not compile: " + tidy(c, compile_error_reason(b.output));
        }
        r.build_excerpt = tidy(c, compile_error_excerpt(b.output));
        for (auto& ch : r.checks) ch.reason = why;
        return r;
    }
    std::fprintf(stderr, "testing... ");
    std::fflush(stderr);
    r.checks = run_checks(c, fresh_scratch(c, fmt::format("{}", index)), nullptr);
    for (const auto& ch : r.checks) r.total += ch.points;
    r.status = status_of(r);
    return r;
}

// What a failed meson or ninja run said, or why it could not start.
std::string why_failed(const RunResult& r) {
    if (!r.started) return r.describe() + " (is it installed? ./kit setup installs meson and ninja)";
    return last_lines(r.output, 30) + (r.timed_out ? "(" + r.describe() + ")\n" : "");
}

void prepare(Context& c) {
    auto say = [](const std::string& s) { std::fprintf(stderr, "pdlab-grade: %s\n", s.c_str()); };
    std::vector<fs::path> exclude = {fs::weakly_canonical(c.opt.out), fs::weakly_canonical(c.opt.work),
                                     fs::weakly_canonical(c.opt.submissions)};
    c.kit_file_list = kit_files(c.opt.kit, exclude);
    for (const auto& s : c.lab.sources) c.lab_source_paths.insert((c.lab.rel / s).string());
    say(fmt::format("copying the kit ({} files, without solutions/) into {}", c.kit_file_list.size(),
                    c.opt.work.string()));
    sync_tree(c.opt.kit, c.kit_file_list, c.work_pristine, {});
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, {});

    const std::vector<std::string> want = {"-Dexercises=starter", "-Dcuda=disabled", "-Dtests=true"};
    if (!fs::exists(c.work_build / "build.ninja")) {
        say("configuring one starter build for the whole run (meson setup -Dexercises=starter -Dcuda=disabled)");
        RunSpec r;
        r.argv = {"meson", "setup", c.work_build.string(), c.work_src.string()};
        r.argv.insert(r.argv.end(), want.begin(), want.end());
        r.timeout_s = 600;
        RunResult out = run_process(r);
        if (!out.ok())
            throw KitError("the kit does not configure (meson setup failed):\n" + why_failed(out));
    } else {
        // A reused work folder: regenerate if the kit's meson files changed, and
        // make sure it still builds the starters.
        RunResult out = ninja(c, 600, {"build.ninja"});
        if (!out.ok()) throw KitError("the kit does not configure:\n" + why_failed(out));
        json opts = json::parse(read_file(c.work_build / "meson-info" / "intro-buildoptions.json"));
        bool starter = false;
        for (const auto& o : opts)
            if (o.value("name", "") == "exercises" && o.value("value", json()).is_string())
                starter = o["value"].get<std::string>() == "starter";
        if (!starter) {
            RunSpec r;
            r.argv = {"meson", "configure", c.work_build.string()};
            r.argv.insert(r.argv.end(), want.begin(), want.end());
            r.timeout_s = 600;
            RunResult conf = run_process(r);
            if (!conf.ok()) throw KitError("meson configure failed:\n" + why_failed(conf));
        }
    }
    introspect(c);

    say(fmt::format("building the lab with the reference solution{}",
                    fs::exists(c.work_build / ".ninja_log") ? ""
                                                             : " (and, this once, the engine: minutes)"));
    std::map<std::string, fs::path> sol;
    for (const auto& s : c.lab.sources) sol[s] = c.lab.solution_dir / s;
    RunResult b = build_lab(c, source_contents(c, sol), 0);
    if (!b.ok())
        throw KitError(fmt::format("the reference solution does not build:\n{}", tidy(c, why_failed(b))));

    c.reference_json.assign(c.rubric.checks.size(), std::nullopt);
    std::vector<std::optional<json>> produced(c.rubric.checks.size());
    auto results = run_checks(c, fresh_scratch(c, "reference"), &produced);
    std::string bad;
    for (std::size_t i = 0; i < results.size(); i++) {
        const auto& k = c.rubric.checks[i];
        const auto& r = results[i];
        if (r.outcome == Outcome::passed) {
            // Every named field must exist in the reference output.
            if (k.kind == "output")
                for (const auto& f : k.compare.fields)
                    if (!find_path(*produced[i], f)) {
                        std::string keys;
                        if (produced[i]->is_object())
                            for (const auto& [key, v] : produced[i]->items()) keys += (keys.empty() ? "" : ", ") + key;
                        bad += fmt::format("  {}: the reference JSON has no field \"{}\" (its top-level fields: {})\n",
                                           k.name, f, keys);
                    }
            continue;
        }
        bad += fmt::format("  {}: {}: {}\n", k.name, outcome_name(r.outcome), r.reason);
        if (!r.excerpt.empty()) {
            std::stringstream ex(last_lines(r.excerpt, 15));
            std::string line;
            while (std::getline(ex, line)) bad += "      " + line + "\n";
        }
        if (r.outcome == Outcome::error && r.reason.rfind("no test case matches", 0) == 0) {
            RunSpec l;
            l.argv = {c.test_bins[0].string(), "--list-test-cases", "--no-intro"};
            l.timeout_s = 60;
            bad += "  the lab's test cases are:\n" + last_lines(run_process(l).output, 200);
        }
    }
    if (!bad.empty())
        throw KitError(fmt::format("the reference solution fails the rubric with seed {}; fix the rubric "
                                   "(or, when a test is flaky under some seeds, the test) before grading:\n{}",
                                   c.seed, bad));
    c.reference_json = produced;
    c.reference_cases.assign(results.size(), 0);
    for (std::size_t i = 0; i < results.size(); i++) c.reference_cases[i] = results[i].cases;
    say(fmt::format("the reference solution passes all {} checks with seed {}", results.size(), c.seed));
}

int grade(Options opt) {
    const auto t0 = std::chrono::steady_clock::now();
    char started[64];
    std::time_t now = std::time(nullptr);
    std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", std::localtime(&now));

    if (opt.kit.empty()) throw UsageError("say where the kit is: --kit DIR");
    opt.kit = fs::weakly_canonical(opt.kit);
    if (!fs::is_regular_file(opt.kit / "meson.build") || !fs::is_directory(opt.kit / "labs"))
        throw UsageError(fmt::format("--kit {}: not the lab kit (no meson.build and labs/ there)", opt.kit.string()));

    Context c;
    c.lab = find_lab(opt.kit, opt.lab);
    fs::path rubric_path = c.lab.solution_dir / "rubric.json";
    if (!fs::is_regular_file(rubric_path))
        throw UsageError(fmt::format("lab {} has no rubric: write {} (see docs/instructors.md, \"Rubrics\")",
                                     c.lab.folder, rubric_path.string()));
    try {
        c.rubric = load_rubric(rubric_path.string());
    } catch (const RubricError& e) {
        throw UsageError(e.what());
    }
    std::string rl = c.rubric.lab;
    while (rl.size() < 2) rl = "0" + rl;
    if (rl != c.lab.number && c.rubric.lab != c.lab.folder)
        throw UsageError(fmt::format("{}: \"lab\" is \"{}\", but this is lab {}", rubric_path.string(),
                                     c.rubric.lab, c.lab.number));

    if (opt.submissions.empty()) throw UsageError("say where the submissions are: pdlab-grade SUBMISSIONS --lab NN");
    if (!fs::is_directory(opt.submissions))
        throw UsageError(fmt::format("{}: no such folder (SUBMISSIONS holds one folder per student)",
                                     opt.submissions.string()));
    opt.submissions = fs::weakly_canonical(opt.submissions);
    std::vector<std::pair<std::string, fs::path>> students;
    std::vector<std::string> stray;
    for (const auto& e : fs::directory_iterator(opt.submissions)) {
        std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        if (e.is_directory()) students.emplace_back(name, e.path());
        else stray.push_back(name);
    }
    std::sort(students.begin(), students.end());
    if (students.empty())
        throw UsageError(fmt::format("{} holds no student folders: make one folder per student holding their {}",
                                     opt.submissions.string(), c.lab.sources[0]));
    if (!opt.students.empty()) {
        std::vector<std::pair<std::string, fs::path>> only;
        for (const auto& want : opt.students) {
            auto it = std::find_if(students.begin(), students.end(), [&](auto& s) { return s.first == want; });
            if (it == students.end())
                throw UsageError(fmt::format("--student {}: no such folder in {}", want, opt.submissions.string()));
            only.push_back(*it);
        }
        students = only;
    }

    // By default next to the submissions, never inside the kit (./kit runs from
    // the kit's folder, and grades must not end up in a commit or a handout).
    if (opt.out.empty()) opt.out = opt.submissions.parent_path() / fmt::format("grades-lab{}", c.lab.number);
    fs::create_directories(opt.out / "reports");
    opt.out = fs::weakly_canonical(opt.out);
    for (const auto& e : fs::directory_iterator(opt.out / "reports"))
        if (e.path().extension() == ".md") fs::remove(e.path());

    bool temp_work = opt.work.empty();
    if (temp_work) {
        std::string tmpl = (fs::temp_directory_path() / "pdlab-grade.XXXXXX").string();
        if (!mkdtemp(tmpl.data())) throw KitError("cannot make a temporary work folder");
        opt.work = tmpl;
    }
    fs::create_directories(opt.work);
    opt.work = fs::weakly_canonical(opt.work);
    struct Cleanup {
        fs::path dir;
        bool on;
        ~Cleanup() {
            std::error_code ec;
            if (on) fs::remove_all(dir, ec);
        }
    } cleanup{opt.work, temp_work};
    WorkLock lock(opt.work);

    if (opt.jobs <= 0) opt.jobs = int(std::max(1u, std::thread::hardware_concurrency()));
    if (opt.seed) {
        c.seed = *opt.seed;
    } else {
        std::random_device rd;
        c.seed = std::uniform_int_distribution<std::uint64_t>(100000000, 999999999)(rd);
    }
    c.opt = opt;
    c.work_pristine = opt.work / "pristine";
    c.work_src = opt.work / "src";
    c.work_build = opt.work / "build";
    c.work_runs = opt.work / "runs";

    std::fprintf(stderr, "pdlab-grade: lab %s (%s/%s): %zu checks worth %s points, %zu students, seed %llu\n",
                 c.lab.number.c_str(), c.lab.track.c_str(), c.lab.folder.c_str(), c.rubric.checks.size(),
                 fmt_points(c.rubric.max_points()).c_str(), students.size(), (unsigned long long)c.seed);
    for (const auto& s : stray)
        std::fprintf(stderr, "pdlab-grade: note: %s is a file, not a student folder: skipped\n", s.c_str());
    prepare(c);

    std::vector<StudentResult> results;
    for (std::size_t i = 0; i < students.size(); i++) {
        const auto& [name, dir] = students[i];
        std::fprintf(stderr, "[%zu/%zu] %s: ", i + 1, students.size(), name.c_str());
        std::fflush(stderr);
        Submission sub = locate(name, dir, c.lab, c.opt.kit);
        StudentResult r = grade_one(c, sub, i);
        int passed = 0;
        for (const auto& ch : r.checks) passed += ch.outcome == Outcome::passed;
        std::fprintf(stderr, "%d/%zu checks, %s/%s points%s\n", passed, r.checks.size(), fmt_points(r.total).c_str(),
                     fmt_points(c.rubric.max_points()).c_str(), r.status == "ok" ? "" : (" (" + r.status + ")").c_str());
        results.push_back(std::move(r));
        write_report(c, results.back());
        write_gradebook(c, results);  // after every student: an interrupted run keeps what it has
    }
    // Leave the work folder's lab as the kit has it.
    sync_tree(c.work_pristine, c.kit_file_list, c.work_src, {});

    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_summary(c, results, started, seconds);
    std::fprintf(stderr,
                 "pdlab-grade: graded %zu students in %.0f s\n  gradebook: %s\n  reports:   %s/\n  summary:   %s\n",
                 results.size(), seconds, (c.opt.out / "gradebook.csv").c_str(), (c.opt.out / "reports").c_str(),
                 (c.opt.out / "grading.md").c_str());
    if (!temp_work) std::fprintf(stderr, "  work:      %s (kept: the next run with --work reuses its build)\n",
                                 c.opt.work.c_str());
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
  Every check is all or nothing. A compile error, a crash, a timeout or a wrong
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

EXAMPLES
  ./kit grade ~/course/lab03-submissions --lab 03
  ./kit grade subs --lab 03 --out grades/lab03 --timeout 30 --seed 424242
  ./kit grade subs --lab 03 --student alice --work /tmp/grade-work

EXIT STATUS
  0 graded (whatever the students scored), 2 bad usage (unknown lab, missing
  or empty SUBMISSIONS, missing or bad rubric), 1 the kit itself fails (it
  does not build, or the reference solution fails a check).

  Student code runs as you, with time and memory limits but no sandbox: grade
  inside a container or as a throwaway user when you do not trust it.
  See docs/instructors.md.)";

}  // namespace
}  // namespace pd::grade

int main(int argc, char** argv) {
    using namespace pd::grade;
    Options opt;
#ifdef PDLAB_SOURCE_ROOT
    opt.kit = PDLAB_SOURCE_ROOT;
#endif
    CLI::App app{"pdlab-grade: grade a class's submissions for one lab of the prefill/decode kit.\n"
                 "Usually run as: ./kit grade SUBMISSIONS --lab NN [--out DIR]",
                 "pdlab-grade"};
    app.get_formatter()->column_width(30);
    app.footer(kFooter);
    std::uint64_t seed = 0;
    app.add_option("SUBMISSIONS", opt.submissions, "folder with one subfolder per student")->required();
    app.add_option("--lab,-l", opt.lab, "the lab: 03, 3, 03-cache-and-gqa or track1/03")->required();
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
