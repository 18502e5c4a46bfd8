#include "process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

extern char** environ;

namespace pd::grade {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

volatile sig_atomic_t g_child_group = 0;  // the process group being waited for, or 0

void on_interrupt(int sig) {
    if (g_child_group > 0) kill(-g_child_group, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Keeps the first and the last `keep / 2` bytes of a stream, counting the rest.
struct OutputKeeper {
    std::size_t half;
    std::string head, tail;
    std::size_t total = 0;

    explicit OutputKeeper(std::size_t keep) : half(keep / 2 ? keep / 2 : 1) {}

    void add(std::string_view s) {
        total += s.size();
        if (head.size() < half) {
            std::size_t n = std::min(half - head.size(), s.size());
            head.append(s.substr(0, n));
            s.remove_prefix(n);
        }
        if (s.empty()) return;
        tail.append(s);
        if (tail.size() > 2 * half) tail.erase(0, tail.size() - half);
    }

    std::string text() const {
        std::size_t kept_tail = std::min(tail.size(), half);
        std::size_t skipped = total - head.size() - kept_tail;
        if (skipped == 0) return head + tail;
        return head + fmt::format("\n[... {} bytes of output left out ...]\n", skipped) +
               tail.substr(tail.size() - kept_tail);
    }
};

std::string fmt_seconds(double s) {
    return s == double(long(s)) ? fmt::format("{}", long(s)) : fmt::format("{:.1f}", s);
}

}  // namespace

void install_interrupt_handlers() {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, on_interrupt);
}

std::string signal_name(int sig) {
    const char* abbrev = sigabbrev_np(sig);
    const char* desc = strsignal(sig);
    if (abbrev) return fmt::format("SIG{}, {}", abbrev, desc ? desc : "");
    return fmt::format("signal {}", sig);
}

std::string RunResult::describe() const {
    if (!started) return "could not start: " + error;
    if (timed_out) return fmt::format("timed out after {} s and was killed", fmt_seconds(seconds));
    if (signal) return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
    return fmt::format("exit status {}", exit_code);
}

namespace {

// Everything the child needs, built before fork(): after it, the child only
// makes system calls.
struct ChildPlan {
    std::vector<std::string> env_strings, argv_strings;
    std::vector<char*> envp, argv;
    std::string cwd;
    std::vector<std::pair<int, rlim_t>> limits;  // resource, value (soft = hard)
    std::optional<unsigned> run_as;              // uid = gid to drop to
};

// Processes of `uid` now: RLIMIT_NPROC counts all of them, so a sandbox's
// budget is added on top.
std::size_t processes_of(uid_t uid) {
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename().string();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
        struct stat st {};
        if (stat(e.path().c_str(), &st) == 0 && st.st_uid == uid) n++;
    }
    return n;
}

ChildPlan plan_child(const RunSpec& spec) {
    ChildPlan p;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        if (!spec.env.count(std::string(kv.substr(0, kv.find('='))))) p.env_strings.emplace_back(kv);
    }
    for (const auto& [k, v] : spec.env) p.env_strings.push_back(k + "=" + v);
    p.argv_strings = spec.sandbox ? sandboxed_argv(*spec.sandbox, spec.env, spec.argv) : spec.argv;
    for (auto& s : p.env_strings) p.envp.push_back(s.data());
    p.envp.push_back(nullptr);
    for (auto& s : p.argv_strings) p.argv.push_back(s.data());
    p.argv.push_back(nullptr);
    p.cwd = spec.sandbox ? "" : spec.cwd;  // in the sandbox, bwrap --chdir
    p.limits.emplace_back(RLIMIT_CORE, 0);
    if (spec.mem_bytes) p.limits.emplace_back(RLIMIT_AS, spec.mem_bytes);
    if (spec.file_bytes) p.limits.emplace_back(RLIMIT_FSIZE, spec.file_bytes);
    if (spec.cpu_s > 0) p.limits.emplace_back(RLIMIT_CPU, rlim_t(spec.cpu_s + 1));
    p.run_as = spec.run_as;
    if (spec.extra_procs)
        p.limits.emplace_back(RLIMIT_NPROC, processes_of(spec.run_as ? *spec.run_as : getuid()) + spec.extra_procs);
    return p;
}

// Groups first (they need root), then the gid, then the uid: after setuid
// there is no way back.
bool drop_to(unsigned id) {
    return setgroups(0, nullptr) == 0 && setgid(gid_t(id)) == 0 && setuid(uid_t(id)) == 0;
}

