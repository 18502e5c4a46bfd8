// Unit tests of pdlab-grade's parts: running under limits, reading doctest and
// compiler output, comparing JSON and observations, parsing rubrics. Fast; no build involved.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compare.hpp"
#include "forbidden.hpp"
#include "observations.hpp"
#include "outputs.hpp"
#include "process.hpp"
#include "rubric.hpp"
#include "workdir.hpp"

using namespace pd::grade;

namespace {
RunSpec sh(const std::string& script, double timeout = 10) {
    RunSpec r;
    r.argv = {"/bin/sh", "-c", script};
    r.timeout_s = timeout;
    return r;
}
}  // namespace

TEST_CASE("tools.grade.process.exit_and_output") {
    auto r = run_process(sh("echo out; echo err >&2; exit 3"));
    CHECK(r.started);
    CHECK(r.exit_code == 3);
    CHECK(r.signal == 0);
    CHECK_FALSE(r.timed_out);
    CHECK(r.output == "out\nerr\n");
    CHECK(r.describe() == "exit status 3");
}

TEST_CASE("tools.grade.process.timeout_kills_the_group") {
    // The child's own child (sleep) must die too, or the pipe would stay open.
    auto r = run_process(sh("sleep 30 & sleep 30; echo never", 0.5));
    CHECK(r.timed_out);
    CHECK(r.seconds < 5);
    CHECK(r.output.find("never") == std::string::npos);
    CHECK(r.describe().find("timed out") == 0);
}

TEST_CASE("tools.grade.process.signal") {
    auto r = run_process(sh("kill -SEGV $$"));
    CHECK(r.signal == SIGSEGV);
    CHECK_FALSE(r.ok());
    CHECK(r.describe().find("SIGSEGV") != std::string::npos);
}

TEST_CASE("tools.grade.process.memory_limit") {
    if (access("/usr/bin/python3", X_OK) != 0) return;  // the allocator below is python3
    // 64 MB of address space is too little to hold a 200 MB string. The marker
    // is printed in pieces: Python 3.13's MemoryError traceback quotes the -c
    // source line, so a marker written whole there would be in the output anyway.
    RunSpec r = sh("exec /usr/bin/python3 -c 'x = bytearray(200 * 1024 * 1024); print(\"got\", 200, \"MB\")'");
    r.mem_bytes = std::size_t(64) << 20;
    auto out = run_process(r);
    CHECK_FALSE(out.ok());
    CHECK(out.output.find("got 200 MB") == std::string::npos);
}

TEST_CASE("tools.grade.process.dedicated_uid_caps_processes") {
    // Root may switch uid and is not bound by RLIMIT_NPROC; as another user this cannot run.
    if (geteuid() != 0 || access("/usr/bin/python3", X_OK) != 0) return;
    // A process run as uid 64000 with room for 8 more forks 40 sleepers: most
    // forks must fail, which as root (no run_as) they would not.
    RunSpec r = sh("exec /usr/bin/python3 -c '\n"
                   "import os, time\n"
                   "n = 0\n"
                   "for i in range(40):\n"
                   "    try:\n"
                   "        if os.fork() == 0: time.sleep(3); os._exit(0)\n"
                   "        n += 1\n"
                   "    except OSError: pass\n"
                   "print(os.getuid(), n, flush=True)'");
    r.run_as = 64000;
    r.extra_procs = 8;
    auto out = run_process(r);
    INFO("output: " << out.output);
    REQUIRE(out.started);
    int uid = -1, started = -1;
    REQUIRE(std::sscanf(out.output.c_str(), "%d %d", &uid, &started) == 2);
    CHECK_MESSAGE(uid == 64000, "the child must run as the dedicated uid");
    CHECK_MESSAGE(started <= 8, "RLIMIT_NPROC of a dedicated uid must cap every process it starts, got "
                                    << started << " of 40 sleepers");
}

TEST_CASE("tools.grade.process.env_cwd_and_missing_program") {
    RunSpec r = sh("echo $PDLAB_TEST_SEED; pwd");
    r.env["PDLAB_TEST_SEED"] = "4242";
    r.cwd = "/";
    auto out = run_process(r);
    CHECK(out.output == "4242\n/\n");
    RunSpec bad;
    bad.argv = {"/nonexistent/program"};
    auto b = run_process(bad);
    CHECK_FALSE(b.started);
    CHECK(b.error.find("No such file") != std::string::npos);
}

