// Lab 14's program, in two files: main.cpp reads and checks the options and
// runs the lab; sweeps.cpp makes the random problems, checks the kernels and
// times them. This header holds what both read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels.hpp"

namespace pd::lab14 {

// The command line (add_options() in main.cpp declares each option and its help).
struct Options {
    std::vector<int> lengths = {256, 512, 1024, 2048, 4096, 8192};
    std::vector<std::string> sweeps = {"prefill", "decode", "tiles"};
    int heads = 4, kv_heads = 2, head_dim = 64;
    Tiles tiles;
    int tile_length = 2048;
    int threads = 2;
    int warmup = 1, repeats = 3, decode_calls = 20;
    std::uint64_t seed = 14;
    std::string device = "cpu", out = "lab14-results", json;
    bool no_plot = false;
};

// Which devices --device names.
inline bool on_cpu(const Options& o) { return o.device != "cuda"; }
inline bool on_gpu(const Options& o) { return o.device != "cpu"; }

// [1] your tiled kernel against the naive one, and (--device cuda or both) the
// GPU pair against the CPU's naive kernel; each adds its rows to `j` and is
// true when every shape agrees.
bool check_kernels(const Options& o, nlohmann::json& j);
bool check_gpu_pair(const Options& o, nlohmann::json& j);

// [2] prefill or [3] (decode) the length sweep on each device --device names:
// j[name] (CPU) and j[name_gpu]; a CSV each in `dir`.
void sweep_devices(const Options& o, const std::filesystem::path& dir, bool decode, nlohmann::json& j);

// [4] the tiled kernel's time for several tile sizes (CPU), tiles.csv in `dir`.
nlohmann::json sweep_tiles(const Options& o, const std::filesystem::path& dir);

}  // namespace pd::lab14