// The child: its own process group (a time-limit kill takes its children
// too), stdin /dev/null, stdout and stderr into `out`; on failure, why on `err`.
[[noreturn]] void exec_child(const ChildPlan& p, int out, int err) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out, 1);
    dup2(out, 2);
    const char* step = "chdir";
    if (p.cwd.empty() || chdir(p.cwd.c_str()) == 0) {
        for (auto [resource, value] : p.limits) {
            rlimit l{value, value};
            setrlimit(resource, &l);
        }
        step = "setuid";
        if (!p.run_as || drop_to(*p.run_as)) {
            execvpe(p.argv[0], p.argv.data(), p.envp.data());
            step = "exec";
        }
    }
    int e = errno;
    char msg[256];
    int n = std::snprintf(msg, sizeof msg, "%s: %s", step, std::strerror(e));
    if (write(err, msg, std::size_t(n)) < 0) {}
    _exit(127);
}

// The error pipe closes at exec (O_CLOEXEC) or carries why exec failed.
bool exec_succeeded(pid_t pid, int err, RunResult& res, const std::string& program) {
    char msg[256];
    ssize_t n;
    while ((n = read(err, msg, sizeof msg)) < 0 && errno == EINTR) {}
    close(err);
    if (n <= 0) return true;
    int status;
    waitpid(pid, &status, 0);
    g_child_group = 0;
    res.error = fmt::format("{} ({})", std::string(msg, std::size_t(n)), program);
    return false;
}

// What it wrote before the time-limit kill.
void drain(int fd, OutputKeeper& keep) {
    char buf[65536];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) return;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        keep.add(std::string_view(buf, std::size_t(n)));
    }
}

// Reads `fd` until the child exited and the output closed, or the time ran
// out (then the group is killed); returns the wait status.
int collect(pid_t pid, int fd, double timeout_s, Clock::time_point start, OutputKeeper& keep, bool& timed_out) {
    bool eof = false, exited = false;
    int status = 0;
    Clock::time_point exited_at{};
    char buf[65536];
    for (;;) {
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true, exited_at = Clock::now();
        if (exited && eof) return status;
        if (exited && since(exited_at) > 1.0) {
            kill(-pid, SIGKILL);  // it exited, but something it started still holds the output open
            return status;
        }
        if (!exited && timeout_s > 0 && since(start) >= timeout_s) {
            timed_out = true;
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            drain(fd, keep);
            return status;
        }
        int wait_ms = 50;
        if (!exited && timeout_s > 0)
            wait_ms = std::max(1, std::min(wait_ms, int((timeout_s - since(start)) * 1000) + 1));
        if (eof) {
            usleep(useconds_t(wait_ms) * 1000);
            continue;
        }
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, wait_ms) <= 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) keep.add(std::string_view(buf, std::size_t(n)));
        else if (n == 0 || errno != EINTR) eof = true;
    }
}

}  // namespace

RunResult run_process(const RunSpec& spec) {
    RunResult res;
    if (spec.argv.empty()) {
        res.error = "no program given";
        return res;
    }
    ChildPlan plan = plan_child(spec);
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        res.error = fmt::format("pipe: {}", std::strerror(errno));
        return res;
    }
    const auto start = Clock::now();
    pid_t pid = fork();
    if (pid < 0) {
        res.error = fmt::format("fork: {}", std::strerror(errno));
        close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
        return res;
    }
    if (pid == 0) exec_child(plan, out[1], errp[1]);
    setpgid(pid, pid);  // also here: no race with the child's own call
    g_child_group = pid;
    close(out[1]);
    close(errp[1]);
    if (!exec_succeeded(pid, errp[0], res, spec.argv[0])) {
        close(out[0]);
        return res;
    }
    res.started = true;
    OutputKeeper keep(spec.keep_bytes);
    int status = collect(pid, out[0], spec.timeout_s, start, keep, res.timed_out);
    close(out[0]);
    g_child_group = 0;
    res.seconds = since(start);
    res.output = keep.text();
    res.output_bytes = keep.total;
    if (!res.timed_out) {
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
    }
    // bwrap exits with 128 + N when the program died of signal N (as a shell
    // does): read it as that signal, so a crash reads as a crash.
    if (spec.sandbox && res.exit_code > 128 && res.exit_code < 128 + 32) {
        res.signal = res.exit_code - 128;
        res.exit_code = -1;
    }
    return res;
}

}  // namespace pd::grade
