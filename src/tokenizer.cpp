// Byte-level BPE as Hugging Face `tokenizers` runs it, in the same order:
//   1. split the text around added tokens (special tokens such as <|endoftext|>),
//   2. pre-tokenize each remaining segment into pieces (regex splits),
//   3. merge the bytes of each piece by rank (BPE).
// Vocabulary keys in tokenizer.json spell bytes with GPT-2's byte->unicode
// alphabet; we translate them to raw bytes once at load time, so encoding and
// decoding work on raw bytes throughout.
#include "tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <optional>
#include <queue>
#include <unordered_map>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "common.hpp"

namespace pd {

namespace {

using json = nlohmann::json;

// --- UTF-8 ------------------------------------------------------------------

struct Utf8Char {
    enum Status { ok, invalid, truncated } status;
    // ok: the character's length; invalid: the maximal invalid subpart
    // (Unicode's rule for where U+FFFD goes); truncated: the valid-so-far tail.
    std::size_t len;
    char32_t cp;  // only meaningful when ok
};

// Decodes the character starting at s[i] (i < s.size()), rejecting overlong
// forms, surrogates and code points above U+10FFFF.
Utf8Char next_utf8(std::string_view s, std::size_t i) {
    auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) return {Utf8Char::ok, 1, b0};
    int need;
    char32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the next byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2, cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;  // overlong
        if (b0 == 0xED) hi = 0x9F;  // surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3, cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;  // overlong
        if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        return {Utf8Char::invalid, 1, 0};
    }
    std::size_t n = 1;
    for (int k = 0; k < need; ++k, ++n) {
        if (i + n >= s.size()) return {Utf8Char::truncated, n, 0};
        auto b = static_cast<unsigned char>(s[i + n]);
        if (b < lo || b > hi) return {Utf8Char::invalid, n, 0};
        cp = (cp << 6) | (b & 0x3F);
        lo = 0x80, hi = 0xBF;
    }
    return {Utf8Char::ok, n, cp};
}

// The valid character that ends at s[end], if any.
std::optional<Utf8Char> prev_utf8(std::string_view s, std::size_t end) {
    for (std::size_t len = 1; len <= 4 && len <= end; ++len) {
        auto b = static_cast<unsigned char>(s[end - len]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking back
        Utf8Char c = next_utf8(s, end - len);
        if (c.status == Utf8Char::ok && c.len == len) return c;
        return std::nullopt;
    }
    return std::nullopt;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

// Unicode's White_Space property (what Rust's regex \s means, which HF uses
// for the lstrip/rstrip options of added tokens).
bool is_white_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

// --- GPT-2's byte alphabet --------------------------------------------------

// bytes_to_unicode(): printable Latin-1 bytes stand for themselves; the other
// 68 bytes (controls, space, 0x7F-0xA0, 0xAD) become U+0100.. in byte order, so
// every byte is spelled by one visible character (space is 'Ġ' = U+0120).
const std::array<char32_t, 256>& byte_chars() {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            t[b] = printable ? char32_t(b) : next++;
        }
        return t;
    }();
    return table;
}

// Translates a vocabulary key back to raw bytes; nullopt if it uses a
// character outside the byte alphabet.
std::optional<std::string> key_to_bytes(std::string_view key) {
    constexpr char32_t kEnd = 0x100 + 68;  // the alphabet's characters are all below this
    static const std::array<int, kEnd> byte_of = [] {
        std::array<int, kEnd> t;
        t.fill(-1);
        for (int b = 0; b < 256; ++b) t[byte_chars()[b]] = b;
        return t;
    }();
    std::string out;
    out.reserve(key.size());
    for (std::size_t i = 0; i < key.size();) {
        Utf8Char c = next_utf8(key, i);
        if (c.status != Utf8Char::ok || c.cp >= kEnd || byte_of[c.cp] < 0) return std::nullopt;
        out += char(byte_of[c.cp]);
        i += c.len;
    }
    return out;
}

// --- PCRE2 ------------------------------------------------------------------

