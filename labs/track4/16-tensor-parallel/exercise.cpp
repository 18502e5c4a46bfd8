// Lab 16 starter: replace each TODO_EXERCISE with your code (README.md, tasks 1-5).
// Build with ./kit build (or ninja -C build), then run the tests:
//   meson test -C build --suite track4-16
#include "exercise.hpp"

#include "todo_exercise.hpp"

namespace pd::lab16 {

ShardPlan plan_shard(const Config& c, int ranks, int rank) {
    (void)c, (void)ranks, (void)rank;
    TODO_EXERCISE(
        "README task 1: refuse bad counts first (pd::fail); then KV heads in equal runs, the query heads of "
        "those KV heads (group_size() each), the hidden units in equal runs");
}

LayerShard shard_layer(const Config& c, const LayerWeights& full, const ShardPlan& p) {
    (void)c, (void)full, (void)p;
    TODO_EXERCISE(
        "README task 2: qkv and mlp_in by rows (where do the k rows start?), attn_out and mlp_out by "
        "columns; a head is head_dim consecutive rows");
}

void tp_layer(ShardSublayers& sub, Comm& comm, std::span<float> x, std::span<float> partial) {
    (void)sub, (void)comm, (void)x, (void)partial;
    TODO_EXERCISE("README task 3: each sublayer gives a partial sum on each rank; when is it whole?");
}

void ring_allreduce(Comm& comm, std::span<float> x) {
    (void)comm, (void)x;
    TODO_EXERCISE(
        "README task 4: which chunk does rank r send at step s of the reduce-scatter, and which does it receive? "
        "Then the all-gather passes the summed chunks on");
}

AllreduceCost ring_cost(double bytes, int ranks, double link_gbps, double latency_us) {
    (void)bytes, (void)ranks, (void)link_gbps, (void)latency_us;
    TODO_EXERCISE("README task 5: refuse bad values; then the bytes of 2(R-1) steps on the link, and their latency");
}

}  // namespace pd::lab16
