// Renders a parsed chat template (template_parser.hpp) with its variables.
// Values behave as in Jinja2 under transformers' settings: an undefined
// name prints as "" and is false, but adding to it, taking its attribute or
// calling a method on it is an error; tojson writes as transformers' own
// tojson filter does (json.dumps with ensure_ascii=False, keys in order).
#pragma once

#include <stdexcept>
#include <string>

#include "io/template_ast.hpp"

namespace pd::tok::tmpl {

// raise_exception(msg), or an operation Jinja2 would refuse (adding a string
// to a number, an undefined value's attribute, printing a list...): what a
// request with such messages is answered with.
struct RenderError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Bounds on what one render may do, so that no template or messages hang the
// process or exhaust its memory: the nodes, loop turns and expressions
// evaluated, and the bytes of text made or copied (each string an expression
// gives, and the output). Real templates take a few dozen steps and a few
// copies of the text a message.
struct Limits {
    long long steps = 5'000'000;
    std::size_t text_bytes = std::size_t(256) << 20;
};

// `globals`: a JSON object of the template's variables (messages, bos_token...).
std::string render(const Body& body, const Json& globals, const Limits& limits = {});

}  // namespace pd::tok::tmpl
