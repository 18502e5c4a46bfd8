// A class's submissions: SUBMISSIONS holds one folder per student. In each, the
// lab's exercise sources are found (at the top or in one subfolder) and what
// the grader will ignore or cannot judge is noted for the report.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lab.hpp"

namespace pd::grade {

namespace fs = std::filesystem;

struct Submission {
    std::string name;
    fs::path dir;
    std::map<std::string, fs::path> sources;  // file name -> the student's file
    std::vector<std::string> notes;           // shown in the report
    std::string problem;                      // set: nothing to build (status)
    std::string problem_detail;
    int outside_includes = 0;                 // #include lines that leave the lab folder
};

// The largest exercise source the grader reads (a bigger one is refused).
inline constexpr std::size_t kMaxSourceBytes = 1 << 20;

struct Students {
    std::vector<std::pair<std::string, fs::path>> folders;  // name -> folder, sorted by name
    std::vector<std::string> stray;                         // files beside the folders: skipped
};

// The student folders of `submissions`; only those named in `only` when it is
// not empty (in its order). Throws UsageError when there are none or one of
// `only` is missing.
Students list_students(const fs::path& submissions, const std::vector<std::string>& only, const Lab& lab);

// What one student handed in for `lab`.
Submission locate(const std::string& name, const fs::path& dir, const Lab& lab, const fs::path& kit);

}  // namespace pd::grade