TEST_CASE("tools.grade.process.long_output_is_cut_in_the_middle") {
    RunSpec r = sh("echo FIRST; i=0; while [ $i -lt 20000 ]; do echo xxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done; echo LAST");
    r.keep_bytes = 4096;
    auto out = run_process(r);
    CHECK(out.output.find("FIRST") == 0);
    CHECK(out.output.find("LAST") != std::string::npos);
    CHECK(out.output.find("left out") != std::string::npos);
    CHECK(out.output.size() < 5000);
    CHECK(out.output_bytes > 400000);
}

TEST_CASE("tools.grade.outputs.doctest") {
    const std::string out =
        "===============================================================================\n"
        "tests.cpp:56:\n"
        "TEST CASE:  lab01.greedy.matches_engine_argmax\n"
        "\n"
        "tests.cpp:63: ERROR: CHECK( got == want ) is NOT correct!\n"
        "  values: CHECK( 0 == 5 )\n"
        "  logged: greedy() returned id 0\n"
        "\n"
        "===============================================================================\n"
        "[doctest] test cases: 3 | 2 passed | 1 failed | 9 skipped\n"
        "[doctest] assertions: 6 | 5 passed | 1 failed |\n";
    auto s = parse_doctest_summary(out);
    CHECK(s.found);
    CHECK(s.cases == 3);
    CHECK(s.passed == 2);
    CHECK(s.failed == 1);
    CHECK(s.skipped == 9);
    auto reason = doctest_failure_reason(out);
    CHECK(reason.find("lab01.greedy.matches_engine_argmax: CHECK( got == want ) is NOT correct!") == 0);
    CHECK(reason.find("values: CHECK( 0 == 5 )") != std::string::npos);
    auto ex = doctest_failure_excerpt(out);
    CHECK(ex.find("TEST CASE:") != std::string::npos);
    CHECK(ex.find("logged: greedy()") != std::string::npos);
    CHECK(ex.find("[doctest]") == std::string::npos);
    CHECK_FALSE(parse_doctest_summary("no summary here").found);
}

TEST_CASE("tools.grade.outputs.compiler") {
    const std::string out =
        "[1/3] Compiling C++ object x.o\n"
        "FAILED: labs/x.a.p/exercise.cpp.o\n"
        "c++ -Ilabs -o labs/x.a.p/exercise.cpp.o -c ../src/labs/exercise.cpp\n"
        "../src/labs/exercise.cpp:12:5: error: 'oops' was not declared in this scope\n"
        "   12 |     oops;\n"
        "ninja: build stopped: subcommand failed.\n";
    CHECK(compile_error_reason(out) == "../src/labs/exercise.cpp:12:5: error: 'oops' was not declared in this scope");
    auto ex = compile_error_excerpt(out);
    CHECK(ex.find("../src/labs/exercise.cpp:12:5: error: 'oops'") == 0);
    CHECK(ex.find("ninja: build stopped") == std::string::npos);
}

TEST_CASE("tools.grade.compare.fields_and_tolerance") {
    json want = json::parse(R"({"head_map":[0,0,1,1],"bytes_per_token":4096,"ratio":0.25,
                                "name":"gqa","ttft_ms":12.5,"nested":{"x":1.0,"elapsed_s":3}})");
    json got = want;
    got["ttft_ms"] = 99.0;          // timing: never compared
    got["nested"]["elapsed_s"] = 7;  // timing inside a compared object: skipped
    got["ratio"] = 0.25000001;
    CompareSpec spec;
    spec.float_rtol = 1e-4;
    CHECK(compare_json(got, want, spec).empty());  // whole document
    spec.fields = {"head_map", "bytes_per_token", "ratio", "name", "nested"};
    CHECK(compare_json(got, want, spec).empty());

    got["head_map"][2] = 0;
    got["bytes_per_token"] = 4097;
    auto d = compare_json(got, want, spec);
    REQUIRE(d.size() == 2);
    CHECK(d[0] == "head_map[2]: got 0, expected 1");
    CHECK(d[1] == "bytes_per_token: got 4097, expected 4096");

    got = want;
    got["ratio"] = 0.26;
    d = compare_json(got, want, spec);
    REQUIRE(d.size() == 1);
    CHECK(d[0].find("ratio: got 0.26, expected 0.25") == 0);

    got = want;
    got.erase("name");
    d = compare_json(got, want, spec);
    REQUIRE(d.size() == 1);
    CHECK(d[0] == "name: missing");

    spec.fields = {"nested.x", "head_map[3]", "head_map.3"};
    CHECK(compare_json(want, want, spec).empty());
    CHECK(find_path(want, "nested.nothing") == nullptr);
    CHECK(is_ignored_key("ttft_ms", CompareSpec::default_ignore()));
    CHECK(is_ignored_key("prefill_time", CompareSpec::default_ignore()));
    CHECK_FALSE(is_ignored_key("bytes_per_token", CompareSpec::default_ignore()));
    CHECK_FALSE(is_ignored_key("items", CompareSpec::default_ignore()));
}

