// What the numbers were measured on: for reports and benchmark tables.
#pragma once

#include <string>

namespace pd {

std::string cpu_model();        // from /proc/cpuinfo, e.g. "AMD EPYC"
int cpu_cores();                // online logical CPUs
double memory_gib();            // MemTotal
std::string cpu_summary();      // "AMD EPYC, 2 cores, 23.4 GiB, 2 OpenMP threads"
std::string compiler_version(); // "GCC 12.2.0"
std::string onednn_version();   // "oneDNN 2.6.3 (OpenMP runtime)"
std::string openmp_version();   // "OpenMP 4.5 (201511)"

}  // namespace pd
