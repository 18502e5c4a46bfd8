#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

extern char** environ;

namespace pd::grade {

namespace {

using Clock = std::chrono::steady_clock;

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

RunResult run_process(const RunSpec& spec) {
    RunResult res;
    if (spec.argv.empty()) {
        res.error = "no program given";
        return res;
    }

    // Everything the child needs is built before fork(): after it, the child only
    // makes system calls.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        std::string_view kv(*e);
        auto eq = kv.find('=');
        std::string key(kv.substr(0, eq));
        if (!spec.env.count(key)) env_strings.emplace_back(kv);
    }
    for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_strings = spec.argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

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
    if (pid == 0) {
        // The child: its own process group, so a time-limit kill takes its children too.
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        const char* step = "chdir";
        if (spec.cwd.empty() || chdir(spec.cwd.c_str()) == 0) {
            rlimit core{0, 0};
            setrlimit(RLIMIT_CORE, &core);
            if (spec.mem_bytes) {
                rlimit as{spec.mem_bytes, spec.mem_bytes};
                setrlimit(RLIMIT_AS, &as);
            }
            if (spec.file_bytes) {
                rlimit fs{spec.file_bytes, spec.file_bytes};
                setrlimit(RLIMIT_FSIZE, &fs);
            }
            execvpe(argv[0], argv.data(), envp.data());
            step = "exec";
        }
        int e = errno;
        char msg[256];
        int n = std::snprintf(msg, sizeof msg, "%s: %s", step, std::strerror(e));
        if (write(errp[1], msg, std::size_t(n)) < 0) {}
        _exit(127);
    }
    setpgid(pid, pid);  // also here: no race with the child's own call
    g_child_group = pid;
    close(out[1]);
    close(errp[1]);

    // The error pipe closes at exec (O_CLOEXEC) or carries why exec failed.
    {
        char msg[256];
        ssize_t n;
        while ((n = read(errp[0], msg, sizeof msg)) < 0 && errno == EINTR) {}
        close(errp[0]);
        if (n > 0) {
            int status;
            waitpid(pid, &status, 0);
            g_child_group = 0;
            close(out[0]);
            res.error = fmt::format("{} ({})", std::string(msg, std::size_t(n)), spec.argv[0]);
            return res;
        }
    }
    res.started = true;

    OutputKeeper keep(spec.keep_bytes);
    bool eof = false, exited = false;
    int status = 0;
    Clock::time_point exited_at{};
    char buf[65536];
    for (;;) {
        if (!exited) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) exited = true, exited_at = Clock::now();
        }
        if (exited && eof) break;
        if (exited && since(exited_at) > 1.0) {
            // It exited, but something it started still holds the output open.
            kill(-pid, SIGKILL);
            break;
        }
        if (!exited && spec.timeout_s > 0 && since(start) >= spec.timeout_s) {
            res.timed_out = true;
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            exited = true;
            // Collect what it wrote before the kill.
            while (!eof) {
                pollfd p{out[0], POLLIN, 0};
                if (poll(&p, 1, 200) <= 0) break;
                ssize_t n = read(out[0], buf, sizeof buf);
                if (n <= 0) break;
                keep.add(std::string_view(buf, std::size_t(n)));
            }
            break;
        }
        int wait_ms = 50;
        if (!exited && spec.timeout_s > 0) {
            double left = spec.timeout_s - since(start);
            wait_ms = std::max(1, std::min(wait_ms, int(left * 1000) + 1));
        }
        if (eof) {
            usleep(useconds_t(wait_ms) * 1000);
            continue;
        }
        pollfd p{out[0], POLLIN, 0};
        int pr = poll(&p, 1, wait_ms);
        if (pr > 0) {
            ssize_t n = read(out[0], buf, sizeof buf);
            if (n > 0)
                keep.add(std::string_view(buf, std::size_t(n)));
            else if (n == 0 || errno != EINTR)
                eof = true;
        }
    }
    close(out[0]);
    g_child_group = 0;
    res.seconds = since(start);
    res.output = keep.text();
    res.output_bytes = keep.total;
    if (!res.timed_out) {
        if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
    }
    return res;
}

}  // namespace pd::grade
