// A chat template's tokens parsed into a syntax tree (template_ast.hpp), with
// every construct outside the kit's Jinja subset refused by name at load.
#pragma once

#include <string_view>

#include "io/template_ast.hpp"

namespace pd::tok::tmpl {

// Throws UserError naming the line and the construct: a statement other than
// set/for/if, a filter, test, function or method the evaluator lacks (or a
// test named in selectattr), a macro, a dict literal, unpacking in a set,
// nesting past 100 levels...
Body parse_template(std::string_view source);

}  // namespace pd::tok::tmpl
