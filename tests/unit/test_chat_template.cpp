// The chat-template engine (io/chat_template.hpp) against strings worked out
// by hand from Jinja2's rules with transformers' settings (trim_blocks,
// lstrip_blocks). tests/tokenizers/test_chat_templates.py renders the real
// templates with Jinja2 itself and compares byte for byte.
#include <doctest/doctest.h>

#include <ctime>
#include <string>

#include "check.hpp"
#include "common.hpp"
#include "io/chat_template.hpp"
#include "io/template_parser.hpp"

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
    return pd::test::user_error_of([&] { ChatTemplate(source, kTokens); });
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
    CHECK(refusal("{{ range(3) }}").find("the function range()") != std::string::npos);
    CHECK(refusal("{% set a, b = x %}").find("unpacking") != std::string::npos);
    CHECK(refusal("{% for a in x %}{% else %}{% endfor %}").find("{% else %}") != std::string::npos);
    CHECK(refusal("{{ loop.cycle }}").find("loop.cycle") != std::string::npos);
    CHECK(refusal("{{ x is divisibleby 3 }}").find("is divisibleby") != std::string::npos);
    // The neighbours of what Mistral Nemo's template uses, refused by name.
    CHECK(refusal("{{ x|map(attribute='a')|list }}").find("the filter |map") != std::string::npos);
    CHECK(refusal("{{ x|select('none')|list }}").find("the filter |select") != std::string::npos);
    CHECK(refusal("{{ x|first }}").find("the filter |first") != std::string::npos);
    CHECK(refusal("{{ x|selectattr('a', 'divisibleby', 3)|list }}").find("the test 'divisibleby' (in |selectattr)") != std::string::npos);
    CHECK(refusal("{{ x|rejectattr('a', 'equalto')|list }}").find("'equalto' with 0 argument(s)") != std::string::npos);
    CHECK(refusal("{{ x is equalto }}").find("'equalto' with 0 argument(s)") != std::string::npos);
    CHECK(refusal("{{ x is defined 3 }}").find("'defined' with 1 argument(s)") != std::string::npos);
    CHECK(refusal("{{ x|tojson(sort_keys=true) }}").find("|tojson(sort_keys=...)") != std::string::npos);
    CHECK(refusal("{{ x.keys() }}").find("the method .keys()") != std::string::npos);
    // Jinja2 reads no inline if in an {% if %} tag, nor a trailing comma in a loop target.
    CHECK(refusal("{% if a if b %}{% endif %}").find("expected '%}', found 'if'") != std::string::npos);
    CHECK(refusal("{% for a, in x %}{% endfor %}").find("expected 'in'") != std::string::npos);
    CHECK(refusal("{{ {'a': 1} }}").find("dict literal") != std::string::npos);
    CHECK(refusal("{% if x %}").find("never closed") != std::string::npos);
    CHECK(refusal("{{ x").find("never closed") != std::string::npos);
    CHECK(refusal("a\n{{ x ! }}").find("line 2") != std::string::npos);
    // What Jinja2 refuses while rendering is an error, never a guess.
    CHECK(render_error("{{ 'a' + 1 }}", Json::array()).find("'+' on a string") != std::string::npos);
    CHECK(render_error("{{ messages }}", Json::array()).find("printing a list") != std::string::npos);
    CHECK(render_error("{{ nothing.attr }}", Json::array()).find("undefined") != std::string::npos);
}

// The expected strings of the cases below are Jinja2 3.1.6's renderings
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, transformers'
// tojson), checked by hand against it when they were written.

namespace {

const Json kMixed = Json::parse(R"([{"role": "system", "content": "S", "x": 1}, {"content": "c", "role": "user"},
    {"role": "user", "content": "d", "tool_calls": [1]}, {"role": "assistant", "content": ""}])");

}  // namespace

TEST_CASE("engine.chat_template.inline_if") {
    // Gemma 3: '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "").
    CHECK(render("{{ 'a' if x else 'b' }}|{{ 'c' if 1 }}|{{ 'd' if 0 }}|{{ 1 if 0 else 2 if 0 else 3 }}|"
                 "{{ 'x' ~ 'y' if false else 'z' }}|{{ ('p' if true else 'q') ~ 'r' }}|"
                 "{% set v = 'no' if false %}{{ v is defined }}") == "b|c||3|z|pr|False");
}