using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;

// Only the whole match is read, so one ovector pair serves every pattern.
MatchData new_match_data() { return {pcre2_match_data_create(1, nullptr), &pcre2_match_data_free}; }

// A compiled pattern with Unicode semantics (\p{L}, \s, (?i) over all of
// Unicode), JIT-compiled where PCRE2 supports it. Immutable, so shareable
// between threads; each thread brings its own MatchData.
class Regex {
public:
    // literal: match `pattern` as plain text.
    Regex(const std::string& pattern, const std::string& origin, bool literal = false) {
        int err;
        PCRE2_SIZE at;
        std::uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         options, &err, &at, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("{}: cannot compile the regex {} (at offset {}: {})", origin, json(pattern).dump(), at,
                 reinterpret_cast<const char*>(msg));
        }
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // failure just means the slower interpreter
        code_.reset(code, &pcre2_code_free);
    }

    // The first non-empty match in `subject` (valid UTF-8) at or after `from`.
    // Empty matches are skipped: HF drops empty pieces.
    bool find(std::string_view subject, std::size_t from, MatchData& md, std::size_t& begin,
              std::size_t& end) const {
        while (from < subject.size()) {
            int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                                 from, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) return false;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                fail("tokenizer regex failed on a {}-byte piece of text: {}", subject.size(),
                     reinterpret_cast<const char*>(msg));
            }
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
            begin = ov[0], end = ov[1];
            if (end > begin) return true;
            from = begin + next_utf8(subject, begin).len;
        }
        return false;
    }

    // Whether a pattern anchored with \A matches at the start of `ch`, a
    // single valid character.
    bool matches(std::string_view ch) const {
        MatchData md = new_match_data();
        std::size_t b, e;
        return find(ch, 0, md, b, e);
    }

private:
    std::shared_ptr<pcre2_code> code_;
};

// --- added tokens -------------------------------------------------------------

struct Segment {
    std::string_view text;
    int id;  // the added token's id, or -1 for plain text still to tokenize
};

struct AddedToken {
    std::string content;
    int id;
    bool single_word, lstrip, rstrip;
};

// Splits text around added tokens the way HF's AddedVocabulary does:
// non-overlapping leftmost-longest matches (its Aho-Corasick trie), then the
// per-token options, which may drop a match or widen it over whitespace.
class AddedTokenMatcher {
public:
    void add(AddedToken t) {
        auto& bucket = by_first_byte_[static_cast<unsigned char>(t.content[0])];
        bucket.push_back(tokens_.size());
        tokens_.push_back(std::move(t));
        std::stable_sort(bucket.begin(), bucket.end(), [&](std::size_t a, std::size_t b) {
            return tokens_[a].content.size() > tokens_[b].content.size();
        });
    }

    // Appends the non-empty segments of `s` to `out`.
    void split(std::string_view s, std::vector<Segment>& out) const {
        std::size_t done = 0;  // end of the last segment emitted
        for (std::size_t i = 0; i < s.size();) {
            const AddedToken* t = longest_at(s, i);
            if (!t) {
                ++i;
                continue;
            }
            std::size_t start = i, stop = i + t->content.size();
            i = stop;  // the trie resumes after the match whatever the options below decide
            if (t->single_word && (ends_with_word(s.substr(0, start)) || starts_with_word(s.substr(stop))))
                continue;
            // Widen over the whitespace around the token. Whitespace that an
            // earlier token's rstrip took stays with it: then start < done,
            // and no plain segment is emitted in between.
            if (t->lstrip) {
                while (auto c = prev_utf8(s, start)) {
                    if (!is_white_space(c->cp)) break;
                    start -= c->len;
                }
            }
            if (t->rstrip) {
                while (stop < s.size()) {
                    Utf8Char c = next_utf8(s, stop);
                    if (c.status != Utf8Char::ok || !is_white_space(c.cp)) break;
                    stop += c.len;
                }
            }
            if (done < start) out.push_back({s.substr(done, start - done), -1});
            out.push_back({s.substr(start, stop - start), t->id});
            done = stop;
        }
        if (done < s.size()) out.push_back({s.substr(done), -1});
    }

private:
    const AddedToken* longest_at(std::string_view s, std::size_t i) const {
        for (std::size_t k : by_first_byte_[static_cast<unsigned char>(s[i])])
            if (s.substr(i).starts_with(tokens_[k].content)) return &tokens_[k];
        return nullptr;
    }