TEST_CASE("tools.grade.compare.scaled_points") {
    // Lab 17's goodput: the student's number over the reference's, 0 points at
    // x0.5, all at x1.0; hostile values earn nothing and never more than all.
    ScaleSpec spec{"goodput", 0.5, 1.0};
    const json want = json::parse(R"({"goodput": 10.0})");
    auto share = [&](const char* got) {
        std::string why;
        return scaled_share(json::parse(got), want, spec, why);
    };
    CHECK(share(R"({"goodput": 10.0})") == doctest::Approx(1.0));
    CHECK(share(R"({"goodput": 7.5})") == doctest::Approx(0.5));
    CHECK(share(R"({"goodput": 5.0})") == doctest::Approx(0.0));
    CHECK(share(R"({"goodput": 3.0})") == 0);
    CHECK(share(R"({"goodput": 25.0})") == 1);      // better than the reference: all, no more
    CHECK(share(R"({"goodput": 1e308})") == 1);     // the ratio overflows to inf: still all, no more
    CHECK(share(R"({"goodput": -20.0})") == 0);     // negative
    CHECK(share(R"({"goodput": null})") == 0);      // what NaN and inf become in JSON
    CHECK(share(R"({"goodput": "10"})") == 0);      // a string
    CHECK(share(R"({"goodput": [10]})") == 0);
    CHECK(share(R"({"other": 10})") == 0);          // missing
    CHECK(share(R"({"goodput": true})") == 0);
    std::string why;
    CHECK(scaled_share(want, json::parse(R"({"goodput": 0})"), spec, why) == 0);  // a reference of 0
    CHECK(why.find("reference") != std::string::npos);
    scaled_share(json::parse(R"({"goodput": 7.5})"), want, spec, why);
    CHECK(why.find("x0.750") != std::string::npos);
}

