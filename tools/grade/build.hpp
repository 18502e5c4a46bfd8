// Building the lab in the work folder (workdir.hpp): the kit copied once and
// configured once per run, then for the reference solution and for each
// student in turn WORK/src restored from the snapshot, the exercise sources
// put into the lab folder, and ninja rebuilding only that lab.
#pragma once

#include <map>
#include <string>

#include "checks.hpp"
#include "context.hpp"
#include "process.hpp"
#include "submissions.hpp"

namespace pd::grade {

// Copies the kit into WORK/pristine and WORK/src, configures WORK/build (or
// brings a reused one up to date) and reads from it the lab's test binaries,
// their environment and the lab program. Throws KitError.
void setup_work(Context& c);

// Puts the given exercise sources (file name -> file; the kit's starter for the
// ones not given) into the lab folder of WORK/src and rebuilds the lab's
// program and tests; a student's build (`student`) runs in the sandbox, the
// reference's (trusted, and the first time the whole engine) with ccache.
RunResult build_lab(const Context& c, const std::map<std::string, fs::path>& given, double timeout_s, bool student);

// What a failed meson or ninja run said, or why it could not start.
std::string why_failed(const RunResult& r);

// Builds one student's submission on a fresh copy of the kit and runs every
// check; `index` names its scratch folder.
StudentResult grade_student(const Context& c, const Submission& sub, std::size_t index);

}  // namespace pd::grade
