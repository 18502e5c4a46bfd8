// Text <-> token ids: Hugging Face byte-level BPE tokenizers (GPT-2, SmolLM,
// Llama 3, Qwen 2 style tokenizer.json) and a plain byte tokenizer for models
// that come without one.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pd {

// Immutable once built: copies share their tables, and every const method may
// be called from several threads at once.
//
// What from_json() accepts, matching Hugging Face `tokenizers`:
//   model          BPE with merges as "a b" strings or ["a", "b"] pairs,
//                  ignore_merges, unk_token / fuse_unk. Rejected: Unigram,
//                  WordPiece, WordLevel, SentencePiece-style BPE
//                  (byte_fallback), dropout, subword prefixes/suffixes.
//   pre_tokenizer  ByteLevel (GPT-2 regex or none, add_prefix_space), Split
//                  (Regex or String pattern, behavior Isolated or Removed),
//                  Digits, and a Sequence of those ending in ByteLevel.
//   normalizer     none, or NFC, which is applied as the identity: exact for
//                  text already in NFC (what editors and terminals produce),
//                  not for decomposed accents.
//   decoder        ByteLevel (or none).
//   added_tokens   matched literally in the text before anything else (with
//                  their lstrip / rstrip / single_word options); they decode
//                  to their content.
// The post-processor is ignored: encode() never adds BOS/EOS.
//
// Invalid UTF-8 in the text is still encoded: each byte that is not part of a
// valid character becomes a pre-token of its own, so decode(encode(s)) == s
// for any bytes (as long as the tokenizer does not add a prefix space).
class Tokenizer {
public:
    // Throws UserError for a missing or malformed file and for anything the
    // kit does not implement (see above).
    static Tokenizer from_json(const std::filesystem::path& tokenizer_json);
    // The same from the file's text; `origin` names it in messages.
    static Tokenizer from_json_text(std::string_view text, const std::string& origin);
    // Id b <-> byte b for b < min(256, vocab_size); ids 256.. decode to the
    // visible placeholder "<|id|>".
    static Tokenizer bytes(int vocab_size);

    // Never adds BOS/EOS. Throws UserError only if the text holds a byte the
    // vocabulary has no token for (and there is no unk_token).
    std::vector<int> encode(std::string_view text) const;
    // Concatenated token bytes (possibly invalid UTF-8 if the ids cut a
    // character). Throws UserError for an id outside 0..vocab_size()-1.
    std::string decode(std::span<const int> ids) const;
    // Raw bytes of one token (may be part of a UTF-8 character); an unused id
    // below vocab_size() gives the placeholder "<|id|>".
    std::string token_bytes(int id) const;
    // Max id + 1 over the vocabulary and the added tokens.
    int vocab_size() const;
    // "byte-level BPE (N merges)" or "bytes".
    std::string kind() const;
    // The id of an added token with exactly this content, else of the
    // vocabulary entry with exactly these bytes (raw text, so " the" rather
    // than the file's "Ġthe"); -1 if there is none.
    int token_id(std::string_view content) const;

    struct Data;

private:
    explicit Tokenizer(std::shared_ptr<const Data> data) : d_(std::move(data)) {}
    std::shared_ptr<const Data> d_;
};

// Turns a stream of ids into printable text without ever splitting a UTF-8
// character: push() returns the newly complete text (possibly ""), flush()
// whatever is left. The output is always valid UTF-8: bytes that can never
// form a character, and an incomplete one left at flush(), become U+FFFD.
// For ids whose decode() is valid UTF-8, the pieces concatenate to decode().
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
    std::string push(int id);  // throws UserError for an id out of range
    std::string flush();

private:
    std::string take_complete(bool at_end);

    Tokenizer tok_;
    std::string pending_;  // bytes of a character still waiting for its end
};

}  // namespace pd
