#include "engine/host_memory.hpp"

#include <unistd.h>

#include <fstream>

#include "common.hpp"

namespace pd {

namespace {

// "MemAvailable:   12345678 kB" -> bytes; 0 where /proc/meminfo has no such line.
std::size_t meminfo_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    while (in >> key) {
        if (key == "MemAvailable:" && in >> kib) return kib * 1024;
        in.ignore(1 << 12, '\n');
    }
    return 0;
}

}  // namespace

std::size_t available_host_memory() {
    if (std::size_t b = meminfo_available()) return b;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t(-1);
}

void check_fits_in_memory(std::size_t bytes, const std::string& what, const std::string& how_to_lower) {
    const std::size_t avail = available_host_memory();
    if (bytes <= avail) return;
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    fail("{} needs {:.2f} GiB ({} bytes) but this machine has {:.2f} GiB of memory available: {}",
         what, double(bytes) / GiB, bytes, double(avail) / GiB, how_to_lower);
}

}  // namespace pd
