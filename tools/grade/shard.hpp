// Grading a class in parts (--shard K/N) on many machines and merging the
// parts' gradebooks (--merge), for a job array on a scheduler (Slurm, mpirun:
// docs/instructors.md). Shard K of N grades the students at positions i of the
// sorted list with i % N == K - 1, so row j of shard K is row j * N + K - 1 of
// the whole class: the merge interleaves the shards' rows back in that order
// and its gradebook.csv is byte-identical to a single run's (same --seed).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace pd::grade {

namespace fs = std::filesystem;

struct Shard {
    int k = 1, n = 1;  // this is part k of n (1-based)
};

// "K/N" with 1 <= K <= N; throws UsageError otherwise.
Shard parse_shard(const std::string& spec);

// The students of shard `s` (from the sorted list), in order.
std::vector<std::pair<std::string, fs::path>> shard_of(const std::vector<std::pair<std::string, fs::path>>& all,
                                                       Shard s);

// OUT/shard.txt: "K/N", so the merge can check it has every part once.
void write_shard_mark(const fs::path& out, Shard s);

// Merges the gradebooks of `parts` (each an --out folder of one shard, in any
// order) into out/gradebook.csv and copies their reports/ into out/reports/.
void merge_gradebooks(const fs::path& out, const std::vector<fs::path>& parts);

}  // namespace pd::grade
