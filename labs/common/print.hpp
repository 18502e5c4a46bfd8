// Printing that more than one lab program needs: token text, id lists, byte
// sizes and tensor shapes, each written the same way in every lab.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "io/tokenizer.hpp"

namespace pd::lab {

// A token's bytes in double quotes, printable whatever they hold: ASCII as is,
// \n \t \" escaped, any other byte as \xNN (a token can end inside a character).
std::string quoted(const std::string& bytes);

// The quoted text of one token id.
std::string quoted_token(const Tokenizer& tok, int id);

// "1, 2, 3".
std::string id_list(const std::vector<int>& ids);

// The ids' text, always valid UTF-8 (a character cut by a token boundary becomes U+FFFD).
std::string text_of(const Tokenizer& tok, const std::vector<int>& ids);

// "512 B", "1.5 KiB", "3.0 GiB": binary units, one decimal above bytes.
std::string human_bytes(double bytes);

// A tensor shape as the handouts write it: {1, 8, 4, 64} -> "[1, 8, 4, 64]".
std::string shape(std::initializer_list<long> dims);

// "synthetic:llama,dim=512" -> "llama,dim=512"; a spec without the prefix is returned as is.
std::string synthetic_body(const std::string& spec);

}  // namespace pd::lab