    // A word character as Rust's regex \w (which HF uses) defines it:
    // alphabetic, marks, decimal digits, connector punctuation, joiners.
    // PCRE2's own \w leaves out the marks.
    static bool is_word(std::string_view ch) {
        static const Regex word(R"(\A[\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "word-character test");
        return word.matches(ch);
    }
    static bool ends_with_word(std::string_view before) {
        auto c = prev_utf8(before, before.size());
        return c && is_word(before.substr(before.size() - c->len));
    }
    static bool starts_with_word(std::string_view after) {
        if (after.empty()) return false;
        Utf8Char c = next_utf8(after, 0);
        return c.status == Utf8Char::ok && is_word(after.substr(0, c.len));
    }

    std::vector<AddedToken> tokens_;
    std::array<std::vector<std::size_t>, 256> by_first_byte_;  // indices, longest content first
};

// --- pre-tokenization ---------------------------------------------------------

// GPT-2's split, used by the ByteLevel pre-tokenizer when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One pre-tokenizer of a Sequence, applied to every piece in turn.
struct PreTokenizerStep {
    bool add_prefix_space = false;  // ByteLevel: prepend ' ' to a piece not starting with one
    std::optional<Regex> split;     // split each piece at the matches ...
    bool remove_matches = false;    // ... keeping the matches (Isolated) or dropping them (Removed)
};

void split_piece(const PreTokenizerStep& step, std::string_view piece, std::vector<std::string>& out,
                 MatchData& md) {
    // The regex runs on maximal valid UTF-8 runs; each byte outside them
    // becomes a piece of its own (HF only ever sees valid UTF-8).
    for (std::size_t i = 0; i < piece.size();) {
        std::size_t run_end = i;
        while (run_end < piece.size()) {
            Utf8Char c = next_utf8(piece, run_end);
            if (c.status != Utf8Char::ok) break;
            run_end += c.len;
        }
        std::string_view run = piece.substr(i, run_end - i);
        std::size_t pos = 0, b, e;
        while (step.split->find(run, pos, md, b, e)) {
            if (b > pos) out.emplace_back(run.substr(pos, b - pos));
            if (!step.remove_matches) out.emplace_back(run.substr(b, e - b));
            pos = e;
        }
        if (pos < run.size()) out.emplace_back(run.substr(pos));
        if (run_end < piece.size()) out.emplace_back(piece.substr(run_end++, 1));
        i = run_end;
    }
}

void apply_step(const PreTokenizerStep& step, std::vector<std::string>& pieces, MatchData& md) {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (std::string& p : pieces) {
        if (step.add_prefix_space && p[0] != ' ') p.insert(0, 1, ' ');
        if (step.split)
            split_piece(step, p, out, md);
        else
            out.push_back(std::move(p));
    }
    pieces.swap(out);
}

struct MergeRule {
    int rank;
    int id;  // the merged token
};

std::uint64_t pair_key(int a, int b) { return std::uint64_t(std::uint32_t(a)) << 32 | std::uint32_t(b); }

// Lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int, StringHash, std::equal_to<>>;

std::string placeholder(int id) { return fmt::format("<|{}|>", id); }

}  // namespace

// --- the tokenizer's tables -----------------------------------------------------

