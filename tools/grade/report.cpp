#include "report.hpp"

#include <fstream>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "outputs.hpp"
#include "process.hpp"

namespace pd::grade {

namespace {

// A cell a spreadsheet would run as a formula (= + - @, or a tab or CR first)
// is quoted and led by a ' so it reads as text: student folder names are
// the students' choice.
std::string csv_field(const std::string& s) {
    bool formula = !s.empty() && std::string_view("=+-@\t\r").find(s[0]) != std::string_view::npos;
    if (!formula && s.find_first_of(",\"\n\r") == std::string::npos) return s;
    return fmt::format("\"{}{}\"", formula ? "'" : "", replace_all(s, "\"", "\"\""));
}

std::string fence(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return "````text\n" + t + "\n````\n";
}

std::string check_label(const Check& k) {
    return k.kind == "test" ? fmt::format("test `{}`", k.test_case) : std::string("program output");
}

std::string report_header(const Context& c, const StudentResult& r) {
    int passed = 0;
    for (const auto& ch : r.checks) passed += ch.outcome == Outcome::passed;
    std::string md = fmt::format("# Lab {} ({}): {}\n\n", c.lab.number, c.lab.folder, r.name);
    md += fmt::format("**{} / {} points**, {} of {} checks passed. Status: **{}**.\n\n", fmt_points(r.total),
                      fmt_points(c.rubric.max_points()), passed, r.checks.size(), r.status);
    // The seed is not named: the next run may reuse it, and a student who knew it
    // could tune their code to its inputs. The instructor's grading.md has it.
    md += fmt::format("Graded with the kit's tests on inputs drawn from a hidden seed (PDLAB_TEST_SEED; your "
                      "instructor has it), each check under a {:g} s time limit and a {} MB memory limit, "
                      "OMP_NUM_THREADS={}.\n\n",
                      c.opt.timeout_s, c.opt.mem_mb, c.opt.threads);
    if (!r.notes.empty()) {
        md += "## Notes\n\n";
        for (const auto& n : r.notes) md += "- " + n + "\n";
        md += "\n";
    }
    return md;
}

std::string report_checks(const Context& c, const StudentResult& r) {
    std::string md = "## Checks\n\n| check | what | points | result |\n| --- | --- | --- | --- |\n";
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
    return md;
}

std::string report_failures(const Context& c, const StudentResult& r) {
    std::string md;
    for (std::size_t i = 0; i < r.checks.size(); i++) {
        const auto& k = c.rubric.checks[i];
        const auto& ch = r.checks[i];
        if (ch.outcome == Outcome::passed || ch.outcome == Outcome::not_run) continue;
        if (md.empty()) md += "## Failures\n\n";
        md += fmt::format("### {} ({} / {}): {}\n\n", k.name, fmt_points(ch.points), fmt_points(k.points),
                          outcome_name(ch.outcome));
        if (!k.description.empty()) md += k.description + "\n\n";
        md += ch.reason + "\n\n";
        if (!ch.excerpt.empty()) md += fence(ch.excerpt) + "\n";
        if (!ch.command.empty()) md += "Reproduce: `" + ch.command + "`\n\n";
    }
    return md;
}

// The commands of the checks that ran or, when none did (the build failed),
// those of the test checks.
std::string report_reproduce(const Context& c, const StudentResult& r) {
    std::string md = "## Reproduce locally\n\n";
    std::string files;
    for (const auto& s : c.lab.sources) files += (files.empty() ? "" : ", ") + s;
    md += fmt::format("In your copy of the kit, put this submission's {} into `{}/`, then build and run a check "
                      "with the hidden seed as SEED (any number shows the same kind of failure):\n\n",
                      files, c.lab.rel.string());
    md += "```sh\n./kit build\n";
    std::set<std::string> shown;
    for (const auto& ch : r.checks)
        if (!ch.command.empty() && shown.insert(ch.command).second) md += ch.command + "\n";
    if (shown.empty())
        for (const auto& k : c.rubric.checks)
            if (k.kind == "test")
                md += fmt::format("PDLAB_TEST_SEED=$SEED {} --test-case={}\n", in_kit(c, c.test_bins[0]),
                                  shell_quote(k.test_case));
    md += "```\n\n";
    md += fmt::format("`./kit test {}-{}` runs the same tests on the default inputs.\n", c.lab.track, c.lab.number);
    return md;
}

std::string kit_version(const fs::path& kit) {
    RunSpec r;
    r.argv = {"git", "-C", kit.string(), "describe", "--always", "--dirty"};
    r.timeout_s = 30;
    RunResult out = run_process(r);
    return out.ok() ? trim(out.output) : "unknown (not a git checkout)";
}

std::string summary_header(const Context& c, const std::string& started, double seconds) {
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
    return md;
}

}  // namespace

std::string fmt_points(double p) { return fmt::format("{:g}", p); }

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

void write_report(const Context& c, const StudentResult& r) {
    std::string md = report_header(c, r) + report_checks(c, r) + report_failures(c, r) + report_reproduce(c, r);
    std::ofstream(c.opt.out / "reports" / (r.name + ".md")) << md;
}

void write_summary(const Context& c, const std::vector<StudentResult>& results, const std::string& started,
                   double seconds) {
    std::string md = summary_header(c, started, seconds);
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

}  // namespace pd::grade
