// --timeline FILE and --timeline-detail: the commands and lab programs that
// record what they run on a timeline (measure/timeline_file.hpp) share them.
#pragma once

#include <memory>
#include <string>

#include "cli_fwd.hpp"
#include "measure/timeline_file.hpp"

namespace pd::cli {

struct TimelineOptions {
    std::string path;              // empty: no timeline
    std::string detail = "layers";
};

// Adds --timeline and --timeline-detail; `tracks` ends --timeline's help
// with what this program puts on it.
void add_timeline(CLI::App* app, TimelineOptions& o, const std::string& tracks);

// Opens --timeline's file (null when not given) before any work: a path that
// cannot be written, or --device cuda (whose engine records no spans yet), is
// refused (UserError). `name` names the run's process in the viewer.
std::unique_ptr<TimelineFile> open_timeline(const TimelineOptions& o, const std::string& device,
                                            const std::string& name);

// Writes the file and says so on stderr (nothing when `file` is null).
void finish_timeline(TimelineFile* file, const std::string& path);

}  // namespace pd::cli
