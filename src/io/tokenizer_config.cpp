// The keys of tokenizer_config.json and what they do when transformers (and
// transformers.js) load a tokenizer.json:
//   refused when set: split_special_tokens (added tokens then encode as plain
//     text), add_prefix_space true (transformers rebuilds a Llama tokenizer
//     from its SentencePiece model, or rewrites GPT-2's ByteLevel), remove_space
//     and do_lowercase_and_remove_accent (transformers.js rewrites the text).
//   no effect on encode()/decode(): legacy (used only when converting a
//     SentencePiece model, which a tokenizer.json already is), add_bos_token /
//     add_eos_token (encode() never adds special tokens), bos/eos/unk/pad
//     tokens, added_tokens_decoder and additional_special_tokens (the same
//     tokens as tokenizer.json's added_tokens), clean_up_tokenization_spaces
//     (a display option of transformers' decode; the kit's decode and streams
//     always return the exact text, as vLLM's and llama.cpp's streams do),
//     chat_template, model_max_length, tokenizer_class and the rest.
#include "io/tokenizer_config.hpp"

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd::tok {

void check_tokenizer_config(const std::filesystem::path& tokenizer_config) {
    std::string origin = tokenizer_config.string();
    std::string text = read_regular_file(tokenizer_config, kMaxJsonFileBytes, "");
    Json root = parse_json(text, origin);
    JsonObject config(root, origin);
    for (const char* key : {"split_special_tokens", "add_prefix_space", "remove_space", "do_lowercase_and_remove_accent"})
        if (config.bool_or(key, false))
            fail("{}: \"{}\": true changes how transformers encodes text with tokenizer.json, and the kit "
                 "does not implement it",
                 origin, key);
}

}  // namespace pd::tok
