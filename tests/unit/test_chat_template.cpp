// The chat-template engine (io/chat_template.hpp) against strings worked out
// by hand from Jinja2's rules with transformers' settings (trim_blocks,
// lstrip_blocks). tests/tokenizers/test_chat_templates.py renders the real
// templates with Jinja2 itself and compares byte for byte.
#include <doctest/doctest.h>

#include <string>

#include "common.hpp"
#include "io/chat_template.hpp"

namespace {

using pd::tok::ChatTemplate;
using Json = pd::tok::tmpl::Json;

const Json kTokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};

std::string render(const std::string& source, const Json& messages = Json::array(), bool gen = true) {
    return ChatTemplate(source, kTokens).render(messages, gen);
}

Json chat(std::initializer_list<std::pair<const char*, const char*>> turns) {
    Json m = Json::array();
    for (const auto& [role, content] : turns) m.push_back({{"role", role}, {"content", content}});
    return m;
}

std::string refusal(const std::string& source) {
    try {
        ChatTemplate(source, kTokens);
    } catch (const pd::UserError& e) {
        return e.what();
    }
    return "";
}

std::string render_error(const std::string& source, const Json& messages) {
    try {
        render(source, messages);
    } catch (const pd::tok::tmpl::RenderError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("engine.chat_template.expressions") {
    CHECK(render("{{ 'a' + \"b\" ~ 1 ~ none ~ true }}") == "ab1NoneTrue");
    CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 * 3 - 1 }}") == "3 -4 2 3.5 5");
    CHECK(render("{{ 'x' in 'axb' }}{{ 3 in [1, 2] }}{{ 'k' not in 'abc' }}") == "TrueFalseTrue");
    CHECK(render("{{ not 1 == 2 and (0 or 'y') }}") == "y");
    CHECK(render("{{ '  hi \\n'|trim|upper }}|{{ 'hELLO'|capitalize }}|{{ 'AbC'|lower }}") == "HI|Hello|abc");
    CHECK(render("{{ 'héllo'|length }} {{ [1,2,3]|length }} {{ nothing|length }}") == "5 3 0");
    CHECK(render("{{ x|default('d') }}{{ ''|default('e', true) }}{{ 'f'|default('g') }}") == "def");
}

TEST_CASE("engine.chat_template.integer_edges") {
    // Qwen3's template subtracts loop.index0, 0 on the first turn: a subtraction
    // once divided by it and killed the server (SIGFPE).
    CHECK(render("{% for m in messages %}{{ (messages|length - 1) - loop.index0 }}{% endfor %}",
                 chat({{"user", "a"}, {"user", "b"}})) == "10");
    const std::string big = "(999999999999999999 * 9 + 223372036854775816)";  // 2^63 - 1, past the lexer's 18 digits
    CHECK(render("{{ 5 - 0 }} {{ 0 * 3 }} {{ " + big + " }} {{ -" + big + " - 1 }}") ==
          "5 0 9223372036854775807 -9223372036854775808");
    CHECK(render_error("{{ 1 // 0 }}", Json::array()).find("division by zero") != std::string::npos);
    CHECK(render_error("{{ 1 % 0 }}", Json::array()).find("division by zero") != std::string::npos);
    CHECK(render_error("{{ " + big + " + 1 }}", Json::array()).find("64 bits") != std::string::npos);
    CHECK(render_error("{{ (-" + big + " - 1) // -1 }}", Json::array()).find("64 bits") != std::string::npos);
}

TEST_CASE("engine.chat_template.strings_and_slices") {
    CHECK(render("{{ 'abcdef'[1:3] }}{{ 'abc'[::-1] }}{{ 'abc'[-1] }}{{ 'héé'[1] }}") == "bccbacé");
    CHECK(render("{% for m in messages[1:] %}{{ m.content }}{% endfor %}", chat({{"a", "1"}, {"b", "2"}, {"c", "3"}})) == "23");
    CHECK(render("{% for m in messages[::-1] %}{{ m['role'] }}{% endfor %}", chat({{"a", "1"}, {"b", "2"}})) == "ba");
    CHECK(render("{{ 'x</t>y</t>z'.split('</t>')[-1] }}|{{ ' a  b '.split()|length }}") == "z|2");
    CHECK(render("{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'xyx'.strip('x') }}|{{ ' q '.rstrip() }}") == "x\n|y| q");
    CHECK(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('b') }}{{ 'a-b'.replace('-', '+') }}") == "TrueFalsea+b");
    CHECK(render("{{ [1, 'a']|tojson }} {{ 'é\"<'|tojson }} {{ messages[0]|tojson }}", chat({{"user", "hi"}})) ==
          "[1, \"a\"] \"é\\\"<\" {\"role\": \"user\", \"content\": \"hi\"}");
}

