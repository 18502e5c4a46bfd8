// Lab 14's tests: how much memory a call takes beyond what it was handed.
// The tiled kernel's promise is a scratch of one tile whatever the length; a
// kernel that keeps a row of S scores somewhere else breaks it, wherever it
// puts them:
//   heap   this file replaces the global operator new and delete in the test
//          program (not in the lab program), so every new, std::vector and
//          std::unique_ptr is counted, on any thread;
//   stack  the call runs on a thread whose stack is a buffer of ours, filled
//          with a pattern first: the bytes of it overwritten are the deepest
//          the call went (arrays on the stack and alloca included).
#pragma once

#include <cstddef>
#include <functional>

namespace pd::lab14 {

struct MemoryUse {
    std::size_t heap_peak = 0;  // the most heap bytes live at once during the call, above those before it
    std::size_t stack = 0;      // the deepest the call's stack went, in bytes, above an empty call's
};

// Runs f once on a fresh thread with a painted stack of `stack_bytes`. An
// exception f throws is rethrown here, after the thread has ended.
MemoryUse measure_memory(const std::function<void()>& f, std::size_t stack_bytes = std::size_t(4) << 20);

}  // namespace pd::lab14
