// Finding the lab to grade in the kit (labs/<track>/<NN-name>), its reference
// solution (solutions/<track>/<NN-name>) and its rubric. Every mistake here is
// the instructor's command line or a missing file: UsageError (exit 2).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rubric.hpp"

namespace pd::grade {

namespace fs = std::filesystem;

struct Lab {
    std::string track, folder, number;  // "track1", "03-cache-and-gqa", "03"
    fs::path rel;                       // labs/track1/03-cache-and-gqa
    fs::path solution_dir;              // KIT/solutions/track1/03-cache-and-gqa
    std::vector<std::string> sources;   // what students hand in: exercise.cpp (+ other .cpp)
};

// "03", "3", "03-cache-and-gqa", "track1/03", "track1-03" -> the lab, with its
// solution's sources.
Lab find_lab(const fs::path& kit, const std::string& arg);

// The lab's solutions/.../rubric.json, which must name this lab.
Rubric load_lab_rubric(const Lab& lab);

// A C or C++ source file name (.cpp, .cc, .cxx, .c).
bool is_source_name(const std::string& name);

}  // namespace pd::grade
