// The rubric's may_not_use list against one student's compiled exercise: the
// undefined symbols of their exercise object (nm -C -u) are what it calls
// outside itself, so a forbidden engine function shows there however the call
// is spelled in the source. A header's inline function (pd::kv_head_for) leaves
// no such symbol once inlined: the exercise is compiled once more without
// optimisation and inlining (unoptimized_command), where every function it
// calls stays a call, and the symbols of that object count too.
#pragma once

#include "checks.hpp"

namespace pd::grade {

// The tests' own code: the checks' references (pd::ref, tests/unit's pd::test),
// the seeded inputs, the observation channel (labs/common) and doctest. An
// exercise object holding any symbol of these, called or compiled in from a
// header, scores 0: it could recompute the tests' inputs or forge what they
// observe (observations.hpp). Matched anywhere in the demangled name.
inline constexpr const char* kTestCodeNamespaces[] = {"pd::test::", "pd::ref::", "pd::lab::Inputs",
                                                      "pd::lab::needs", "pd::lab::env_test_seed",
                                                      "pd::lab::observ", "doctest::"};

struct Symbols {
    std::vector<std::string> called;   // undefined: what the object calls outside itself
    std::vector<std::string> present;  // every symbol, inline code from headers included
};

// `nm -C`'s lines: "0000000000000000 W pd::test::randn(...)" (defined here,
// e.g. inline) and, with no address, the undefined ones: "U pd::argmax(float
// const*, int)", or "w pd::rmsnorm(...)" for a weak reference (a student's
// [[gnu::weak]] declaration links and calls the engine's function as well).
Symbols parse_nm(const std::string& output);

// Takes each forbidden symbol's points off r.total (never below 0), and all of
// them for the tests' own code, with a note per symbol and ", forbidden
// symbol" in the status. Call after the checks.
void apply_may_not_use(const Context& c, StudentResult& r);

// A compile command of compile_commands.json (words split) turned into one that
// writes `object` with nothing inlined: -O0 -fno-inline in place of the
// optimisation level (__OPTIMIZE__ still defined, __NO_INLINE__ not), no
// dependency files, no ccache. Empty when `command` is
// not a compile (no -c or no -o).
std::vector<std::string> unoptimized_command(const std::vector<std::string>& command, const std::string& object);

// unoptimized_command for each of the lab's exercise sources, from WORK/build's
// compile_commands.json; objects in WORK/build/grade-unoptimized/.
std::vector<std::vector<std::string>> unoptimized_compiles(const Context& c);

// True when the demangled `name` is `symbol` or `symbol(...)`; a '*' in
// `symbol` stands for any run of characters within one part of the name, so
// "pd::N_*::RmsNormRow" is the engine's RMSNorm kernel for every SIMD target
// (Highway compiles one per target, in its own namespace, each callable by name).
bool symbol_matches(const std::string& name, const std::string& symbol);

}  // namespace pd::grade