TEST_CASE("engine.chat_template.statements_and_scopes") {
    // A {% set %} inside a loop ends with it; a namespace carries values out.
    CHECK(render("{% set x = 1 %}{% for m in messages %}{% set x = 2 %}{% endfor %}{{ x }}", chat({{"u", "a"}})) == "1");
    CHECK(render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + loop.index %}{% endfor %}{{ ns.n }}",
                 chat({{"u", "a"}, {"u", "b"}, {"u", "c"}})) == "6");
    CHECK(render("{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }},{% endfor %}",
                 chat({{"u", "a"}, {"u", "b"}})) == "0TrueFalse2,1FalseTrue2,");
    CHECK(render("{% if 0 %}a{% elif x is defined %}b{% elif none is none and 'q' is string %}c{% else %}d{% endif %}") == "c");
    CHECK(render("{% if x is not defined and 1 is number and not 1 is string %}ok{% endif %}") == "ok");
}

TEST_CASE("engine.chat_template.whitespace_control") {
    // trim_blocks drops the newline after a block tag, lstrip_blocks the indent before one.
    CHECK(render("{% if true %}\n  a\n  {% endif %}\nb\n") == "  a\nb");
    CHECK(render("x  {%- if true -%}  \n y {{- ' z ' -}} \n w{% endif %}") == "xy z w");
    CHECK(render("{# note #}\n{{ 'a' }}{#- gone -#}  b") == "ab");
    CHECK(render("a\r\n{%+ if true %}b{% endif +%}\nc") == "a\nb\nc");
}

TEST_CASE("engine.chat_template.chat_formats") {
    const std::string smol =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are helpful<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    CHECK(render(smol, chat({{"user", "Hi"}})) ==
          "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    CHECK(render(smol, chat({{"user", "Hi"}}), false) == "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    const std::string gemma =
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}"
        "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
        "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
    CHECK(render(gemma, chat({{"user", " Hi "}, {"assistant", "Yo"}, {"user", "?"}})) ==
          "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n<start_of_turn>user\n?<end_of_turn>\n"
          "<start_of_turn>model\n");
    CHECK(render_error(gemma, chat({{"assistant", "x"}})).find("Conversation roles must alternate") != std::string::npos);
}

TEST_CASE("engine.chat_template.refusals") {
    // Everything outside the subset is refused at load, by name.
    CHECK(refusal("{% macro f() %}{% endmacro %}").find("{% macro %}") != std::string::npos);
    CHECK(refusal("{{ x | join(', ') }}").find("the filter |join") != std::string::npos);
    CHECK(refusal("{{ x.items() }}").find(".items()") != std::string::npos);
    CHECK(refusal("{{ strftime_now('%d') }}").find("strftime_now()") != std::string::npos);
    CHECK(refusal("{{ 'a' if x else 'b' }}").find("inline if") != std::string::npos);
    CHECK(refusal("{% for a, b in x %}{% endfor %}").find("unpacking") != std::string::npos);
    CHECK(refusal("{% for a in x %}{% else %}{% endfor %}").find("{% else %}") != std::string::npos);
    CHECK(refusal("{{ loop.cycle }}").find("loop.cycle") != std::string::npos);
    CHECK(refusal("{{ x is divisibleby 3 }}").find("is divisibleby") != std::string::npos);
    CHECK(refusal("{{ {'a': 1} }}").find("dict literal") != std::string::npos);
    CHECK(refusal("{% if x %}").find("never closed") != std::string::npos);
    CHECK(refusal("{{ x").find("never closed") != std::string::npos);
    CHECK(refusal("a\n{{ x ! }}").find("line 2") != std::string::npos);
    // What Jinja2 refuses while rendering is an error, never a guess.
    CHECK(render_error("{{ 'a' + 1 }}", Json::array()).find("'+' on a string") != std::string::npos);
    CHECK(render_error("{{ messages }}", Json::array()).find("printing a list") != std::string::npos);
    CHECK(render_error("{{ nothing.attr }}", Json::array()).find("undefined") != std::string::npos);
}
