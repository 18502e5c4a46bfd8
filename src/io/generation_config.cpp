#include "io/generation_config.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd {

namespace {

// Keys that leave the tokens alone (bookkeeping, the padding of batches), and
// eos_token_id, which load_hf_config applies.
bool nothing_to_name(std::string_view key) {
    static const std::vector<std::string_view> keys = {"transformers_version", "_from_model_config",
                                                       "pad_token_id", "bos_token_id", "use_cache",
                                                       "output_attentions", "output_hidden_states",
                                                       "return_dict_in_generate", "output_scores",
                                                       "eos_token_id"};
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string clipped_dump(const Json& v) {
    std::string s = v.dump();
    return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

}  // namespace

std::vector<GenerationKey> generation_keys_not_applied(const std::filesystem::path& folder) {
    const std::filesystem::path path = folder / "generation_config.json";
    std::error_code ec;
    if (folder.empty() || !std::filesystem::exists(path, ec)) return {};
    const Json root = parse_json(read_regular_file(path, kMaxJsonFileBytes, ""), path.string());
    const JsonObject j(root, path.string());
    std::vector<GenerationKey> keys;
    for (const auto& [key, value] : j.json().items()) {
        if (value.is_null() || nothing_to_name(key)) continue;
        keys.push_back({key, clipped_dump(value)});
    }
    return keys;
}

std::string describe_not_applied(const std::vector<GenerationKey>& keys) {
    if (keys.empty()) return "";
    std::string asks;
    for (const GenerationKey& k : keys) asks += fmt::format("{}{} {}", asks.empty() ? "" : ", ", k.key, k.value);
    return "generation_config.json asks for " + asks +
           "; not applied: the kit samples as --temperature/--top-k/--top-p (or the request) say, for as "
           "many tokens as -n (or max_tokens) says, and implements no other decoding option";
}

}  // namespace pd
