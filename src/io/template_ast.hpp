// The syntax tree of a chat template: what template_parser builds and
// template_eval walks. Only the Jinja subset of chat_template.hpp has a node
// here; the parser refuses the rest, so the evaluator never meets it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pd::tok::tmpl {

// Template values are JSON as the request gave it, keys in their order
// (tojson writes them so, as Python's dicts keep insertion order).
using Json = nlohmann::ordered_json;

struct Expr;
using ExprP = std::shared_ptr<Expr>;  // shared: a parsed template is copied whole, never changed

struct Expr {
    enum class Kind {
        literal,  // value
        list,     // [args...]
        name,     // name
        attr,     // args[0].name
        index,    // args[0][args[1]]
        slice,    // args[0][args[1]:args[2]:args[3]], any part null
        call,     // name(args...), a global function; kwargs name keyword arguments
        method,   // args[0].name(args[1...])
        filter,   // args[0] | name(args[1...]); kwargs as for call
        test,     // args[0] is [not] name [args[1]]
        cond,     // args[1] if args[0] else args[2] (null: no else, undefined)
        unary,    // name ("not", "-", "+") args[0]
        binary,   // args[0] name args[1]: or and == != < > <= >= in "not in" + - * / // % ~
    } kind;
    Json value;
    std::string name;
    std::vector<ExprP> args;
    std::vector<std::string> kwargs;  // call: the keyword of each argument ("" for positional)
    bool negated = false;             // test: "is not"
    int depth = 1;                    // 1 + the deepest argument's; the parser bounds it, so evaluation's recursion is
};

struct Node;
using Body = std::vector<Node>;

struct Node {
    enum class Kind {
        text,    // text, as it appears after whitespace control
        output,  // {{ expr }}
        set,     // {% set target[.attr] = expr %}
        for_,    // {% for target in expr [if filter] %} body {% endfor %}; targets when unpacking (a, b)
        if_,     // {% if %} / elif / else: branches in order, the else's condition null
    } kind;
    std::string text;    // text; set/for: the variable
    std::string attr;    // set: the namespace attribute, "" for a plain variable
    ExprP expr;
    Body body;
    std::vector<std::pair<ExprP, Body>> branches;
    std::vector<std::string> targets;  // for: {% for a, b in ... %} unpacks each item into these
    ExprP filter;                      // for: the items an "if" after the sequence keeps, or null
};

}  // namespace pd::tok::tmpl