struct Tokenizer::Data {
    std::string kind;
    int vocab_size = 0;
    // Bytes of each id below pieces.size(); ids from there to vocab_size are
    // unused and decode to a placeholder.
    std::vector<std::string> pieces;
    // The single-byte token each byte starts out as before merging; -1: none.
    std::array<int, 256> byte_ids{};
    std::unordered_map<std::uint64_t, MergeRule> merges;  // pair_key(left, right) -> rule
    StringMap vocab_ids;                                  // raw bytes of a vocabulary entry -> id
    StringMap added_ids;                                  // added token content -> id
    bool ignore_merges = false;
    int unk_id = -1;
    bool fuse_unk = false;
    AddedTokenMatcher raw_added;         // matched in the text as given
    AddedTokenMatcher normalized_added;  // matched after normalization
    std::vector<PreTokenizerStep> pre_tokenizer;

    std::string bytes_of(int id) const {
        if (id < 0 || id >= vocab_size)
            fail("token id {} is out of range: this {} tokenizer has ids 0..{}; check that the "
                 "tokenizer belongs to the model that produced the ids",
                 id, kind, vocab_size - 1);
        return std::size_t(id) < pieces.size() ? pieces[id] : placeholder(id);
    }

    void merge_piece(std::string_view piece, std::vector<int>& out) const;
};

