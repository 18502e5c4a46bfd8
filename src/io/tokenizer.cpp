// BPE as Hugging Face `tokenizers` runs it, in the same order:
//   1. split the text around added tokens (special tokens such as <|endoftext|>;
//      added_tokens.hpp),
//   2. normalize each remaining segment (normalizer.hpp) and split it around
//      the added tokens that are matched on normalized text,
//   3. pre-tokenize what is left into pieces (regex splits, Metaspace;
//      pretokenizer.hpp),
//   4. merge the bytes or characters of each piece by rank (BPE; bpe.cpp).
// The tables all three read are in tokenizer_data.hpp, filled from the file
// by tokenizer_json.cpp. Encoding and decoding work on raw bytes throughout.
// Decoding joins each token's text (tokenizer_json.cpp applied the decoder's
// per-token rules to it) after the rules for the start of a text.
#include "io/tokenizer.hpp"

#include "common.hpp"
#include "io/tokenizer_data.hpp"
#include "io/tokenizer_json.hpp"
#include "io/utf8.hpp"

namespace pd {

std::string tok::placeholder(int id) { return fmt::format("<|{}|>", id); }

std::string Tokenizer::Data::bytes_of(int id) const {
    if (id < 0 || id >= vocab_size)
        fail("token id {} is out of range: this {} tokenizer has ids 0..{}; check that the "
             "tokenizer belongs to the model that produced the ids",
             id, kind, vocab_size - 1);
    return std::size_t(id) < pieces.size() ? pieces[id] : tok::placeholder(id);
}

// --- Tokenizer ------------------------------------------------------------------

Tokenizer Tokenizer::from_json(const std::filesystem::path& tokenizer_json) {
    return Tokenizer(tok::read_tokenizer_json(tokenizer_json));
}

Tokenizer Tokenizer::from_json_text(std::string_view text, const std::string& origin) {
    return Tokenizer(tok::read_tokenizer_json_text(text, origin));
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
    std::vector<int> ids;
    ids.reserve(text.size() / 3);
    tok::MatchData md = tok::new_match_data();
    std::vector<tok::Segment> raw, segments;
    std::vector<std::string> pieces;
    std::string normalized;
    d.raw_added.split(text, raw);
    for (const tok::Segment& s : raw) {
        if (s.id >= 0) {
            ids.push_back(s.id);
            continue;
        }
        normalized.assign(s.text);
        tok::normalize(d.normalizer, normalized, md);
        segments.clear();
        d.normalized_added.split(normalized, segments);
        for (const tok::Segment& n : segments) {
            if (n.id >= 0) {
                ids.push_back(n.id);
                continue;
            }
            bool at_text_start = s.text.data() == text.data() && n.text.data() == normalized.data();
            pieces.assign(1, std::string(n.text));
            for (const tok::PreTokenizerStep& step : d.pre_tokenizer) tok::apply_step(step, pieces, md, at_text_start);
            for (const std::string& p : pieces) d.merge_piece(p, ids);
        }
    }
    return ids;
}

std::string Tokenizer::decode(std::span<const int> ids) const {
    std::string out;
    DecodeState state;
    for (int id : ids) decode_next(id, state, out);
    return out;
}

void Tokenizer::decode_next(int id, DecodeState& state, std::string& out) const {
    const Data& d = *d_;
    const tok::DecoderRules& rules = d.decoder;
    std::string text = d.bytes_of(id);
    // Metaspace's first token loses its replacements, which the pieces
    // already hold as spaces (a byte token's own space stays).
    bool byte_token = text.size() == 1 && d.byte_ids[static_cast<unsigned char>(text[0])] == id;
    if (state.first && rules.metaspace_first && !byte_token) std::erase(text, ' ');
    state.first = false;
    std::size_t cut = 0;
    while (!state.started && state.stripped < rules.strip_start && text.compare(cut, rules.strip.size(), rules.strip) == 0) {
        cut += rules.strip.size();
        ++state.stripped;
    }
    if (cut < text.size()) state.started = true;
    out.append(text, cut);
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
    tok_.decode_next(id, state_, pending_);
    return take_complete(false);
}

std::string StreamDecoder::flush() { return take_complete(true); }

// Emits every complete character of pending_; keeps an incomplete one at the
// end for the next push unless at_end.
std::string StreamDecoder::take_complete(bool at_end) {
    std::string out;
    std::size_t i = 0;
    while (i < pending_.size()) {
        tok::Utf8Char c = tok::next_utf8(pending_, i);
        if (c.status == tok::Utf8Char::truncated && !at_end) break;
        if (c.status == tok::Utf8Char::ok)
            out.append(pending_, i, c.len);
        else
            tok::append_utf8(out, 0xFFFD);
        i += c.len;
    }
    pending_.erase(0, i);
    return out;
}

}  // namespace pd
