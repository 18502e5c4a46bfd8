#include "reference.hpp"

#include <sstream>

#include <fmt/format.h>

#include "build.hpp"
#include "checks.hpp"
#include "outputs.hpp"
#include "workdir.hpp"

namespace pd::grade {

namespace {

// Every field an output check names must exist in the reference output: a
// misspelt field would otherwise compare nothing.
std::string missing_fields(const Check& k, const json& produced) {
    std::string bad;
    for (const auto& f : k.compare.fields)
        if (!find_path(produced, f)) {
            std::string keys;
            if (produced.is_object())
                for (const auto& [key, v] : produced.items()) keys += (keys.empty() ? "" : ", ") + key;
            bad += fmt::format("  {}: the reference JSON has no field \"{}\" (its top-level fields: {})\n", k.name,
                               f, keys);
        }
    return bad;
}

// Why a check failed for the reference, with the end of its output and, when a
// test filter matched nothing, the test cases there are.
std::string failure(const Context& c, const Check& k, const CheckResult& r) {
    std::string bad = fmt::format("  {}: {}: {}\n", k.name, outcome_name(r.outcome), r.reason);
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
    return bad;
}

// A test check whose test cases observe nothing rests on the summary the test
// program prints, which the student's code can forge (docs/instructors.md).
void warn_if_unobserved(const Check& k, const CheckResult& r) {
    if (k.kind == "test" && count_observations(r.observed) == 0)
        say(fmt::format("warning: the test cases of check \"{}\" observe no values (pd::lab::observe): a "
                        "submission that prints a passing summary would pass it", k.name));
}

}  // namespace

void prepare_reference(Context& c) {
    say(fmt::format("building the lab with the reference solution{}",
                    fs::exists(c.work_build / ".ninja_log") ? "" : " (and, this once, the engine: minutes)"));
    std::map<std::string, fs::path> sol;
    for (const auto& s : c.lab.sources) sol[s] = c.lab.solution_dir / s;
    RunResult b = build_lab(c, sol, 0, false);
    if (!b.ok())
        throw KitError(fmt::format("the reference solution does not build:\n{}", tidy(c, why_failed(b))));

    c.reference_json.assign(c.rubric.checks.size(), std::nullopt);
    std::vector<std::optional<json>> produced(c.rubric.checks.size());
    auto results = run_checks(c, fresh_scratch(c, "reference"), &produced);
    std::string bad;
    for (std::size_t i = 0; i < results.size(); i++) {
        const auto& k = c.rubric.checks[i];
        if (results[i].outcome != Outcome::passed) bad += failure(c, k, results[i]);
        else if (k.kind == "output") bad += missing_fields(k, *produced[i]);
    }
    if (!bad.empty())
        throw KitError(fmt::format("the reference solution fails the rubric with seed {}; fix the rubric "
                                   "(or, when a test is flaky under some seeds, the test) before grading:\n{}",
                                   c.seed, bad));
    c.reference_json = produced;
    c.reference_cases.assign(results.size(), 0);
    c.reference_observed.assign(results.size(), {});
    for (std::size_t i = 0; i < results.size(); i++) {
        c.reference_cases[i] = results[i].cases;
        c.reference_observed[i] = results[i].observed;
        warn_if_unobserved(c.rubric.checks[i], results[i]);
    }
    say(fmt::format("the reference solution passes all {} checks with seed {}", results.size(), c.seed));
}

}  // namespace pd::grade
