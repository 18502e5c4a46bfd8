// tokenizer.json, field by field. Vocabulary keys in it spell bytes with
// GPT-2's byte alphabet (utf8.hpp); they are translated to raw bytes here,
// once, so that encoding and decoding work on raw bytes throughout.
#include "tokenizer_json.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "utf8.hpp"

namespace pd::tok {

namespace {

using json = nlohmann::json;
using KeyIds = std::unordered_map<std::string, int>;  // vocabulary keys as spelled in the file -> id

// j[key] as T, or `fallback` when the key is absent or null.
template <typename T>
T field(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

constexpr const char* kSupported =
    "the kit supports byte-level BPE tokenizers only (GPT-2, SmolLM, Llama 3, Qwen 2 style)";

// Rejects every model but a plain byte-level BPE.
void check_model(const json& model, const std::string& origin) {
    std::string type = field<std::string>(model, "type", model.contains("merges") ? "BPE" : "(none)");
    if (type != "BPE") fail("{}: model type \"{}\" is not supported: {}", origin, type, kSupported);
    if (field(model, "byte_fallback", false))
        fail("{}: this is a SentencePiece-style BPE (byte_fallback: true, as in Llama 2 or Mistral); {}",
             origin, kSupported);
    if (field(model, "dropout", 0.0) > 0.0)
        fail("{}: BPE dropout makes encoding random; set \"dropout\" to null to use this tokenizer", origin);
    if (!field<std::string>(model, "continuing_subword_prefix", "").empty() ||
        !field<std::string>(model, "end_of_word_suffix", "").empty())
        fail("{}: BPE with continuing_subword_prefix or end_of_word_suffix is not supported; {}", origin,
             kSupported);
}

void check_normalizer(const json& n, const std::string& origin) {
    if (n.is_null()) return;
    std::string type = n.at("type").get<std::string>();
    if (type == "Sequence") {
        for (const json& sub : n.at("normalizers")) check_normalizer(sub, origin);
    } else if (type != "NFC") {
        // NFC is taken as the identity (see tokenizer.hpp); anything else
        // would silently change which tokens the text becomes.
        fail("{}: normalizer \"{}\" is not supported ({}, whose normalizer is none or NFC)", origin, type,
             kSupported);
    }
}

void check_decoder(const json& d, const std::string& origin) {
    if (d.is_null()) return;
    std::string type = d.at("type").get<std::string>();
    if (type != "ByteLevel")
        fail("{}: decoder \"{}\" is not supported ({}, decoder ByteLevel)", origin, type, kSupported);
}

// A Split pre-tokenizer: a Regex or String pattern whose matches are kept as
// pieces of their own (Isolated) or dropped (Removed).
PreTokenizerStep split_step(const json& p, const std::string& origin) {
    PreTokenizerStep step;
    const json& pattern = p.at("pattern");
    if (pattern.contains("Regex")) {
        step.split.emplace(pattern["Regex"].get<std::string>(), origin);
    } else {
        step.split.emplace(pattern.at("String").get<std::string>(), origin, /*literal=*/true);
    }
    std::string behavior = p.at("behavior").get<std::string>();
    if (behavior != "Isolated" && behavior != "Removed")
        fail("{}: Split behavior \"{}\" is not supported (only Isolated and Removed)", origin, behavior);
    if (field(p, "invert", false))
        fail("{}: Split with \"invert\": true is not supported", origin);
    step.remove_matches = behavior == "Removed";
    return step;
}

// Flattens the pre_tokenizer into steps; ByteLevel must come last because the
// steps after it would see bytes spelled in the byte alphabet.
void add_pre_tokenizer(const json& p, const std::string& origin, std::vector<PreTokenizerStep>& steps,
                       bool& byte_level) {
    if (p.is_null()) return;
    std::string type = p.at("type").get<std::string>();
    if (byte_level)
        fail("{}: pre-tokenizer \"{}\" comes after ByteLevel, which the kit does not support "
             "(ByteLevel must be the last one)",
             origin, type);
    PreTokenizerStep step;
    if (type == "Sequence") {
        for (const json& sub : p.at("pretokenizers")) add_pre_tokenizer(sub, origin, steps, byte_level);
        return;
    } else if (type == "ByteLevel") {
        byte_level = true;
        step.add_prefix_space = field(p, "add_prefix_space", true);
        if (field(p, "use_regex", true)) step.split.emplace(kGpt2Pattern, origin);
    } else if (type == "Split") {
        step = split_step(p, origin);
    } else if (type == "Digits") {
        step.split.emplace(field(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", origin);
    } else {
        fail("{}: pre-tokenizer \"{}\" is not supported ({}: ByteLevel, optionally after Split and "
             "Digits in a Sequence)",
             origin, type, kSupported);
    }
    steps.push_back(std::move(step));
}

// A merge is "left right" (older files) or ["left", "right"] (newer ones).
std::pair<std::string, std::string> parse_merge(const json& m, std::size_t rank, const std::string& origin) {
    if (m.is_array() && m.size() == 2) return {m[0].get<std::string>(), m[1].get<std::string>()};
    if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        std::size_t space = s.find(' ');
        if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
            return {s.substr(0, space), s.substr(space + 1)};
    }
    fail("{}: merge #{} is {}, expected \"left right\" or [\"left\", \"right\"]", origin, rank, m.dump());
}

// Ids up to 2^24 cover every real vocabulary (the largest are ~256K).
constexpr int kMaxId = 1 << 24;

// `id` as an int, or a UserError naming describe_owner(), which is only
// called then (it builds a string, and vocabularies have 100K+ entries).
template <typename Describe>
int check_id(const json& id, const std::string& origin, Describe describe_owner) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= kMaxId)
        fail("{}: {} has id {}, expected an integer in 0..{}", origin, describe_owner(), id.dump(), kMaxId - 1);
    return id.get<int>();
}

// model.vocab as key -> id; raises max_id to the largest id.
KeyIds read_vocab(const json& vocab, const std::string& origin, int& max_id) {
    if (!vocab.is_object() || vocab.empty())
        fail("{}: model.vocab must be a non-empty object of token -> id", origin);
    KeyIds key_ids;
    key_ids.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        int id = check_id(it.value(), origin, [&] { return "vocabulary entry " + json(it.key()).dump(); });
        key_ids.emplace(it.key(), id);
        max_id = std::max(max_id, id);
    }
    return key_ids;
}

// added_tokens, each also given to the matcher that looks for it (on the raw
// or on the normalized text); raises max_id to the largest id.
std::vector<AddedToken> read_added_tokens(const json& j, const std::string& origin, Tokenizer::Data& d,
                                          int& max_id) {
    std::vector<AddedToken> added;
    for (const json& t : j.value("added_tokens", json::array())) {
        std::string content = t.at("content").get<std::string>();
        if (content.empty()) fail("{}: an added token has empty content", origin);
        int id = check_id(t.at("id"), origin, [&] { return "added token " + json(content).dump(); });
        max_id = std::max(max_id, id);
        added.push_back({content, id, field(t, "single_word", false), field(t, "lstrip", false),
                         field(t, "rstrip", false)});
        bool normalized = field(t, "normalized", !field(t, "special", false));
        (normalized ? d.normalized_added : d.raw_added).add(added.back());
    }
    return added;
}

// The bytes of every id below d.vocab_size, and the lookups from bytes and
// from added-token content back to ids.
void fill_pieces(Tokenizer::Data& d, const KeyIds& key_ids, const std::vector<AddedToken>& added) {
    d.vocab_ids.reserve(key_ids.size());
    std::vector<bool> used(d.vocab_size, false);
    d.pieces.resize(d.vocab_size);
    for (const auto& [key, id] : key_ids) {
        // A key outside the byte alphabet decodes to its own UTF-8, as in HF's
        // ByteLevel decoder, but no text can encode to it directly.
        std::optional<std::string> bytes = key_to_bytes(key);
        d.pieces[id] = bytes ? *bytes : key;
        used[id] = true;
        if (bytes) d.vocab_ids.emplace(*bytes, id);
    }
    for (const AddedToken& t : added) {
        d.pieces[t.id] = t.content;
        used[t.id] = true;
        d.added_ids.emplace(t.content, t.id);
    }
    for (int id = 0; id < d.vocab_size; ++id)
        if (!used[id]) d.pieces[id] = placeholder(id);
}

// The single-byte token of each byte, found by its key in the byte alphabet.
void fill_byte_ids(Tokenizer::Data& d, const KeyIds& key_ids) {
    for (int b = 0; b < 256; ++b) {
        std::string key;
        append_utf8(key, byte_chars()[b]);
        auto it = key_ids.find(key);
        d.byte_ids[b] = it == key_ids.end() ? -1 : it->second;
    }
}

// model.merges (absent: a BPE without merges), line `rank` -> MergeRule.
void read_merges(const json& model, const KeyIds& key_ids, const std::string& origin, Tokenizer::Data& d) {
    auto id_of = [&](const std::string& key, std::size_t rank) {
        auto it = key_ids.find(key);
        if (it == key_ids.end())
            fail("{}: merge #{} needs the token {}, which is not in model.vocab", origin, rank, json(key).dump());
        return it->second;
    };
    static const json no_merges = json::array();
    auto merges_it = model.find("merges");
    const json& merges = merges_it == model.end() ? no_merges : *merges_it;
    d.merges.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        auto [left, right] = parse_merge(merges[rank], rank, origin);
        int left_id = id_of(left, rank);
        int right_id = id_of(right, rank);
        int merged_id = id_of(left + right, rank);
        // Assignment, not emplace: a pair listed twice keeps its last rank, as in HF.
        d.merges[pair_key(left_id, right_id)] = {int(rank), merged_id};
    }
}

