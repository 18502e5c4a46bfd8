#include "checkpoint_notes.hpp"

#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/generation_config.hpp"
#include "io/model_file.hpp"

namespace pd::cli {

void print_keys_not_acted_on(const LoadedModel& loaded) {
    if (loaded.folder.empty()) return;
    const std::filesystem::path config = loaded.folder / "config.json";
    const std::vector<std::string> unknown =
        unknown_config_keys(read_regular_file(config, kMaxJsonFileBytes), config.string());
    if (unknown.empty())
        std::printf("config keys      every key of config.json is read, refused when it matters, or bookkeeping\n");
    else
        std::printf("config keys      unknown to the kit, ignored (check they leave the math alone): %s\n",
                    fmt::format("{}", fmt::join(unknown, ", ")).c_str());
    const std::string generation =
        describe_not_applied(generation_keys_not_applied(loaded.folder));
    if (!generation.empty()) std::printf("generation       %s\n", generation.c_str());
}

void note_generation_config(const LoadedModel& loaded) {
    const std::string note = describe_not_applied(generation_keys_not_applied(loaded.folder));
    if (!note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
}

}  // namespace pd::cli
