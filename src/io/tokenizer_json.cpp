// tokenizer.json, field by field. Vocabulary keys in it spell bytes with
// GPT-2's byte alphabet (utf8.hpp); they are translated to raw bytes here,
// once, so that encoding and decoding work on raw bytes throughout.
#include "io/tokenizer_json.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/model_file.hpp"
#include "io/tokenizer_components.hpp"
#include "io/tokenizer_config.hpp"
#include "io/utf8.hpp"

namespace pd::tok {

namespace {

using json = Json;
using KeyIds = std::unordered_map<std::string, int>;  // vocabulary keys as spelled in the file -> id

// Rejects every model but BPE, and the BPE options the kit does not implement.
void check_model(const JsonObject& model) {
    const std::string& origin = model.origin();
    std::string type = model.string_or("type", model.find("merges") ? "BPE" : "(none)");
    if (type != "BPE")
        fail("{}: model type {} is not supported: the kit supports BPE tokenizers only (byte-level as in "
             "GPT-2, Llama 3 and Qwen, or SentencePiece-style as in Llama 2 and Mistral)",
             origin, clipped_quote(type));
    only_fields(model, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                        "byte_fallback", "ignore_merges", "vocab", "merges"});
    if (model.number_or("dropout", 0.0, 0.0, 1.0) > 0.0)
        fail("{}: BPE dropout makes encoding random; set \"dropout\" to null to use this tokenizer", origin);
    if (!model.string_or("continuing_subword_prefix", "").empty() ||
        !model.string_or("end_of_word_suffix", "").empty())
        fail("{}: BPE with continuing_subword_prefix or end_of_word_suffix is not supported", origin);
}

// A merge is "left right" (older files) or ["left", "right"] (newer ones).
std::pair<std::string, std::string> parse_merge(const json& m, std::size_t rank, const std::string& origin) {
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        return {m[0].get<std::string>(), m[1].get<std::string>()};
    if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        std::size_t space = s.find(' ');
        if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
            return {s.substr(0, space), s.substr(space + 1)};
    }
    fail("{}: merge #{} is {}, expected \"left right\" or [\"left\", \"right\"]", origin, rank,
         m.is_string() ? "a string without exactly one space" : describe_json(m));
}

// Ids up to 2^24 cover every real vocabulary (the largest are ~256K).
constexpr int kMaxId = 1 << 24;

// `id` as an int, or a UserError naming describe_owner(), which is only
// called then (it builds a string, and vocabularies have 100K+ entries).
template <typename Describe>
int check_id(const json& id, const std::string& origin, Describe describe_owner) {
    if (id.is_number_integer() && id.get<long long>() >= 0 && id.get<long long>() < kMaxId) return id.get<int>();
    return int(json_integer(id, fmt::format("{}: the id of {}", origin, describe_owner()), 0, kMaxId - 1));
}

// model.vocab as key -> id; raises max_id to the largest id.
KeyIds read_vocab(const json& vocab, const std::string& origin, int& max_id) {
    if (!vocab.is_object() || vocab.empty())
        fail("{}: model.vocab must be a non-empty object of token -> id", origin);
    KeyIds key_ids;
    key_ids.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        int id = check_id(it.value(), origin, [&] { return "vocabulary entry " + clipped_quote(it.key()); });
        key_ids.emplace(it.key(), id);
        max_id = std::max(max_id, id);
    }
    return key_ids;
}