TEST_CASE("tools.grade.rubric.parse") {
    auto r = parse_rubric(json::parse(R"({"lab":"03","checks":[
        {"name":"append","kind":"test","test_case":"lab03.kv_cache.*","points":25},
        {"name":"lab output","kind":"output","args":["--threads","1"],
         "compare":{"fields":["head_map"],"float_rtol":1e-4},"points":10}]})"),
                          "rubric.json");
    CHECK(r.lab == "03");
    REQUIRE(r.checks.size() == 2);
    CHECK(r.max_points() == 35);
    CHECK(r.checks[1].compare.float_rtol == doctest::Approx(1e-4));

    auto fails = [](const char* text) {
        try {
            parse_rubric(json::parse(text), "rubric.json");
        } catch (const RubricError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(fails(R"({"lab":"03","checks":[]})").find("non-empty") != std::string::npos);
    CHECK(fails(R"({"lab":"03","checks":[{"name":"a","kind":"test","points":1}]})").find("test_case") !=
          std::string::npos);
    CHECK(fails(R"({"lab":"03","checks":[{"name":"a","kind":"tset","points":1}]})").find("\"kind\"") !=
          std::string::npos);
    CHECK(fails(R"({"lab":"03","checks":[{"name":"a","kind":"test","test_cases":"x","test_case":"x","points":1}]})")
              .find("unknown key \"test_cases\"") != std::string::npos);
    CHECK(fails(R"({"lab":"03","checks":[{"name":"a","kind":"output","args":["--json","x"],
                  "compare":{"fields":[]},"points":1}]})")
              .find("--json") != std::string::npos);
    CHECK(fails(R"({"lab":"03","checks":[{"name":"a","kind":"test","test_case":"x","points":1},
                  {"name":"a","kind":"test","test_case":"y","points":1}]})")
              .find("two checks") != std::string::npos);
    auto scaled = parse_rubric(json::parse(R"({"lab":"17","checks":[{"name":"a","kind":"output","args":[],
        "compare":{"fields":[],"scale":{"field":"goodput","zero_at":0.5,"full_at":1}},"points":10}]})"), "r.json");
    CHECK(scaled.checks[0].compare.scale.field == "goodput");
    CHECK(scaled.checks[0].compare.scale.zero_at == 0.5);
    CHECK(fails(R"({"lab":"17","checks":[{"name":"a","kind":"output","args":[],
                  "compare":{"fields":[],"scale":{"field":"goodput","zero_at":1,"full_at":1}},"points":1}]})")
              .find("zero_at < full_at") != std::string::npos);
    CHECK(fails(R"({"lab":"17","checks":[{"name":"a","kind":"output","args":[],
                  "compare":{"fields":[],"scale":{"field":"","zero_at":0,"full_at":1}},"points":1}]})")
              .find("empty") != std::string::npos);
    CHECK(fails(R"({"lab":"17","checks":[{"name":"a","kind":"output","args":[],
                  "compare":{"fields":[],"scale":{"field":"g","zero_at":0,"full_at":1,"cap":2}},"points":1}]})")
              .find("unknown key") != std::string::npos);
}

// A student's program controls its output: a 30,000-character line, a summary
// cut short, or digits without end must not crash the grader (std::regex
// overflowed its stack on such a line) and must not read as a summary.
TEST_CASE("tools.grade.outputs.doctest_summary_on_hostile_text") {
    std::string giant(30000, 'x');
    CHECK_FALSE(parse_doctest_summary(giant).found);
    auto s = parse_doctest_summary(giant + "\n[doctest] test cases: 4 | 4 passed | 0 failed |\n");
    CHECK_MESSAGE(s.found, "a summary after a giant line is still found");
    CHECK(s.passed == 4);
    CHECK_FALSE(parse_doctest_summary("[doctest] test cases: 4 | 4 passed |").found);
    CHECK_FALSE(parse_doctest_summary("[doctest] test cases: " + std::string(30000, '9')).found);
}

TEST_CASE("tools.grade.workdir.json_depth_limit") {
    std::string deep = std::string(10000, '[') + std::string(10000, ']');
    CHECK_THROWS_WITH_AS(parse_json_limited(deep), "JSON nested deeper than 64 levels", std::runtime_error);
    CHECK(parse_json_limited(R"({"a": [[1]]})")["a"][0][0] == 1);
}

// Files a student made are read only when regular and small: a symlink (to
// another student's work, or /etc/shadow) or a FIFO (a read that never ends)
// is refused with a reason.
TEST_CASE("tools.grade.workdir.read_untrusted") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("grade_unit_" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "small") << "hello";
    fs::create_symlink(dir / "small", dir / "link");
    REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
    std::string why;
    CHECK(read_untrusted(dir / "small", 100, why) == std::optional<std::string>("hello"));
    CHECK_FALSE(read_untrusted(dir / "small", 3, why));
    CHECK_MESSAGE(why.find("over the 3 bytes") != std::string::npos, why);
    CHECK_FALSE(read_untrusted(dir / "link", 100, why));
    CHECK_MESSAGE(why.find("symlink") != std::string::npos, why);
    CHECK_FALSE(read_untrusted(dir / "fifo", 100, why));
    CHECK_MESSAGE(why.find("not a regular file") != std::string::npos, why);
    fs::remove_all(dir);
}

