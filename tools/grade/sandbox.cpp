#include "sandbox.hpp"

#include <fmt/format.h>

#include "process.hpp"

namespace pd::grade {

namespace {

// The system, read-only: /usr holds the compilers, meson, ninja and every
// library the kit links; /etc the loader's cache. On merged-/usr systems
// /bin, /lib... are symlinks into /usr and are made as such.
void add_system(std::vector<std::string>& a) {
    a.insert(a.end(), {"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"});
    for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64"}) {
        std::error_code ec;
        auto st = fs::symlink_status(top, ec);
        if (fs::is_symlink(st)) a.insert(a.end(), {"--symlink", fs::read_symlink(top, ec).string(), top});
        else if (fs::is_directory(st)) a.insert(a.end(), {"--ro-bind", top, top});
    }
}

}  // namespace

std::vector<std::string> sandboxed_argv(const SandboxSpec& box, const std::map<std::string, std::string>& env,
                                        const std::vector<std::string>& argv) {
    std::vector<std::string> a = {"bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                                  "--uid", "1000", "--gid", "1000", "--clearenv",
                                  "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/tmp"};
    add_system(a);
    a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"});
    for (const auto& p : box.read_only) a.insert(a.end(), {"--ro-bind", p.string(), p.string()});
    for (const auto& p : box.writable) a.insert(a.end(), {"--bind", p.string(), p.string()});
    for (const auto& [k, v] : env) a.insert(a.end(), {"--setenv", k, v});
    if (!box.cwd.empty()) a.insert(a.end(), {"--chdir", box.cwd.string()});
    a.push_back("--");
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
}

std::optional<std::string> sandbox_unavailable(std::optional<unsigned> run_as) {
    RunSpec probe;
    probe.run_as = run_as;
    probe.argv = sandboxed_argv({}, {}, {"/bin/true"});
    probe.timeout_s = 30;
    RunResult r = run_process(probe);
    if (r.ok()) return std::nullopt;
    if (!r.started) return "bubblewrap (bwrap) is not installed (Debian: apt install bubblewrap)";
    return fmt::format("bwrap cannot make a sandbox here{} ({}): {}",
                       run_as ? fmt::format(" as uid {} (--sandbox-uid)", *run_as) : "", r.describe(),
                       r.output.substr(0, 500));
}

}  // namespace pd::grade
