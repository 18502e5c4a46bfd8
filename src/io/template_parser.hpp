// A chat template's tokens parsed into a syntax tree (template_ast.hpp), with
// every construct outside the kit's Jinja subset refused by name at load.
#pragma once

#include <string_view>

#include "io/template_ast.hpp"

namespace pd::tok::tmpl {

// Throws UserError naming the line and the construct: a statement other than
// set/for/if, a filter, test, function or method the evaluator lacks, a
// macro, an inline if, a dict literal, tuple unpacking...
Body parse_template(std::string_view source);

}  // namespace pd::tok::tmpl