// added_tokens, each also given to the matcher that looks for it (on the raw
// or on the normalized text); raises max_id to the largest id.
std::vector<AddedToken> read_added_tokens(const JsonObject& j, Tokenizer::Data& d, int& max_id) {
    const std::string& origin = j.origin();
    std::vector<AddedToken> added;
    for (const json& token : j.array_or_empty("added_tokens")) {
        JsonObject t(token, origin, fmt::format("added_tokens[{}]", added.size()));
        only_fields(t, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
        std::string content = t.string("content");
        if (content.empty()) fail("{}: an added token has empty content", origin);
        int id = int(t.integer("id", 0, kMaxId - 1));
        max_id = std::max(max_id, id);
        added.push_back({content, id, t.bool_or("single_word", false), t.bool_or("lstrip", false),
                         t.bool_or("rstrip", false)});
        bool normalized = t.bool_or("normalized", !t.bool_or("special", false));
        (normalized ? d.normalized_added : d.raw_added).add(added.back());
    }
    return added;
}

// A vocabulary key as raw bytes: a byte-level key is translated from the byte
// alphabet (nullopt: it uses a character outside it); any other is text.
std::optional<std::string> key_bytes(const Tokenizer::Data& d, const std::string& key) {
    return d.byte_level ? key_to_bytes(key) : std::optional<std::string>(key);
}

// "<0xNN>": SentencePiece's spelling of the byte NN (its byte fallback).
std::string byte_token(int b) { return fmt::format("<0x{:02X}>", b); }

// What the decoder makes of one token on its own (DecoderRules' per-token
// rules): a byte token under ByteFallback is its byte; Replace and Metaspace
// rewrite the rest. (A Metaspace decoder also treats the first token of a
// text apart: tokenizer.cpp.)
std::string decoded_piece(const Tokenizer::Data& d, const std::string& text, bool byte_token_) {
    if (byte_token_) return text;
    std::string out = text;
    auto replace_all = [&](const std::string& from, const std::string& to) {
        for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
            out.replace(at, from.size(), to);
    };
    for (const auto& [from, to] : d.decoder.replace) replace_all(from, to);
    if (!d.decoder.metaspace.empty()) replace_all(d.decoder.metaspace, " ");
    return out;
}

// A Metaspace decoder drops every replacement character of a text's first
// token; the kit decodes that token by dropping its spaces, which is the same
// unless a key holds a space of its own.
void check_metaspace_first(const Tokenizer::Data& d, const KeyIds& key_ids, const std::string& origin) {
    if (!d.decoder.metaspace_first) return;
    for (const auto& [key, id] : key_ids)
        if (key.find(' ') != std::string::npos)
            fail("{}: the vocabulary entry {} holds a space, which the kit cannot tell apart from a Metaspace "
                 "replacement when decoding",
                 origin, clipped_quote(key));
}

// The single-byte token of each byte: by its key in the byte alphabet, or
// (SentencePiece style) its "<0xNN>" token.
void fill_byte_ids(Tokenizer::Data& d, const KeyIds& key_ids) {
    for (int b = 0; b < 256; ++b) {
        std::string key;
        if (d.byte_level)
            append_utf8(key, byte_chars()[b]);
        else
            key = byte_token(b);
        auto it = key_ids.find(key);
        d.byte_ids[b] = it == key_ids.end() ? -1 : it->second;
    }
}

// The text of every id below d.vocab_size, and the lookups from raw bytes and
// from added-token content back to ids.
void fill_pieces(Tokenizer::Data& d, const KeyIds& key_ids, const std::vector<AddedToken>& added) {
    d.vocab_ids.reserve(key_ids.size());
    std::vector<bool> used(d.vocab_size, false);
    d.pieces.resize(d.vocab_size);
    for (const auto& [key, id] : key_ids) {
        // A key outside the byte alphabet decodes to its own UTF-8, as in HF's
        // ByteLevel decoder, but no text can encode to it directly.
        std::optional<std::string> bytes = key_bytes(d, key);
        d.pieces[id] = decoded_piece(d, bytes ? *bytes : key, false);
        used[id] = true;
        if (bytes) d.vocab_ids.emplace(*bytes, id);
    }
    if (d.decoder.byte_fallback)
        for (int b = 0; b < 256; ++b)
            if (d.byte_ids[b] >= 0) d.pieces[d.byte_ids[b]] = std::string(1, char(b));
    for (const AddedToken& t : added) {
        d.pieces[t.id] = decoded_piece(d, t.content, false);
        used[t.id] = true;
        d.added_ids.emplace(t.content, t.id);
    }
    for (int id = 0; id < d.vocab_size; ++id)
        if (!used[id]) d.pieces[id] = placeholder(id);
}

// model.merges (absent: a BPE without merges), line `rank` -> MergeRule.
void read_merges(const JsonObject& model, const KeyIds& key_ids, Tokenizer::Data& d) {
    const std::string& origin = model.origin();
    auto id_of = [&](const std::string& key, std::size_t rank) {
        auto it = key_ids.find(key);
        if (it == key_ids.end())
            fail("{}: merge #{} needs the token {}, which is not in model.vocab", origin, rank, clipped_quote(key));
        return it->second;
    };
    const json& merges = model.array_or_empty("merges");
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
// fuse_unk, byte_fallback, ignore_merges.
void read_bpe_options(const JsonObject& model, const KeyIds& key_ids, Tokenizer::Data& d) {
    std::string unk = model.string_or("unk_token", "");
    if (!unk.empty()) {
        auto it = key_ids.find(unk);
        if (it == key_ids.end())
            fail("{}: unk_token {} is not in model.vocab", model.origin(), clipped_quote(unk));
        d.unk_id = it->second;
    }
    d.fuse_unk = model.bool_or("fuse_unk", false);
    d.byte_fallback = model.bool_or("byte_fallback", false);
    d.ignore_merges = model.bool_or("ignore_merges", false);
}

// The whole file, in the order HF reads it: the checks first, then the tables.
std::shared_ptr<Tokenizer::Data> load(const JsonObject& j) {
    const std::string& origin = j.origin();
    auto d = std::make_shared<Tokenizer::Data>();
    only_fields(j, {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "model",
                    "post_processor", "decoder"});
    // Both cut or pad what encode() returns in HF; the kit's encode never does.
    for (const char* key : {"truncation", "padding"})
        if (j.find(key)) fail("{}: {} is set; the kit supports only \"{}\": null", origin, key, key);
    JsonObject model = j.object("model");
    check_model(model);
    d->normalizer = read_normalizer(j.value_or_null("normalizer"), origin);
    d->pre_tokenizer = read_pre_tokenizer(j.value_or_null("pre_tokenizer"), origin, d->byte_level);
    d->decoder = read_decoder(j.value_or_null("decoder"), origin, d->byte_level);
    int max_id = -1;
    KeyIds key_ids = read_vocab(model.value_or_null("vocab"), origin, max_id);
    check_metaspace_first(*d, key_ids, origin);
    std::vector<AddedToken> added = read_added_tokens(j, *d, max_id);
    // Every id below vocab_size gets a piece; real vocabularies are dense, so
    // ids far past the entry count are refused rather than filled with
    // millions of placeholders (found by tests/fuzz: one id of 5,555,255).
    std::size_t entries = key_ids.size() + added.size();
    if (std::size_t(max_id) + 1 > 2 * entries + 1024)
        fail("{}: token ids reach {} but there are only {} tokens; the ids of a vocabulary are 0..size-1",
             origin, max_id, entries);
    d->vocab_size = max_id + 1;
    fill_byte_ids(*d, key_ids);
    fill_pieces(*d, key_ids, added);
    read_merges(model, key_ids, *d);
    read_bpe_options(model, key_ids, *d);
    d->kind = fmt::format("{} BPE ({} merges)", d->byte_level ? "byte-level" : "SentencePiece-style", d->merges.size());
    return d;
}

}  // namespace

std::shared_ptr<Tokenizer::Data> read_tokenizer_json_text(std::string_view text, const std::string& origin) {
    json root = parse_json(text, origin);
    try {
        return load(JsonObject(root, origin));
    } catch (const json::exception& e) {
        // A safety net: every access above is checked, and a type_error's
        // text names JSON types only, never the file's content.
        fail("{}: not a Hugging Face tokenizer.json this kit can read ({})", origin, e.what());
    }
}

std::shared_ptr<Tokenizer::Data> read_tokenizer_json(const std::filesystem::path& tokenizer_json) {
    std::string origin = tokenizer_json.string();
    std::error_code ec;
    if (std::filesystem::is_directory(tokenizer_json, ec))
        fail("{} is a folder; pass the tokenizer.json file inside it", origin);
    std::string text = read_regular_file(tokenizer_json, kMaxJsonFileBytes,
                                         "; pass a Hugging Face tokenizer.json");
    auto d = read_tokenizer_json_text(text, origin);
    std::filesystem::path config = tokenizer_json.parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config, ec)) check_tokenizer_config(config);
    return d;
}

}  // namespace pd::tok
