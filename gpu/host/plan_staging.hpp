// What the GPU gets of a step plan (src/engine/step_plan.hpp), made on the
// host (C++20, g++): the forward pass's arguments, the rows, and for a batch
// step the block tables the kernels read. The rows are the plan's, in its
// order: the GPU runs the very rows the CPU runs. Its own file so that
// tests/gpu/test_host.cpp checks the staging on any machine.
#pragma once

#include <span>
#include <vector>

#include "engine/step_plan.hpp"
#include "model.cuh"

namespace pd::gpu {

struct StagedStep {
    ForwardArgs args;                       // phase, rows, (prefill) slot and start, the kept run
    std::span<const int> token, slot, pos;  // (rows) what st.token / st.slot / st.pos get (cuda_engine.cpp)
    std::vector<int> tables;                // batch: (items, max_blocks) block ids; 0 past a sequence's
                                            // blocks (never read)
};

// Stages `plan` (which must outlive `out`: the rows are its own) for a cache
// of `max_blocks` blocks per sequence. A prefill
// runs the prefill kernels; decode and batch steps the decode kernels, every
// row one query through its table. A batch step that keeps no logits keeps
// its last row's (gpu::forward takes at least one; never read). Fails
// (internal error) when a table holds more blocks than the device's rows have.
void stage_plan(StagedStep& out, const StepPlan& plan, int max_blocks);

}  // namespace pd::gpu