// The BPE model's options: unk_token (which must be in the vocabulary),
// fuse_unk, ignore_merges.
void read_bpe_options(const json& model, const KeyIds& key_ids, const std::string& origin, Tokenizer::Data& d) {
    std::string unk = field<std::string>(model, "unk_token", "");
    if (!unk.empty()) {
        auto it = key_ids.find(unk);
        if (it == key_ids.end()) fail("{}: unk_token {} is not in model.vocab", origin, json(unk).dump());
        d.unk_id = it->second;
    }
    d.fuse_unk = field(model, "fuse_unk", false);
    d.ignore_merges = field(model, "ignore_merges", false);
}

// The whole file, in the order HF reads it: the checks first, then the tables.
std::shared_ptr<Tokenizer::Data> load(const json& j, const std::string& origin) {
    auto d = std::make_shared<Tokenizer::Data>();
    const json& model = j.at("model");
    check_model(model, origin);
    check_normalizer(j.value("normalizer", json()), origin);
    check_decoder(j.value("decoder", json()), origin);
    bool byte_level = false;
    add_pre_tokenizer(j.value("pre_tokenizer", json()), origin, d->pre_tokenizer, byte_level);
    if (!byte_level) fail("{}: there is no ByteLevel pre-tokenizer; {}", origin, kSupported);

    int max_id = -1;
    KeyIds key_ids = read_vocab(model.at("vocab"), origin, max_id);
    std::vector<AddedToken> added = read_added_tokens(j, origin, *d, max_id);
    d->vocab_size = max_id + 1;
    fill_pieces(*d, key_ids, added);
    fill_byte_ids(*d, key_ids);
    read_merges(model, key_ids, origin, *d);
    read_bpe_options(model, key_ids, origin, *d);
    d->kind = fmt::format("byte-level BPE ({} merges)", d->merges.size());
    return d;
}

}  // namespace

std::shared_ptr<Tokenizer::Data> read_tokenizer_json(const std::filesystem::path& tokenizer_json) {
    std::string origin = tokenizer_json.string();
    std::error_code ec;
    if (std::filesystem::is_directory(tokenizer_json, ec))
        fail("{} is a folder; pass the tokenizer.json file inside it", origin);
    std::ifstream in(tokenizer_json, std::ios::binary);
    if (!in) fail("tokenizer file {} not found or not readable; pass a Hugging Face tokenizer.json", origin);
    json j;
    try {
        j = json::parse(in);
    } catch (const json::exception& e) {
        fail("{}: not valid JSON ({}); expected a Hugging Face tokenizer.json", origin, e.what());
    }
    try {
        return load(j, origin);
    } catch (const json::exception& e) {
        // A field missing or of the wrong type somewhere in the file.
        fail("{}: not a Hugging Face tokenizer.json this kit can read ({})", origin, e.what());
    }
}

}  // namespace pd::tok
