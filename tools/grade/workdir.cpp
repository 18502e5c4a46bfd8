#include "workdir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "process.hpp"

namespace pd::grade {

namespace {

// At most max_bytes from fd (a file that grows while read stops there).
std::string read_fd(int fd, std::size_t max_bytes) {
    std::string text;
    char buf[65536];
    ssize_t n;
    while (text.size() < max_bytes && (n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            break;
        }
        text.append(buf, std::min(std::size_t(n), max_bytes - text.size()));
    }
    return text;
}

}  // namespace

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw KitError(fmt::format("cannot read {}", p.string()));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::optional<std::string> read_untrusted(const fs::path& p, std::size_t max_bytes, std::string& why) {
    // O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps a FIFO from blocking open().
    int fd = open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        why = fmt::format("{}: {}", p.filename().string(), errno == ELOOP ? "a symlink (refused)" : std::strerror(errno));
        return std::nullopt;
    }
    struct stat st {};
    std::optional<std::string> text;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = fmt::format("{}: not a regular file (refused)", p.filename().string());
    else if (std::size_t(st.st_size) > max_bytes)
        why = fmt::format("{}: {} bytes, over the {} bytes the grader reads", p.filename().string(), st.st_size, max_bytes);
    else
        text = read_fd(fd, max_bytes);
    close(fd);
    return text;
}

nlohmann::json parse_json_limited(const std::string& text, int max_depth) {
    auto depth_guard = [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > max_depth) throw std::runtime_error(fmt::format("JSON nested deeper than {} levels", max_depth));
        return true;
    };
    return nlohmann::json::parse(text, depth_guard);
}

bool write_if_changed(const fs::path& p, const std::string& content) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && fs::file_size(p, ec) == content.size() && read_file(p) == content)
        return false;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) throw KitError(fmt::format("cannot write {}", p.string()));
    return true;
}

namespace {

bool under(const fs::path& p, const fs::path& dir) {
    auto rel = p.lexically_relative(dir);
    return !rel.empty() && *rel.begin() != "..";
}

bool same_file_content(const fs::path& a, const fs::path& b) {
    std::error_code ec;
    if (!fs::is_regular_file(b, ec) || fs::file_size(a, ec) != fs::file_size(b, ec)) return false;
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    char ba[65536], bb[65536];
    while (fa && fb) {
        fa.read(ba, sizeof ba);
        fb.read(bb, sizeof bb);
        if (fa.gcount() != fb.gcount() || !std::equal(ba, ba + fa.gcount(), bb)) return false;
    }
    return fa.eof() && fb.eof();
}

}  // namespace

std::vector<std::string> kit_files(const fs::path& kit, const std::vector<fs::path>& exclude) {
    std::vector<std::string> files;
    RunSpec git;
    git.argv = {"git", "-C", kit.string(), "ls-files", "-z", "--cached", "--others", "--exclude-standard"};
    git.keep_bytes = std::size_t(1) << 40;
    git.timeout_s = 120;
    RunResult r = run_process(git);
    if (r.ok() && !r.output.empty()) {
        std::string cur;
        for (char c : r.output) {
            if (c == '\0') {
                if (!cur.empty()) files.push_back(cur);
                cur.clear();
            } else {
                cur += c;
            }
        }
    } else {
        // Not a git checkout: every file but VCS data and build outputs.
        for (auto it = fs::recursive_directory_iterator(kit); it != fs::recursive_directory_iterator(); ++it) {
            std::string name = it->path().filename().string();
            if (it->is_directory() &&
                (name == ".git" || name.rfind("build", 0) == 0 || name == "__pycache__")) {
                it.disable_recursion_pending();
                continue;
            }
            if (it->is_regular_file() || it->is_symlink())
                files.push_back(it->path().lexically_relative(kit).string());
        }
    }
    std::vector<std::string> kept;
    for (auto& f : files) {
        if (f == "solutions" || f.rfind("solutions/", 0) == 0) continue;
        fs::path abs = kit / f;
        bool skip = false;
        for (const auto& ex : exclude) skip = skip || under(abs, ex);
        std::error_code ec;
        if (skip || !fs::exists(fs::symlink_status(abs, ec))) continue;
        kept.push_back(f);
    }
    std::sort(kept.begin(), kept.end());
    return kept;
}

void sync_tree(const fs::path& kit, const std::vector<std::string>& files, const fs::path& dst,
               const std::set<std::string>& keep) {
    std::set<std::string> wanted(files.begin(), files.end());
    fs::create_directories(dst);
    for (const auto& f : files) {
        if (keep.count(f)) continue;
        fs::path s = kit / f, d = dst / f;
        std::error_code ec;
        auto st = fs::symlink_status(s);
        if (fs::is_symlink(st)) {
            auto target = fs::read_symlink(s);
            if (fs::is_symlink(fs::symlink_status(d, ec)) && fs::read_symlink(d) == target) continue;
            fs::remove_all(d, ec);
            fs::create_directories(d.parent_path());
            fs::create_symlink(target, d);
            continue;
        }
        if (!fs::is_regular_file(st)) continue;
        if (!same_file_content(s, d)) {
            fs::create_directories(d.parent_path());
            if (fs::is_directory(fs::symlink_status(d, ec))) fs::remove_all(d);
            fs::copy_file(s, d, fs::copy_options::overwrite_existing);
        }
        auto perms = st.permissions();
        if (fs::status(d).permissions() != perms) fs::permissions(d, perms);
    }
    // Remove what the kit no longer has (or what a student program left behind).
    std::vector<fs::path> stale;
    for (auto it = fs::recursive_directory_iterator(dst); it != fs::recursive_directory_iterator(); ++it) {
        if (it->is_directory() && !it->is_symlink()) continue;
        std::string rel = it->path().lexically_relative(dst).string();
        if (!wanted.count(rel) && !keep.count(rel)) stale.push_back(it->path());
    }
    for (const auto& p : stale) fs::remove(p);
}

WorkLock::WorkLock(const fs::path& work) {
    fs::create_directories(work);
    fd_ = open((work / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw UsageError(fmt::format("cannot create {}", (work / ".lock").string()));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        close(fd_);
        fd_ = -1;
        throw UsageError(fmt::format(
            "another grading run is using the work folder {}; wait for it, or give another --work", work.string()));
    }
}

WorkLock::~WorkLock() {
    if (fd_ >= 0) close(fd_);
}

}  // namespace pd::grade
