"""Students of the hostile class (grade_hostile_class.py) who forge their test
results instead of computing them (issue 19, "results the student code cannot
forge"). Each is a static initializer added to an exercise: it runs in the
lab's test binary before any test case, inside the sandbox.

  exact_summary  the starter, printing doctest's passing summary with the EXACT
                 number of test cases the check runs (read from tests.cpp) and
                 exiting 0: the grader scored this 100/100 while it trusted the
                 printed summary
  fake_observer  the same, and it also writes the observation file
                 (PDLAB_OBSERVE, labs/common/observe.hpp) with every test case
                 of the check marked passed, but without the values: it does
                 not compute them
  test_caller    the solution plus a call into the tests' own code
                 (pd::test::randn, tests/unit/check.hpp, included by path):
                 the grader's symbol scan gives the lab 0

Expected: exact_summary and fake_observer score 0 on every test check, and
test_caller 0 in total with "forbidden symbol" and the symbol in its report.
"""
import json
import re

# Reads the test binary's --test-case filter from /proc/self/cmdline; the lab
# program has none, and the forger lets it run (and fail) as the starter.
FORGER = r"""
char pdlab_args[8192] = {0};
FILE* pdlab_cmd = std::fopen("/proc/self/cmdline", "r");
if (!pdlab_cmd) return;
size_t pdlab_n = std::fread(pdlab_args, 1, sizeof pdlab_args - 1, pdlab_cmd);
std::fclose(pdlab_cmd);
int cases = 0;
const char* lines = "";
for (size_t i = 0; i < pdlab_n; i += std::strlen(pdlab_args + i) + 1) {
    const char* arg = pdlab_args + i;
%s
}
if (cases == 0) return;
%s
std::printf("[doctest] test cases: %%d | %%d passed | 0 failed | 0 skipped\n"
            "[doctest] assertions: %%d | %%d passed | 0 failed |\n[doctest] Status: SUCCESS!\n",
            cases, cases, cases, cases);
std::fflush(stdout);
_exit(0);
"""
WRITE_OBSERVATIONS = r"""
if (const char* path = std::getenv("PDLAB_OBSERVE"))
    if (FILE* o = std::fopen(path, "w")) { std::fputs(lines, o); std::fclose(o); }
"""
# DOCTEST_CONFIG_DISABLE: without it doctest.h registers a test suite, and the
# lab program (no doctest in it) would not link.
TEST_CALLER = """
#define DOCTEST_CONFIG_DISABLE
#include "../../../tests/unit/check.hpp"
namespace { const std::vector<float> pdlab_test_noise = pd::test::randn(4, 1); }
"""


def c_string(text):
    return json.dumps(text)  # a JSON string is a valid C string literal for ASCII text


def cases_of(tests_cpp, test_filter):
    """The test cases a rubric filter ("lab03.bytes.*", commas for several) selects."""
    names = re.findall(r'TEST_CASE\("([^"]+)"\)', tests_cpp)
    prefixes = [f.strip().rstrip("*") for f in test_filter.split(",")]
    return [n for n in names if any(n.startswith(p) for p in prefixes)]


def forger_body(tests_cpp, rubric, observe):
    """A static initializer's body that forges every test check of `rubric`."""
    branches = []
    for k in rubric["checks"]:
        if k["kind"] != "test":
            continue
        cases = cases_of(tests_cpp, k["test_case"])
        lines = "".join(json.dumps({"case": n, "passed": True, "obs": []}) + "\n" for n in cases)
        branches.append(f'    if (!std::strcmp(arg, {c_string("--test-case=" + k["test_case"])})) '
                        f'{{ cases = {len(cases)}; lines = {c_string(lines)}; }}')
    return FORGER % ("\n".join(branches), WRITE_OBSERVATIONS if observe else "")


def students(lab, sol, starter, solution, static_init):
    """name -> exercise.cpp of the forging students."""
    tests_cpp = (lab / "tests.cpp").read_text()
    rubric = json.loads((sol / "rubric.json").read_text())
    return {
        "exact_summary": starter + static_init.format(body=forger_body(tests_cpp, rubric, False)),
        "fake_observer": starter + static_init.format(body=forger_body(tests_cpp, rubric, True)),
        "test_caller": solution + TEST_CALLER,
    }


def check(rows, reports, rubric, fail):
    """The forgers' rows (and grade_hostile_class's fake_summary, who prints a
    summary with a wrong count): 0 on every test check; test_caller 0 and flagged."""
    for name in ("fake_summary", "exact_summary", "fake_observer"):
        for k in rubric["checks"]:
            if k["kind"] == "test" and float(rows[name][k["name"]]) != 0:
                fail(f"{name} forges its test results without computing them, yet scored {rows[name][k['name']]} "
                     f"on {k['name']!r}: a test check must rest on the observed values, not the printed "
                     f"summary: {rows[name]}")
    if "observations" not in reports["exact_summary"]:
        fail("exact_summary's report does not say that its observations are missing")
    row = rows["test_caller"]
    if float(row["total"]) != 0 or "forbidden" not in row["status"] or "pd::test::" not in reports["test_caller"]:
        fail(f"test_caller compiles the tests' pd::test::randn into its exercise: it must score 0, flagged "
             f"'forbidden symbol' with the symbol in its report: {row}")
