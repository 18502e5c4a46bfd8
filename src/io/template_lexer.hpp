// A chat template's text cut into tokens: the text between tags, and inside
// {{ }} and {% %} the names, literals and operators. Whitespace control is
// applied here, with the settings transformers renders chat templates with:
// {%- and -%} (and {{- -}}, {#- -#}) strip all white space on that side,
// trim_blocks drops the first newline after a block or comment tag,
// lstrip_blocks drops the spaces before one on its own line ({%+ and +%} turn
// either off), and one newline at the end of the template is dropped
// (keep_trailing_newline false). Newlines are normalised to "\n" first.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/template_ast.hpp"

namespace pd::tok::tmpl {

struct Token {
    enum Kind { data, var_begin, var_end, block_begin, block_end, name, string, number, op, eof } kind;
    std::string text;  // data, name, op; string: the decoded literal
    Json value;        // number
    int line = 1;      // in the template, for messages
};

// Throws UserError on an unclosed tag, comment or string, or a character no token starts with.
std::vector<Token> lex_template(std::string_view source);

// Python's str.isspace() for one code point (what strip(), split() and trim use).
bool py_space(char32_t c);

}  // namespace pd::tok::tmpl
