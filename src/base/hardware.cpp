#include "base/hardware.hpp"

#include <omp.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace pd {

static std::string cpuinfo_field(const std::string& key) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    return "";
}

std::string cpu_model() {
    std::string m = cpuinfo_field("model name");
    return m.empty() ? "unknown CPU" : m;
}

int cpu_cores() { return int(sysconf(_SC_NPROCESSORS_ONLN)); }

double memory_gib() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    long kb = 0;
    while (in >> key >> kb) {
        if (key == "MemTotal:") return double(kb) / (1024.0 * 1024.0);
        in.ignore(1 << 10, '\n');
    }
    return 0.0;
}

std::string cpu_summary() {
    return fmt::format("{}, {} cores, {:.1f} GiB, {} OpenMP threads", cpu_model(), cpu_cores(),
                       memory_gib(), omp_get_max_threads());
}

std::string compiler_version() {
#if defined(__clang__)
    return fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    return fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    return "unknown compiler";
#endif
}

std::string onednn_version() {
    const dnnl_version_t* v = dnnl_version();
    return fmt::format("oneDNN {}.{}.{} (OpenMP runtime)", v->major, v->minor, v->patch);
}

std::string openmp_version() { return fmt::format("OpenMP {}", _OPENMP); }

}  // namespace pd
