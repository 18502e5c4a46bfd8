// Reading a Hugging Face tokenizer.json into the tokenizer's tables: what it
// accepts and rejects is listed in tokenizer.hpp.
#pragma once

#include <filesystem>
#include <memory>

#include "tokenizer_data.hpp"

namespace pd::tok {

// Throws UserError for a missing, unreadable or malformed file and for
// anything the kit does not implement.
std::shared_ptr<Tokenizer::Data> read_tokenizer_json(const std::filesystem::path& tokenizer_json);

}  // namespace pd::tok
