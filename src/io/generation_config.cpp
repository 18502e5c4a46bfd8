#include "io/generation_config.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd {

namespace {

// Keys that leave the tokens alone: bookkeeping, and the padding of batches.
bool changes_nothing(std::string_view key) {
    static const std::vector<std::string_view> keys = {"transformers_version", "_from_model_config",
                                                       "pad_token_id", "bos_token_id", "use_cache",
                                                       "output_attentions", "output_hidden_states",
                                                       "return_dict_in_generate", "output_scores"};
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// eos_token_id that stops where config.json's does: the same id, or a list of it alone.
bool same_eos(const Json& v, const Config& c) {
    if (v.is_number_integer()) return v.get<long long>() == c.eos_id;
    return v.is_array() && v.size() == 1 && v[0].is_number_integer() && v[0].get<long long>() == c.eos_id;
}

std::string clipped_dump(const Json& v) {
    std::string s = v.dump();
    return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

}  // namespace

std::vector<GenerationKey> generation_keys_not_applied(const std::filesystem::path& folder, const Config& c) {
    const std::filesystem::path path = folder / "generation_config.json";
    std::error_code ec;
    if (folder.empty() || !std::filesystem::exists(path, ec)) return {};
    const Json root = parse_json(read_regular_file(path, kMaxJsonFileBytes, ""), path.string());
    const JsonObject j(root, path.string());
    std::vector<GenerationKey> keys;
    for (const auto& [key, value] : j.json().items()) {
        if (value.is_null() || changes_nothing(key)) continue;
        if (key == "eos_token_id" && same_eos(value, c)) continue;
        keys.push_back({key, clipped_dump(value)});
    }
    return keys;
}

std::string describe_not_applied(const std::vector<GenerationKey>& keys) {
    if (keys.empty()) return "";
    std::string asks;
    for (const GenerationKey& k : keys) asks += fmt::format("{}{} {}", asks.empty() ? "" : ", ", k.key, k.value);
    return "generation_config.json asks for " + asks +
           "; not applied: the kit samples as --temperature/--top-k/--top-p say and stops at config.json's "
           "eos_token_id";
}

}  // namespace pd
