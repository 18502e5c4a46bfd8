#include "context.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "outputs.hpp"
#include "workdir.hpp"

namespace pd::grade {

std::string in_kit(const Context& c, const fs::path& built) {
    return (fs::path("build") / built.lexically_relative(c.work_build)).string();
}

std::string tidy(const Context& c, const std::string& text) {
    std::string t = replace_all(text, c.work_src.string() + "/", "");
    t = replace_all(t, c.work_build.string() + "/", "build/");
    return replace_all(t, "../src/", "");
}

std::string shell_quote(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") ==
                          std::string::npos)
        return s;
    return fmt::format("'{}'", replace_all(s, "'", "'\\''"));
}

void say(const std::string& line) { std::fprintf(stderr, "pdlab-grade: %s\n", line.c_str()); }

fs::path fresh_scratch(const Context& c, const std::string& name) {
    fs::path p = c.work_runs / name;
    std::error_code ec;
    fs::remove_all(p, ec);
    fs::create_directories(p);
    hand_to_sandbox(c, p);
    return p;
}

std::optional<unsigned> sandbox_uid(const Context& c) {
    if (!c.opt.sandbox || geteuid() != 0) return std::nullopt;
    return c.opt.sandbox_uid;
}

std::size_t sandbox_processes(const Context& c, bool build) {
    if (!sandbox_uid(c)) return kSandboxProcesses;
    // A build runs ninja, bwrap and per job a compiler driver, cc1plus and as.
    return kSandboxUidProcesses + (build ? 4 * std::size_t(c.opt.jobs) : std::size_t(c.opt.threads));
}

void hand_to_sandbox(const Context& c, const fs::path& dir) {
    auto uid = sandbox_uid(c);
    if (!uid) return;
    auto own = [&](const fs::path& p) {
        if (lchown(p.c_str(), uid_t(*uid), gid_t(*uid)) != 0)
            throw std::runtime_error(fmt::format("cannot give {} to the sandbox uid {}: {}", p.string(), *uid,
                                                 std::strerror(errno)));
    };
    own(dir);
    for (const auto& e : fs::recursive_directory_iterator(dir)) own(e.path());
}

void check_sandbox_reaches(const Context& c, const fs::path& dir) {
    auto uid = sandbox_uid(c);
    if (!uid) return;
    for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
        struct stat st {};
        if (stat(p.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH) && st.st_uid != uid_t(*uid))
            throw UsageError(fmt::format("the sandbox runs as uid {} (--sandbox-uid), which cannot pass through {} "
                                         "(mode {:o}): pick a --work folder others may enter, e.g. under /var/tmp",
                                         *uid, p.string(), st.st_mode & 07777));
        if (p == p.parent_path()) break;
    }
}

}  // namespace pd::grade
