// Drawing a lab's plots: every lab with a plot.py runs it the same way, with the
// same messages when it cannot, so a student always gets the exact command to run.
#pragma once

#include <filesystem>
#include <string>

namespace pd::lab {

// Runs `/usr/bin/python3 <source root>/<lab_dir>/plot.py <out>` (plot.py's own
// output goes to stderr, so stdout stays the lab's report), then prints one
// "plots:" paragraph: what was drawn where, or why nothing was (--no-plot, no
// python3, no plot.py, plot.py failed: matplotlib missing?) and the exact command.
//   lab_dir : the lab's folder under the source root, e.g. "labs/track3/10-roofline"
//   out     : the folder holding the lab's CSV files; plot.py draws next to them
//   skip    : --no-plot was given: print the command, run nothing
//   drawn   : what a good run leaves in out, e.g. "roofline.png and .svg"
// Never fails the lab: a missing plot is not a wrong answer.
void draw_plot(const std::string& lab_dir, const std::filesystem::path& out, bool skip,
               const std::string& drawn);

}  // namespace pd::lab
