// How much host memory a big allocation may take, asked before making it, so
// that a request too large for the machine is refused with a message (exit 2)
// instead of being killed by the kernel's OOM killer or thrashing swap.
#pragma once

#include <cstddef>
#include <string>

namespace pd {

// Bytes the kernel says can be allocated without swapping: MemAvailable from
// /proc/meminfo, else physical pages x page size (sysconf).
std::size_t available_host_memory();

// Fails with a UserError naming `what`, its size, the memory available and
// `how_to_lower` when `bytes` exceed the available memory.
void check_fits_in_memory(std::size_t bytes, const std::string& what, const std::string& how_to_lower);

}  // namespace pd