TEST_CASE("engine.chat_template.strftime_now") {
    // Llama 3.2: strftime_now("%d %b %Y"), Python's datetime.now().strftime: the C
    // library's on the local time, but %z and %Z empty (a naive time) and %f the microseconds.
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char today[64];
    std::strftime(today, sizeof today, "%d %b %Y", &local);
    CHECK(render("{{ strftime_now('%d %b %Y') }}") == today);  // (fails only across midnight)
    CHECK(render("{{ strftime_now('%z%Z|%%|%') }}") == "|%|%");
    const std::string micro = render("{{ strftime_now('%f') }}");
    CHECK((micro.size() == 6 && micro.find_first_not_of("0123456789") == std::string::npos));
    CHECK(render("{{ strftime_now is defined }}{{ raise_exception is defined }}{{ range is defined }}{{ nothing is defined }}") ==
          "TrueTrueTrueFalse");
    CHECK(render_error("{{ strftime_now() }}", Json::array()).find("needs a format") != std::string::npos);
}

TEST_CASE("engine.chat_template.selectattr_and_tests") {
    // Mistral Nemo: loop_messages | selectattr("role", "equalto", "user") | list, and a loop
    // over rejectattr(...) | selectattr("tool_calls", "undefined").
    CHECK(render("{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|"
                 "{% for m in messages|rejectattr('role', 'equalto', 'system')|selectattr('tool_calls', 'undefined') %}"
                 "{{ m.content }}{% endfor %}", kMixed) == "2|c");
    CHECK(render("{{ messages|selectattr('content')|list|length }}|{{ messages|rejectattr('x')|list|length }}|"
                 "{{ none|selectattr('a')|list|tojson }}|{{ 'ab'|list|tojson }}|{{ messages[0]|list|tojson }}|"
                 "{{ 'u' is equalto 'u' }}{{ 1 is equalto(1.0) }}{{ true is equalto 1 }}{{ 'a' is not equalto 'a' }}",
                 kMixed) == "3|3|[]|[\"a\", \"b\"]|[\"role\", \"content\", \"x\"]|TrueTrueTrueFalse");
    // An attribute path: Jinja2 reads "a.0" as ["a"][0].
    CHECK(render("{{ messages|selectattr('tool_calls.0', 'equalto', 1)|list|length }}",
                 Json::parse(R"([{"tool_calls": [1]}, {"tool_calls": [2]}])")) == "1");
    // A generator runs out after one pass: where Jinja2 would loop over nothing, the kit refuses.
    CHECK(render_error("{% set g = messages|selectattr('content') %}{% for m in g %}{% endfor %}{% for m in g %}{% endfor %}",
                       kMixed).find("a second time") != std::string::npos);
    CHECK(render_error("{{ messages|selectattr('content') }}", kMixed).find("printing a generator") != std::string::npos);
    CHECK(render_error("{% set t = 'odd' %}{{ messages|selectattr('role', t)|list }}", kMixed).find("no test named 'odd'") != std::string::npos);
}

TEST_CASE("engine.chat_template.loops_unpack_and_filter") {
    // Mistral Nemo: {% for key, val in tool.items() if key != "return" %}; loop.* count the kept items.
    CHECK(render("{% for key, val in messages[0].items() if key != 'role' %}{{ key }}={{ val }} {{ loop.index }}/"
                 "{{ loop.length }}{{ loop.last }};{% endfor %}|{% for m in messages if m.role == 'user' %}"
                 "{{ loop.index0 }}{{ m.content }}{% endfor %}", kMixed) == "content=S 1/2False;x=1 2/2True;|0c1d");
    CHECK(render("{% for a, b in ['xy', [1, 2]] %}{{ a }}{{ b }}{% endfor %}") == "xy12");
    CHECK(render_error("{% for a, b in ['xyz'] %}{% endfor %}", Json::array()).find("unpacking 3 values into 2") != std::string::npos);
    CHECK(render_error("{% for a, b in [1] %}{% endfor %}", Json::array()).find("unpacking a int") != std::string::npos);
}

