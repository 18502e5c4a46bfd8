#include "checks.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "compare.hpp"
#include "outputs.hpp"
#include "process.hpp"
#include "workdir.hpp"

namespace pd::grade {

namespace {

// The largest --json file of a lab program the grader reads (the lab programs
// write a few kB; a bigger one is a wrong answer, not a grader crash).
constexpr std::size_t kMaxOutputJsonBytes = 16 << 20;

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
    r.cpu_s = r.timeout_s;
    r.extra_procs = sandbox_processes(c, false);
    // The built lab read-only, the check's own scratch folder writable, nothing else.
    if (c.opt.sandbox) r.sandbox = SandboxSpec{{c.work_src, c.work_build}, {scratch}, scratch};
    r.run_as = sandbox_uid(c);
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

// A test binary that ended normally but not with every selected test case passed.
void classify_failed_tests(const Context& c, const RunResult& out, const DoctestSummary& s, CheckResult& res) {
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
}

// Runs one test binary of a test check; false (with `res` saying why) when it
// did not end with every selected test case passed and its observations read.
bool run_test_binary(const Context& c, const Check& k, const fs::path& bin, const fs::path& observe_file,
                     const fs::path& scratch, CheckResult& res, DoctestSummary& s) {
    std::error_code ec;
    fs::remove(observe_file, ec);
    RunSpec r = limited(c, k, scratch);
    r.argv = {bin.string(), "--test-case=" + k.test_case, "--no-intro", "--no-colors", "--no-path-filenames"};
    r.env["PDLAB_OBSERVE"] = observe_file.string();
    RunResult out = run_process(r);
    res.seconds += out.seconds;
    if (classify_abnormal(c, out, res)) return false;
    s = parse_doctest_summary(out.output);
    if (out.exit_code != 0 || !s.found || s.failed != 0) {
        classify_failed_tests(c, out, s, res);
        return false;
    }
    std::string why;
    auto observed = read_observations(observe_file, why);
    if (!observed) {
        res.outcome = Outcome::error;
        res.reason = fs::symlink_status(observe_file, ec).type() == fs::file_type::not_found
                         ? "the test program printed a passing summary but recorded no observations: its test "
                           "cases did not run (a summary alone does not count)"
                         : "the test program's observations cannot be read: " + why;
        return false;
    }
    res.observed.insert(res.observed.end(), observed->begin(), observed->end());
    return true;
}

// The reference run: every test case that ran must have observed (else the
// lab's tests.cpp misses lab_test.hpp). A student: the observations must be
// the reference solution's, computed on the same seeded inputs.
bool observations_hold(const Context& c, std::size_t index, int cases, CheckResult& res) {
    if (c.reference_observed.empty()) {
        bool all_passed = std::all_of(res.observed.begin(), res.observed.end(), [](auto& o) { return o.passed; });
        if (int(res.observed.size()) == cases && all_passed) return true;
        res.outcome = Outcome::error;
        res.reason = fmt::format("{} test cases ran but {} wrote passing observations (does tests.cpp include "
                                 "labs/common/lab_test.hpp?)", cases, res.observed.size());
        return false;
    }
    auto bad = compare_observations(res.observed, c.reference_observed[index]);
    if (!bad) return true;
    res.outcome = bad->wrong_values ? Outcome::wrong : Outcome::error;
    res.reason = bad->reason;
    return false;
}

CheckResult run_test_check(const Context& c, const Check& k, std::size_t index, const fs::path& scratch) {
    CheckResult res;
    // The seed stays hidden from students (reports are theirs): $SEED stands for it.
    res.command = fmt::format("PDLAB_TEST_SEED=$SEED {} --test-case={}", in_kit(c, c.test_bins[0]),
                              shell_quote(k.test_case));
    int cases = 0, passed = 0;
    for (std::size_t b = 0; b < c.test_bins.size(); b++) {
        DoctestSummary s;
        fs::path observe_file = scratch / fmt::format("observed{}-{}.jsonl", index + 1, b + 1);
        if (!run_test_binary(c, k, c.test_bins[b], observe_file, scratch, res, s)) return res;
        cases += s.cases;
        passed += s.passed;
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
    if (!observations_hold(c, index, cases, res)) return res;
    res.outcome = Outcome::passed;
    res.points = k.points;
    res.cases = cases;
    res.detail = fmt::format("{} test case{} passed, {} observations match", passed, passed == 1 ? "" : "s",
                             count_observations(res.observed));
    return res;
}

// The lab program ended with a status other than 0 and 1: it wrote no JSON to judge.
void classify_failed_program(const Context& c, const RunResult& out, CheckResult& res) {
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
}

// The program's --json file, or nullopt with `res` saying why there is none.
std::optional<json> read_output_json(const Context& c, const fs::path& json_file, const RunResult& out,
                                     CheckResult& res) {
    json doc;
    try {
        std::string why;
        auto text = read_untrusted(json_file, kMaxOutputJsonBytes, why);
        if (!text) throw std::runtime_error(why);
        doc = parse_json_limited(*text);
    } catch (const std::exception& e) {
        res.outcome = out.exit_code == 0 ? Outcome::wrong : Outcome::error;
        res.reason = fs::exists(json_file) ? "the lab program wrote a --json file that is not valid JSON"
                                           : "the lab program wrote no --json file";
        if (out.exit_code != 0) res.reason += fmt::format(" and ended with exit status {}", out.exit_code);
        res.excerpt = tidy(c, last_lines(out.output, 20));
        return std::nullopt;
    }
    // A document that is one string holding JSON (a program that wrote an already
    // dumped text through a json value) is read as the JSON it holds.
    if (doc.is_string()) {
        try {
            json inner = parse_json_limited(doc.get<std::string>());
            if (inner.is_object() || inner.is_array()) doc = std::move(inner);
        } catch (const std::exception&) {
        }
    }
    return doc;
}

// The reference run has nothing to compare with: it passes when its own checks did.
void judge_reference_output(const Check& k, const json& doc, const RunResult& out, CheckResult& res) {
    if (out.exit_code != 0) {
        res.outcome = Outcome::error;
        res.reason = fmt::format("the lab program ended with exit status {}: one of its own checks failed",
                                 out.exit_code);
        res.excerpt = last_lines(out.output, 30);
        return;
    }
    if (k.compare.scale.any()) {  // the value the students' scale against must itself be usable
        std::string why;
        if (!(scaled_share(doc, doc, k.compare.scale, why) > 0)) {
            res.outcome = Outcome::error;
            res.reason = "the reference's output cannot scale points: " + why;
            return;
        }
    }
    res.outcome = Outcome::passed;
    res.points = k.points;
}

void judge_student_output(const Context& c, const Check& k, const json& doc, const json& want,
                          const RunResult& out, CheckResult& res) {
    auto diffs = compare_json(doc, want, k.compare);
    if (!diffs.empty()) {
        res.outcome = Outcome::wrong;
        res.reason = "output differs from the reference: " + diffs[0];
        for (const auto& d : diffs) res.excerpt += d + "\n";
        if (out.exit_code != 0)
            res.excerpt += fmt::format("\nThe lab program ended with exit status {} (one of its own checks "
                                       "failed); its last lines:\n{}",
                                       out.exit_code, tidy(c, last_lines(out.output, 12)));
        return;
    }
    if (out.exit_code != 0) {
        res.outcome = Outcome::wrong;
        res.reason = fmt::format("the lab program ended with exit status {}: one of its own checks failed "
                                 "(the rows marked in its output)",
                                 out.exit_code);
        res.excerpt = tidy(c, last_lines(out.output, 30));
        return;
    }
    res.outcome = Outcome::passed;
    res.points = k.points;
    res.detail = k.compare.fields.empty() ? "the whole JSON matches"
                                          : fmt::format("{} field{} match", k.compare.fields.size(),
                                                        k.compare.fields.size() == 1 ? "" : "s");
    if (!k.compare.scale.any()) return;
    std::string why;
    const double share = scaled_share(doc, want, k.compare.scale, why);
    res.points = std::round(k.points * share * 100) / 100;  // to a hundredth of a point, for the gradebook
    if (share > 0) {
        res.detail += "; " + why;
        return;
    }
    res.outcome = Outcome::wrong;
    res.reason = "no points for " + why;
}

CheckResult run_output_check(const Context& c, const Check& k, std::size_t index, const fs::path& scratch,
                             json* produced) {
    CheckResult res;
    fs::path json_file = scratch / fmt::format("check{}.json", index + 1);
    std::error_code ec;
    fs::remove(json_file, ec);
    RunSpec r = limited(c, k, scratch);
    r.argv = {c.program.string()};
    res.command = in_kit(c, c.program);
    for (const auto& a : output_args(c, k)) {
        r.argv.push_back(a);
        res.command += fmt::format(" {}", shell_quote(a));
    }
    r.argv.push_back("--json");
    r.argv.push_back(json_file.string());
    res.command += " --json out.json";
    RunResult out = run_process(r);
    res.seconds = out.seconds;
    if (classify_abnormal(c, out, res)) return res;
    // Exit status 1: the program ran and wrote its JSON, but one of its own checks
    // failed (labs/README.md); the JSON comparison then says where.
    if (out.exit_code != 0 && out.exit_code != 1) {
        classify_failed_program(c, out, res);
        return res;
    }
    std::optional<json> doc = read_output_json(c, json_file, out, res);
    if (!doc) return res;
    if (produced) *produced = *doc;
    if (!c.reference_json[index]) judge_reference_output(k, *doc, out, res);
    else judge_student_output(c, k, *doc, *c.reference_json[index], out, res);
    return res;
}

}  // namespace

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

std::vector<CheckResult> run_checks(const Context& c, const fs::path& scratch,
                                    std::vector<std::optional<json>>* produced) {
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

}  // namespace pd::grade
