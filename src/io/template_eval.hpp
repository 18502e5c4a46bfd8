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

// `globals`: a JSON object of the template's variables (messages, bos_token...).
std::string render(const Body& body, const Json& globals);

}  // namespace pd::tok::tmpl