TEST_CASE("engine.chat_template.string_tojson_indent_equality") {
    CHECK(render("{{ 1|string ~ none|string ~ true|string ~ x|string ~ 2.50|string }}") == "1NoneTrue2.5");
    CHECK(render("{{ messages[0]|tojson(indent=2) }}|{{ []|tojson(indent=4) }}|{{ [1, [2, 'é']]|tojson(indent=0) }}", kMixed) ==
          "{\n  \"role\": \"system\",\n  \"content\": \"S\",\n  \"x\": 1\n}|[]|[\n1,\n[\n2,\n\"é\"\n]\n]");
    CHECK(render_error("{{ [1]|string }}", Json::array()).find("printing a list") != std::string::npos);
    // Python's ==: dicts whatever their keys' order, True == 1 inside lists too.
    CHECK(render("{{ messages[0] == messages[1] }}{{ [true, 1.0] == [1, 1] }}{{ 5[0] is defined }}",
                 Json::parse(R"([{"a": 1, "b": [true]}, {"b": [1], "a": 1.0}])")) == "TrueTrueFalse");
}

TEST_CASE("engine.chat_template.limits") {
    // Nesting is bounded (the parser and evaluator recurse per level); so are the
    // steps and the text one render may take, and integers stay within 64 bits.
    const std::string deep = std::string(150, '(') + "1" + std::string(150, ')');
    CHECK(refusal("{{ " + deep + " }}").find("nested more than 100") != std::string::npos);
    std::string chain = "1";
    for (int i = 0; i < 150; ++i) chain += " + 1";
    CHECK(refusal("{{ " + chain + " }}").find("nested more than 100") != std::string::npos);
    std::string blocks;
    for (int i = 0; i < 150; ++i) blocks += "{% if 1 %}";
    CHECK(refusal(blocks).find("nested more than 100") != std::string::npos);
    CHECK(render_error("{% set ns = namespace(x=1) %}{% for a in messages %}{% set ns.x = [ns.x] %}{% endfor %}",
                       Json(std::vector<int>(250, 0))).find("nested more than 200") != std::string::npos);
    CHECK(render_error("{{ -(-(999999999999999999 * 9 + 223372036854775816) - 1) }}", Json::array()).find("64 bits") !=
          std::string::npos);
    CHECK(render_error("{{ messages[0] + 1 }}", Json::parse("[18446744073709551615]")).find("64 bits") != std::string::npos);
    CHECK(render("{{ messages[0] }}", Json::parse("[18446744073709551615]")) == "18446744073709551615");
}

TEST_CASE("engine.chat_template.render_limits") {
    // With small limits (the defaults take seconds to reach): 300^3 loop turns
    // stop at the step limit, a string doubled each turn at the text limit.
    const pd::tok::tmpl::Limits limits{100'000, 1 << 20};
    const Json vars = {{"messages", Json(std::vector<int>(300, 0))}};
    auto error = [&](const std::string& source) {
        try {
            pd::tok::tmpl::render(pd::tok::tmpl::parse_template(source), vars, limits);
        } catch (const pd::tok::tmpl::RenderError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK(error("{% for a in messages %}{% for b in messages %}{% for c in messages %}{% endfor %}{% endfor %}{% endfor %}")
              .find("ran past 100000 steps") != std::string::npos);
    CHECK(error("{% set ns = namespace(s='ab') %}{% for a in messages %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
              .find("more than 1048576 bytes of text") != std::string::npos);
    CHECK(error("{% for a in messages %}{{ a }}{% endfor %}").empty());
}

TEST_CASE("engine.chat_template.reads_share_memory") {
    // Qwen's templates read messages[i] in their loop: a read shares the list's
    // memory. When each read copied the list, 20000 messages took minutes here.
    Json many = Json::array();
    for (int i = 0; i < 20000; ++i) many.push_back({{"role", "user"}, {"content", "x"}});
    const std::string out = render("{% for m in messages %}{{ messages[loop.index0].content }}{{ messages|length }}{% endfor %}", many);
    CHECK(out.size() == 20000 * 6);
}