// BPE on one pre-token, exactly as HF's Word::merge_all: start from one symbol
// per byte and keep applying the lowest-ranked merge among adjacent pairs,
// leftmost first on ties. A heap of candidate pairs keeps this O(n log n) on
// long pieces; entries made stale by an earlier merge are skipped when popped.
void Tokenizer::Data::merge_piece(std::string_view piece, std::vector<int>& out) const {
    if (ignore_merges) {
        if (auto it = vocab_ids.find(piece); it != vocab_ids.end()) {
            out.push_back(it->second);
            return;
        }
    }
    struct Symbol {
        int id, prev, next;  // prev/next: neighbouring live symbols, -1 at the ends
        int len;             // bytes covered; 0 once merged into its left neighbour
    };
    std::vector<Symbol> sym;
    sym.reserve(piece.size());
    bool after_unk = false;
    for (char ch : piece) {
        auto byte = static_cast<unsigned char>(ch);
        int id = byte_ids[byte];
        bool unknown = id < 0;
        if (unknown) {
            if (unk_id < 0)
                fail("cannot encode byte 0x{:02X}: the {} tokenizer has no token for it and no "
                     "unk_token; use text it covers, or a tokenizer whose vocabulary holds all 256 bytes",
                     byte, kind);
            if (fuse_unk && after_unk) {
                sym.back().len++;
                continue;
            }
            id = unk_id;
        }
        after_unk = unknown;
        int n = int(sym.size());
        sym.push_back({id, n - 1, n + 1, 1});
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    struct Candidate {
        int rank, pos, id;
    };
    auto later = [](const Candidate& a, const Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> heap(later);
    auto consider = [&](int pos) {  // the pair starting at symbol `pos`
        int right = sym[pos].next;
        if (right < 0) return;
        auto it = merges.find(pair_key(sym[pos].id, sym[right].id));
        if (it != merges.end()) heap.push({it->second.rank, pos, it->second.id});
    };
    for (int i = 0; i + 1 < int(sym.size()); ++i) consider(i);

    while (!heap.empty()) {
        Candidate top = heap.top();
        heap.pop();
        Symbol& left = sym[top.pos];
        if (left.len == 0 || left.next < 0) continue;
        Symbol& right = sym[left.next];
        auto it = merges.find(pair_key(left.id, right.id));
        if (it == merges.end() || it->second.id != top.id) continue;  // stale
        left.id = top.id;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (left.next >= 0) sym[left.next].prev = top.pos;
        if (left.prev >= 0) consider(left.prev);
        consider(top.pos);
    }
    for (const Symbol& s : sym)
        if (s.len > 0) out.push_back(s.id);
}

// --- loading tokenizer.json -------------------------------------------------------

namespace {

// j[key] as T, or `fallback` when the key is absent or null.
template <typename T>
T field(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

constexpr const char* kSupported =
    "the kit supports byte-level BPE tokenizers only (GPT-2, SmolLM, Llama 3, Qwen 2 style)";

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

std::shared_ptr<Tokenizer::Data> load(const json& j, const std::string& origin) {
    auto d = std::make_shared<Tokenizer::Data>();
    const json& model = j.at("model");
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

    check_normalizer(j.value("normalizer", json()), origin);
    check_decoder(j.value("decoder", json()), origin);
    bool byte_level = false;
    add_pre_tokenizer(j.value("pre_tokenizer", json()), origin, d->pre_tokenizer, byte_level);
    if (!byte_level) fail("{}: there is no ByteLevel pre-tokenizer; {}", origin, kSupported);

    const json& vocab = model.at("vocab");
    if (!vocab.is_object() || vocab.empty())
        fail("{}: model.vocab must be a non-empty object of token -> id", origin);
    // Ids up to 2^24 cover every real vocabulary (the largest are ~256K).
    constexpr int kMaxId = 1 << 24;
    auto check_id = [&](const json& id, auto describe_owner) {
        if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= kMaxId)
            fail("{}: {} has id {}, expected an integer in 0..{}", origin, describe_owner(), id.dump(),
                 kMaxId - 1);
        return id.get<int>();
    };
    std::unordered_map<std::string, int> key_ids;  // keys as spelled in the file
    key_ids.reserve(vocab.size());
    d->vocab_ids.reserve(vocab.size());
    int max_id = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        int id = check_id(it.value(), [&] { return "vocabulary entry " + json(it.key()).dump(); });
        key_ids.emplace(it.key(), id);
        max_id = std::max(max_id, id);
    }
    std::vector<AddedToken> added;
    for (const json& t : j.value("added_tokens", json::array())) {
        std::string content = t.at("content").get<std::string>();
        if (content.empty()) fail("{}: an added token has empty content", origin);
        int id = check_id(t.at("id"), [&] { return "added token " + json(content).dump(); });
        max_id = std::max(max_id, id);
        added.push_back({content, id, field(t, "single_word", false), field(t, "lstrip", false),
                         field(t, "rstrip", false)});
        bool normalized = field(t, "normalized", !field(t, "special", false));
        (normalized ? d->normalized_added : d->raw_added).add(added.back());
    }

    d->vocab_size = max_id + 1;
    std::vector<bool> used(d->vocab_size, false);
    d->pieces.resize(d->vocab_size);
    for (const auto& [key, id] : key_ids) {
        // A key outside the byte alphabet decodes to its own UTF-8, as in HF's
        // ByteLevel decoder, but no text can encode to it directly.
        std::optional<std::string> bytes = key_to_bytes(key);
        d->pieces[id] = bytes ? *bytes : key;
        used[id] = true;
        if (bytes) d->vocab_ids.emplace(*bytes, id);
    }
    for (const AddedToken& t : added) {
        d->pieces[t.id] = t.content;
        used[t.id] = true;
        d->added_ids.emplace(t.content, t.id);
    }
    for (int id = 0; id < d->vocab_size; ++id)
        if (!used[id]) d->pieces[id] = placeholder(id);

    for (int b = 0; b < 256; ++b) {
        std::string key;
        append_utf8(key, byte_chars()[b]);
        auto it = key_ids.find(key);
        d->byte_ids[b] = it == key_ids.end() ? -1 : it->second;
    }

    auto id_of = [&](const std::string& key, std::size_t rank) {
        auto it = key_ids.find(key);
        if (it == key_ids.end())
            fail("{}: merge #{} needs the token {}, which is not in model.vocab", origin, rank, json(key).dump());
        return it->second;
    };
    static const json no_merges = json::array();
    auto merges_it = model.find("merges");  // absent: a BPE without merges
    const json& merges = merges_it == model.end() ? no_merges : *merges_it;
    d->merges.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        auto [left, right] = parse_merge(merges[rank], rank, origin);
        int left_id = id_of(left, rank);
        int right_id = id_of(right, rank);
        int merged_id = id_of(left + right, rank);
        // Assignment, not emplace: a pair listed twice keeps its last rank, as in HF.
        d->merges[pair_key(left_id, right_id)] = {int(rank), merged_id};
    }

    std::string unk = field<std::string>(model, "unk_token", "");
    if (!unk.empty()) {
        auto it = key_ids.find(unk);
        if (it == key_ids.end()) fail("{}: unk_token {} is not in model.vocab", origin, json(unk).dump());
        d->unk_id = it->second;
    }
    d->fuse_unk = field(model, "fuse_unk", false);
    d->ignore_merges = field(model, "ignore_merges", false);
    d->kind = fmt::format("byte-level BPE ({} merges)", d->merges.size());
    return d;
}

}  // namespace

