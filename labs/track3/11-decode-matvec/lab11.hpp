// Lab 11's program, in two files: main.cpp checks and times your matvec
// versions ([1], [2]) and runs the lab; decode.cpp plugs one into a real
// decode ([3]). This header holds what both read.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli_common.hpp"
#include "exercise.hpp"

namespace pd::lab11 {

using Matvec = void (*)(const float*, const float*, float*, int, int);

struct Version {
    const char* name;
    Matvec f;
};
inline const Version kVersions[] = {{"naive", matvec_naive}, {"unrolled", matvec_unrolled},
                                    {"threads", matvec_threads}, {"simd", matvec_simd}};

// The command line (main() declares each option and its help).
struct Options {
    cli::CommonOptions lab;
    std::string shapes = "synthetic:bench-llama-125m";
    std::string kernel = "fastest";
    int repeats = 5;
    int steps = 24;
    bool skip_naive = false;
};

// The version --kernel names; `fastest`: the version [2] timed fastest.
Matvec pick_kernel(const std::string& name, const std::string& fastest = "simd");

// Refuses (exit 2) a model [3]'s decode step would get wrong: only f32 models
// of Llama's skeleton without biases.
void check_decodable(const Options& o, const Model& m);

// [3] a greedy decode of `m` with your --kernel doing every product, against
// the engine's; `same` tells whether the tokens agree.
nlohmann::json plugged_decode(const Options& o, const Model& m, const std::string& fastest, bool& same);

}  // namespace pd::lab11
