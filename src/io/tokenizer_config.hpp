// tokenizer_config.json, the transformers side of a tokenizer: checked for
// keys that would change how transformers encodes with the tokenizer.json
// beside it and that the kit does not implement.
#pragma once

#include <filesystem>

namespace pd::tok {

// Throws UserError for an unreadable file or such a key (see the .cpp for
// each key the kit reads and why the others do not change encode/decode).
void check_tokenizer_config(const std::filesystem::path& tokenizer_config);

}  // namespace pd::tok