// may_not_use: a forbidden engine function is matched by its demangled name,
// with or without its argument list, never by a longer name that starts alike.
TEST_CASE("tools.grade.rubric.may_not_use") {
    auto r = parse_rubric(json::parse(R"({"lab":"03","seed":"prose","checks":[
        {"name":"a","kind":"test","test_case":"x","points":10}],
        "may_not_use":[{"symbol":"pd::argmax","points":5,"why":"sampling is the exercise"}]})"),
                          "rubric.json");
    REQUIRE(r.may_not_use.size() == 1);
    CHECK(r.may_not_use[0].points == 5);
    CHECK(r.may_not_use[0].why == "sampling is the exercise");
    CHECK(symbol_matches("pd::argmax(float const*, int)", "pd::argmax"));
    CHECK(symbol_matches("pd::argmax", "pd::argmax"));
    CHECK_FALSE(symbol_matches("pd::argmax_rows(float const*, int, int)", "pd::argmax"));
    CHECK_FALSE(symbol_matches("std::vector<int>::push_back(int&&)", "pd::argmax"));
    // A kernel Highway compiled for each SIMD target, in a namespace of its own (issue 34).
    CHECK(symbol_matches("pd::N_AVX3::RmsNormRow(float*, float const*, float const*, int, float)",
                         "pd::N_*::RmsNormRow"));
    CHECK(symbol_matches("pd::N_SCALAR::RmsNormRow", "pd::N_*::RmsNormRow"));
    CHECK_FALSE(symbol_matches("pd::N_AVX3::LayerNormRow(float*, float const*, float const*, float const*, int, "
                               "float)", "pd::N_*::RmsNormRow"));
    CHECK_FALSE(symbol_matches("pd::N_AVX3::detail::RmsNormRow(float*)", "pd::N_*::RmsNormRow"));
    CHECK_FALSE(symbol_matches("pd::N_AVX3::RmsNormRowTail(float*)", "pd::N_*::RmsNormRow"));
    CHECK_THROWS_WITH_AS(parse_rubric(json::parse(R"({"lab":"03","checks":[{"name":"a","kind":"test",
        "test_case":"x","points":1}],"may_not_use":[{"points":5}]})"), "rubric.json"),
                         doctest::Contains("symbol"), RubricError);
}

// Every undefined symbol is a call, a weak one too: a student's [[gnu::weak]]
// declaration of pd::rmsnorm links to the engine's and calls it (issue 34:
// "w pd::rmsnorm(...)" was read as ":rmsnorm(...)" and matched nothing).
TEST_CASE("tools.grade.forbidden.nm_lines") {
    const Symbols s = parse_nm("                 U pd::argmax(float const*, int)\n"
                               "                 w pd::rmsnorm(float*, float const*, float const*, int, int, float)\n"
                               "                 v pd::weak_object\n"
                               "0000000000000000 W pd::test::randn(int)\n"
                               "0000000000000010 T pd::lab15::rms_norm(float*)\n");
    CHECK(s.called == std::vector<std::string>{"pd::argmax(float const*, int)",
                                               "pd::rmsnorm(float*, float const*, float const*, int, int, float)",
                                               "pd::weak_object"});
    CHECK(s.present.size() == 5);
    CHECK(s.present[3] == "pd::test::randn(int)");
    CHECK(s.present[4] == "pd::lab15::rms_norm(float*)");
}

// A header's inline function leaves no symbol in an optimised object; the
// unoptimised compile keeps the call, even in code that asks whether it is
// optimised (issue 36: lab 03's pd::kv_head_for scored 100).
TEST_CASE("tools.grade.forbidden.unoptimized_compile") {
    const std::vector<std::string> ninja_cc = {"ccache", "c++", "-std=c++20", "-O3", "-MD", "-MQ", "opt.o", "-MF",
                                               "opt.o.d", "-o", "opt.o", "-c", "student.cpp"};
    const std::vector<std::string> cc = unoptimized_command(ninja_cc, "unopt.o");
    CHECK(cc == std::vector<std::string>{"c++", "-std=c++20", "-O0", "-fno-inline", "-D__OPTIMIZE__=1",
                                         "-U__NO_INLINE__", "-o", "unopt.o", "-c", "student.cpp"});
    CHECK(unoptimized_command({"c++", "-O2", "-o", "x.o", "x.cpp"}, "u.o").empty());  // links, no -c

    const fs::path dir = fs::temp_directory_path() / ("grade-unit-inline." + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "student.cpp") << "namespace pd { inline int kv_head_for(int h, int n, int k) { return h / (n / k); } }\n"
                                          "#if defined(__OPTIMIZE__) && !defined(__NO_INLINE__)\n"
                                          "int head(int h) { return pd::kv_head_for(h, 8, 2); }\n"
                                          "#else\n"
                                          "int head(int h) { return h / 4; }\n"
                                          "#endif\n";
    auto symbols = [&](const std::vector<std::string>& argv, const std::string& object) {
        RunSpec compile;
        compile.argv = argv;
        compile.cwd = dir.string();
        compile.timeout_s = 60;
        REQUIRE(run_process(compile).ok());
        RunSpec nm;
        nm.argv = {"nm", "-C", (dir / object).string()};
        return run_process(nm).output;
    };
    const std::vector<std::string> optimised(ninja_cc.begin() + 1, ninja_cc.end());
    CHECK(symbols(optimised, "opt.o").find("pd::kv_head_for") == std::string::npos);
    CHECK(symbols(cc, "unopt.o").find("pd::kv_head_for(int, int, int)") != std::string::npos);
    fs::remove_all(dir);
}

