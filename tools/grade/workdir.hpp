// The grader's private copy of the kit: WORK/pristine (the kit's files without
// solutions/, as they were when the run started), WORK/src (the same, with one
// student's exercise files in the lab folder), WORK/build (one meson build of
// WORK/src configured with -Dexercises=starter, shared by every student of the
// run, so the engine is compiled once) and WORK/runs (scratch folders).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pd::grade {

namespace fs = std::filesystem;

struct KitError : std::runtime_error {  // the kit itself is broken: exit 1
    using std::runtime_error::runtime_error;
};
struct UsageError : std::runtime_error {  // the command line or the input is wrong: exit 2
    using std::runtime_error::runtime_error;
};

std::string read_file(const fs::path& p);
// For files a student or a student's program made: nullopt (and `why` says
// so) when `p` is a symlink, not a regular file (a FIFO would hang a plain
// open) or larger than `max_bytes`. Never throws for the student's doing.
std::optional<std::string> read_untrusted(const fs::path& p, std::size_t max_bytes, std::string& why);
// A JSON parse that refuses nesting deeper than `max_depth` (deep arrays
// would otherwise exhaust the stack when dumped or destroyed): throws
// std::runtime_error with a short message.
nlohmann::json parse_json_limited(const std::string& text, int max_depth = 64);
// Writes only when the content differs, so ninja rebuilds only what changed.
bool write_if_changed(const fs::path& p, const std::string& content);

// The kit's files, relative to it: what git tracks plus what it does not ignore
// (git ls-files --cached --others --exclude-standard), or, outside git, every
// file but .git, build*, __pycache__. Never solutions/, never anything under
// the `exclude` folders (absolute paths).
std::vector<std::string> kit_files(const fs::path& kit, const std::vector<fs::path>& exclude);

// Makes `dst` hold exactly `files` from `kit` (copying only what differs and
// removing what is not in the list), except the paths in `keep` (relative).
void sync_tree(const fs::path& kit, const std::vector<std::string>& files, const fs::path& dst,
               const std::set<std::string>& keep);

// Holds an exclusive lock on WORK/.lock for its lifetime; a second grading run
// on the same work folder is refused.
class WorkLock {
public:
    explicit WorkLock(const fs::path& work);
    ~WorkLock();
    WorkLock(const WorkLock&) = delete;
    WorkLock& operator=(const WorkLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace pd::grade
