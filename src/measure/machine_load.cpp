#include "measure/machine_load.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace pd {

namespace {

// The file's first bytes as a C string ("" when it cannot be read): no heap,
// no iostreams, since this may run before the C++ runtime has started.
void read_proc_file(const char* path, char* buf, std::size_t size) {
    buf[0] = '\0';
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    const ssize_t n = ::read(fd, buf, size - 1);
    ::close(fd);
    buf[n > 0 ? n : 0] = '\0';
}

// The number after "\n<key> " in /proc/stat's text (0 when absent).
long long stat_field(const char* stat, const char* key) {
    const std::size_t len = std::strlen(key);
    for (const char* line = stat; line && *line; line = std::strchr(line, '\n') ? std::strchr(line, '\n') + 1 : nullptr)
        if (std::strncmp(line, key, len) == 0 && line[len] == ' ') return std::strtoll(line + len, nullptr, 10);
    return 0;
}

}  // namespace

MachineLoad parse_machine_load(const char* loadavg, const char* stat, int cores) {
    MachineLoad m;
    m.cores = std::max(1, cores);
    m.load1 = std::strtod(loadavg, nullptr);
    m.runnable_now = int(stat_field(stat, "procs_running"));
    // "cpu  user nice system idle iowait irq softirq steal ...": the eighth number is steal.
    if (std::strncmp(stat, "cpu ", 4) == 0) {
        const char* p = stat + 4;
        for (int i = 0; i < 8; ++i) {
            char* end = nullptr;
            const long long v = std::strtoll(p, &end, 10);
            if (end == p) break;
            m.total_ticks += v;
            if (i == 7) m.steal_ticks = v;
            p = end;
        }
    }
    return m;
}

MachineLoad read_machine_load() {
    char loadavg[256], stat[8192];
    read_proc_file("/proc/loadavg", loadavg, sizeof loadavg);
    read_proc_file("/proc/stat", stat, sizeof stat);
    return parse_machine_load(loadavg, stat, int(sysconf(_SC_NPROCESSORS_ONLN)));
}

double busy_cores(const MachineLoad& m, int own_runnable) {
    return std::max(0.0, std::min(m.load1, double(m.runnable_now - own_runnable)));
}

OpenmpChoice openmp_choice_for(double busy, int cores) {
    OpenmpChoice c;
    c.threads = std::max(1, int(std::lround(cores - busy)));
    c.passive = busy >= 0.5;
    return c;
}

std::string unreliable_timing_warning(const MachineLoad& start, const MachineLoad& end) {
    // Other work on a core it needs slows every parallel step to the slowest thread's
    // share; below one core's worth it is the usual background of a desktop.
    const double others = busy_cores(start, 1);
    const long long ticks = end.total_ticks - start.total_ticks;
    const double stolen = ticks > 0 ? double(end.steal_ticks - start.steal_ticks) / double(ticks) : 0.0;
    std::string why;
    if (others >= 1.0)
        why = fmt::format("other work kept about {:.1f} of the {} cores busy (load average {:.2f})", others,
                          start.cores, start.load1);
    if (stolen >= 0.05)
        why += fmt::format("{}the hypervisor took {:.0f}% of the CPU time", why.empty() ? "" : "; ", 100 * stolen);
    if (why.empty()) return "";
    return "warning: these timings are unreliable: " + why + ". Rerun on a quieter machine to compare them.";
}

}  // namespace pd