// Observations (labs/common/observe.hpp writes them): a student's file must name
// the reference's test cases in order, each passed, with the same observations
// and values within the reference's tolerance; anything else is one line why.
TEST_CASE("tools.grade.observations.compare") {
    const std::string ref =
        R"({"case":"lab03.bytes.formula","passed":true,"obs":[{"what":"bytes","atol":0,"rtol":0,"v":[64,128]}]})"
        "\n"
        R"({"case":"lab03.attention.one","passed":true,"obs":[{"what":"out","atol":1e-5,"rtol":1e-4,"v":[1.0,-2.0]}]})"
        "\n";
    auto want = parse_observations(ref);
    REQUIRE(want.size() == 2);
    CHECK_MESSAGE(!compare_observations(want, want), "the reference against itself must match");

    auto close = parse_observations(replace_all(ref, "[1.0,-2.0]", "[1.00005,-2.0001]"));
    CHECK_MESSAGE(!compare_observations(close, want), "within atol + rtol * |ref| must match");

    auto far = compare_observations(parse_observations(replace_all(ref, "[1.0,-2.0]", "[1.1,-2.0]")), want);
    REQUIRE(far);
    CHECK(far->wrong_values);
    CHECK_MESSAGE(far->reason.find("lab03.attention.one: out[0]: got 1.1") != std::string::npos, far->reason);

    auto off_by_one = compare_observations(parse_observations(replace_all(ref, "[64,128]", "[64,129]")), want);
    REQUIRE_MESSAGE(off_by_one, "integers are compared exactly");
    CHECK(off_by_one->wrong_values);

    auto missing = compare_observations({want[0]}, want);
    REQUIRE(missing);
    CHECK_FALSE(missing->wrong_values);
    CHECK_MESSAGE(missing->reason.find("lab03.attention.one recorded no observations") != std::string::npos,
                  missing->reason);

    auto extra = want;
    extra.push_back(want[1]);
    REQUIRE(compare_observations(extra, want));

    auto failed = parse_observations(replace_all(ref, "\"passed\":true,\"obs\":[{\"what\":\"out\"",
                                                 "\"passed\":false,\"obs\":[{\"what\":\"out\""));
    auto failed_case = compare_observations(failed, want);
    REQUIRE_MESSAGE(failed_case, "a test case doctest failed does not pass, whatever the summary says");
    CHECK(failed_case->reason == "lab03.attention.one: the test case failed");

    auto empty = want;
    empty[0].obs.clear();
    REQUIRE_MESSAGE(compare_observations(empty, want), "a forger's test case without its values must fail");
}

TEST_CASE("tools.grade.observations.garbled") {
    CHECK_THROWS_WITH(parse_observations("{\"case\":1}\n"), "line 1: no string \"case\"");
    CHECK_THROWS_WITH(parse_observations("not json\n"), doctest::Contains("line 1"));
    CHECK_THROWS_WITH(parse_observations(R"({"case":"a","passed":true,"obs":[{"what":"x","atol":0,"rtol":0}]})"),
                      doctest::Contains("without a value"));
    CHECK(parse_observations("").empty());
    // Deep nesting from a student's program is refused, not recursed into.
    std::string deep = R"({"case":"a","passed":true,"obs":[{"what":"x","atol":0,"rtol":0,"v":)" +
                       std::string(1000, '[') + std::string(1000, ']') + "}]}";
    CHECK_THROWS(parse_observations(deep));
}
