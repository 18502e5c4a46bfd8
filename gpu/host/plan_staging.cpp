#include "plan_staging.hpp"

#include <algorithm>

#include "common.hpp"

namespace pd::gpu {

namespace {

// (items, max_blocks): row i is item i's blocks, padded with 0.
void stage_tables(std::vector<int>& out, const StepPlan& plan, int max_blocks) {
    out.assign(plan.tables.size() * std::size_t(max_blocks), 0);
    for (std::size_t i = 0; i < plan.tables.size(); i++) {
        const std::vector<int>& blocks = plan.tables[i]->blocks;
        if (int(blocks.size()) > max_blocks)
            fail("internal error: a sequence with {} blocks reserved, over the device table's {}", blocks.size(),
                 max_blocks);
        std::copy(blocks.begin(), blocks.end(), out.begin() + std::ptrdiff_t(i) * max_blocks);
    }
}

}  // namespace

void stage_plan(StagedStep& out, const StepPlan& plan, int max_blocks) {
    ForwardArgs& a = out.args;
    a = ForwardArgs{};
    a.phase = plan.kind == StepKind::prefill ? Phase::prefill : Phase::decode;
    a.rows = plan.rows;
    if (plan.kind == StepKind::prefill) a.slot = plan.slot[0], a.start = plan.pos[0];
    a.first_kept = plan.n_kept > 0 ? plan.first_kept : plan.rows - 1;
    a.n_kept = std::max(plan.n_kept, 1);
    out.token = plan.token, out.slot = plan.slot, out.pos = plan.pos;
    if (plan.kind == StepKind::batch) stage_tables(out.tables, plan, max_blocks);
}

}  // namespace pd::gpu
