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
// What from_json() accepts, matching Hugging Face `tokenizers` (and
// transformers.js); every other type or field is refused by name:
//   model          BPE with merges as "a b" strings or ["a", "b"] pairs,
//                  ignore_merges, unk_token / fuse_unk, byte_fallback
//                  ("<0xNN>" tokens). Rejected: Unigram, WordPiece, WordLevel,
//                  dropout, subword prefixes/suffixes.
//   normalizer     NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend,
//                  Sequence (normalizer.hpp).
//   pre_tokenizer  ByteLevel (GPT-2 regex or none, add_prefix_space), Split
//                  (Regex or String pattern, behavior Isolated or Removed),
//                  Digits, Metaspace (replacement, prepend_scheme, split), and
//                  a Sequence of those with ByteLevel, if any, last. With
//                  ByteLevel the vocabulary spells bytes (GPT-2, Llama 3,
//                  Qwen); without it, text (SentencePiece style: Llama 2,
//                  Mistral, TinyLlama).
//   decoder        ByteLevel; or Replace, ByteFallback, Fuse, Strip (after
//                  Fuse, from the start), Metaspace and Sequences of them.
//   added_tokens   matched literally in the text before anything else (with
//                  their lstrip / rstrip / single_word options); normalized
//                  ones after the normalizer. They decode to their content.
//   truncation, padding  must be null.
// The post-processor is ignored: encode() never adds BOS/EOS.
// tokenizer_config.json beside the file is checked (tokenizer_config.hpp).
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
    // The tokens' bytes one after another, as decode_next() gives them
    // (possibly invalid UTF-8 if the ids cut a character, where HF would put
    // U+FFFD). Throws UserError for an id outside 0..vocab_size()-1.
    std::string decode(std::span<const int> ids) const;
    // Where a decode stands: the decoder treats the start of a text apart
    // (a Strip decoder drops its leading spaces, Metaspace its first
    // token's "▁").
    struct DecodeState {
        bool first = true;  // the next token is the text's first
        int stripped = 0;   // leading characters the Strip decoder has dropped
        bool started = false;  // a character has been kept: Strip is done
    };
    // Appends the bytes id `id` adds to the text decoded so far.
    void decode_next(int id, DecodeState& state, std::string& out) const;
    // Bytes of one token on its own (may be part of a UTF-8 character); an
    // unused id below vocab_size() gives the placeholder "<|id|>".
    std::string token_bytes(int id) const;
    // Max id + 1 over the vocabulary and the added tokens.
    int vocab_size() const;
    // "byte-level BPE (N merges)", "SentencePiece-style BPE (N merges)" or "bytes".
    std::string kind() const;
    // The id of an added token with exactly this content, else of the
    // vocabulary entry with exactly these bytes (for a byte-level vocabulary
    // raw text, so " the" rather than the file's "Ġthe"; otherwise the key as
    // written, "▁the"); -1 if there is none.
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
    Tokenizer::DecodeState state_;
    std::string pending_;  // bytes of a character still waiting for its end
};

}  // namespace pd
