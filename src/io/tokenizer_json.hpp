// Reading a Hugging Face tokenizer.json into the tokenizer's tables: what it
// accepts and rejects is listed in tokenizer.hpp.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "io/tokenizer_data.hpp"

namespace pd::tok {

// Throws UserError for a missing, unreadable or malformed file and for
// anything the kit does not implement.
std::shared_ptr<Tokenizer::Data> read_tokenizer_json(const std::filesystem::path& tokenizer_json);
// The same from the file's text; `origin` names it in messages.
std::shared_ptr<Tokenizer::Data> read_tokenizer_json_text(std::string_view text, const std::string& origin);

}  // namespace pd::tok