// --- Tokenizer ------------------------------------------------------------------

Tokenizer Tokenizer::from_json(const std::filesystem::path& tokenizer_json) {
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
        return Tokenizer(load(j, origin));
    } catch (const json::exception& e) {
        // A field missing or of the wrong type somewhere in the file.
        fail("{}: not a Hugging Face tokenizer.json this kit can read ({})", origin, e.what());
    }
}

Tokenizer Tokenizer::bytes(int vocab_size) {
    if (vocab_size <= 0) fail("the byte tokenizer needs a positive vocab_size, got {}", vocab_size);
    auto d = std::make_shared<Data>();
    d->kind = "bytes";
    d->vocab_size = vocab_size;
    for (int b = 0; b < 256; ++b) {
        d->byte_ids[b] = b < vocab_size ? b : -1;
        if (b < vocab_size) {
            d->pieces.emplace_back(1, char(b));
            d->vocab_ids.emplace(d->pieces.back(), b);
        }
    }
    return Tokenizer(std::move(d));
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
    const Data& d = *d_;
    // Added tokens first: those matched on the raw text, then (after the
    // identity normalization) the normalized ones in what is left.
    std::vector<Segment> raw, segments;
    d.raw_added.split(text, raw);
    for (const Segment& s : raw) {
        if (s.id >= 0)
            segments.push_back(s);
        else
            d.normalized_added.split(s.text, segments);
    }
    std::vector<int> ids;
    ids.reserve(text.size() / 3);
    MatchData md = new_match_data();
    std::vector<std::string> pieces;
    for (const Segment& s : segments) {
        if (s.id >= 0) {
            ids.push_back(s.id);
            continue;
        }
        pieces.assign(1, std::string(s.text));
        for (const PreTokenizerStep& step : d.pre_tokenizer) apply_step(step, pieces, md);
        for (const std::string& p : pieces) d.merge_piece(p, ids);
    }
    return ids;
}

std::string Tokenizer::decode(std::span<const int> ids) const {
    std::string out;
    for (int id : ids) out += d_->bytes_of(id);
    return out;
}

std::string Tokenizer::token_bytes(int id) const { return d_->bytes_of(id); }

int Tokenizer::vocab_size() const { return d_->vocab_size; }

std::string Tokenizer::kind() const { return d_->kind; }

int Tokenizer::token_id(std::string_view content) const {
    if (auto it = d_->added_ids.find(content); it != d_->added_ids.end()) return it->second;
    if (auto it = d_->vocab_ids.find(content); it != d_->vocab_ids.end()) return it->second;
    return -1;
}

// --- StreamDecoder ------------------------------------------------------------

std::string StreamDecoder::push(int id) {
    pending_ += tok_.token_bytes(id);
    return take_complete(false);
}

std::string StreamDecoder::flush() { return take_complete(true); }

// Emits every complete character of pending_; keeps an incomplete one at the
// end for the next push unless at_end.
std::string StreamDecoder::take_complete(bool at_end) {
    std::string out;
    std::size_t i = 0;
    while (i < pending_.size()) {
        Utf8Char c = next_utf8(pending_, i);
        if (c.status == Utf8Char::truncated && !at_end) break;
        if (c.status == Utf8Char::ok)
            out.append(pending_, i, c.len);
        else
            append_utf8(out, 0xFFFD);
        i += c.len;
    }
    pending_.erase(0, i);
    return out;
}

}  // namespace pd
