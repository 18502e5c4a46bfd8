#include "io/template_parser.hpp"

#include <algorithm>
#include <initializer_list>

#include "common.hpp"
#include "io/template_lexer.hpp"

namespace pd::tok::tmpl {

namespace {

// What the evaluator (template_eval.cpp) implements; anything else is refused here.
const std::vector<std::string_view> kFilters = {"trim", "tojson", "length", "count", "upper", "lower",
                                                "capitalize", "default", "d", "string", "list",
                                                "selectattr", "rejectattr"};
const std::vector<std::string_view> kTests = {"defined", "undefined", "none", "string", "number", "integer",
                                              "float", "boolean", "true", "false", "mapping", "iterable",
                                              "sequence", "equalto"};
const std::vector<std::string_view> kTestsWithArgument = {"equalto"};
const std::vector<std::string_view> kFunctions = {"raise_exception", "namespace", "strftime_now"};
const std::vector<std::string_view> kMethods = {"startswith", "endswith", "strip", "lstrip", "rstrip",
                                                "split", "upper", "lower", "replace", "get", "items"};

// How deep blocks, parentheses and operator chains may nest: the parser and
// the evaluator recurse once per level, and a template must not overflow the
// stack. Jinja2 itself stops near here (Python's recursion limit).
constexpr int kMaxDepth = 100;
const std::vector<std::string_view> kLoopAttrs = {"index0", "index", "first", "last", "length",
                                                  "revindex", "revindex0"};

bool known(const std::vector<std::string_view>& set, std::string_view s) {
    return std::find(set.begin(), set.end(), s) != set.end();
}

ExprP make(Expr::Kind kind, std::string name = "", std::vector<ExprP> args = {}) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    e->args = std::move(args);
    for (const ExprP& a : e->args)
        if (a) e->depth = std::max(e->depth, a->depth + 1);
    return e;
}

Node make_node(Node::Kind kind, std::string text = "") {
    Node n{};
    n.kind = kind;
    n.text = std::move(text);
    return n;
}

template <class... E>
std::vector<ExprP> exprs(E&&... e) {
    std::vector<ExprP> v;
    (v.push_back(std::move(e)), ...);
    return v;
}

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    Body run() {
        std::string stopped;
        Body body = until({}, stopped);
        return body;
    }

private:
    const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
    bool is_op(std::string_view op, std::size_t ahead = 0) const {
        return peek(ahead).kind == Token::op && peek(ahead).text == op;
    }
    bool is_name(std::string_view n) const { return peek().kind == Token::name && peek().text == n; }
    bool accept_op(std::string_view op) { return is_op(op) && (++i_, true); }
    bool accept_name(std::string_view n) { return is_name(n) && (++i_, true); }

    [[noreturn]] void refuse(const std::string& what) const {
        fail("chat_template: line {}: {} is not supported by the kit's template engine (a Jinja subset: "
             "set, for, if, inline if, namespace, the filters trim/tojson/length/upper/lower/capitalize/"
             "default/string/list/selectattr/rejectattr, string methods, slicing, raise_exception, "
             "strftime_now)", peek().line, what);
    }

    // One more level of nesting while alive; past kMaxDepth the template is refused.
    struct Nest {
        explicit Nest(Parser& p) : p(p) {
            if (++p.depth_ > kMaxDepth) fail("chat_template: line {}: nested more than {} levels deep", p.peek().line, kMaxDepth);
        }
        ~Nest() { --p.depth_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;
        Parser& p;
    };

    // e, refused when operator chains (a + b + ...) made its tree deeper than kMaxDepth.
    ExprP bounded(ExprP e) const {
        if (e->depth > kMaxDepth) fail("chat_template: line {}: an expression nested more than {} levels deep", peek().line, kMaxDepth);
        return e;
    }
    [[noreturn]] void expected(std::string_view what) const {
        const Token& t = peek();
        fail("chat_template: line {}: expected {}, found {}", t.line, what,
             t.kind == Token::eof ? "the end of the template" : t.text.empty() ? "the end of the tag" : "'" + t.text + "'");
    }
    void expect_op(std::string_view op) {
        if (!accept_op(op)) expected(fmt::format("'{}'", op));
    }
    void expect(Token::Kind k, std::string_view what) {
        if (peek().kind != k) expected(what);
        ++i_;
    }
    std::string name(std::string_view what) {
        if (peek().kind != Token::name) expected(what);
        return t_[i_++].text;
    }

    // Nodes up to a {% stop %} tag in `stops` (the tag's keyword consumed, its name in `stopped`), or the end.
    Body until(std::initializer_list<std::string_view> stops, std::string& stopped) {
        const Nest nest(*this);
        Body body;
        for (;;) {
            const Token& t = peek();
            if (t.kind == Token::eof) {
                if (stops.size() != 0) fail("chat_template: a {{% {} %}} is never closed", *stops.begin() == "endfor" ? "for" : "if");
                return body;
            }
            ++i_;
            if (t.kind == Token::data) body.push_back(make_node(Node::Kind::text, t.text));
            else if (t.kind == Token::var_begin) {
                body.push_back(make_node(Node::Kind::output));
                body.back().expr = expression();
                expect(Token::var_end, "'}}'");
            } else {
                const std::string kw = name("a statement keyword");
                if (std::find(stops.begin(), stops.end(), kw) != stops.end()) return stopped = kw, body;
                body.push_back(statement(kw));
            }
        }
    }

    Node statement(const std::string& kw) {
        if (kw == "set") return set_statement();
        if (kw == "for") return for_statement();
        if (kw == "if") return if_statement();
        --i_;
        refuse("the statement {% " + kw + " %}");
    }

    Node set_statement() {
        Node n = make_node(Node::Kind::set, name("a variable name"));
        if (accept_op(".")) n.attr = name("an attribute name");
        if (is_op(",")) refuse("unpacking in {% set a, b = ... %}");
        if (!is_op("=")) refuse("{% set %} ... {% endset %} (a block set)");
        ++i_;
        n.expr = expression();
        expect(Token::block_end, "'%}'");
        return n;
    }

    // {% for x in xs %}, {% for a, b in pairs %}, {% for x in xs if cond %}.
    Node for_statement() {
        if (is_op("(")) refuse("a parenthesised loop target");
        Node n = make_node(Node::Kind::for_, name("the loop variable"));
        if (is_op(",")) n.targets.push_back(n.text);
        while (accept_op(",")) n.targets.push_back(name("a loop variable"));
        if (!accept_name("in")) expected("'in'");
        n.expr = or_expr();
        if (accept_name("if")) n.filter = expression();
        if (is_name("recursive")) refuse("a recursive loop");
        expect(Token::block_end, "'%}'");
        std::string stopped;
        n.body = until({"endfor", "else"}, stopped);
        if (stopped == "else") refuse("{% for %} ... {% else %}");
        expect(Token::block_end, "'%}'");
        return n;
    }

    Node if_statement() {
        Node n = make_node(Node::Kind::if_);
        ExprP cond = or_expr();  // Jinja2 reads no inline if here: {% if a if b %} is a syntax error
        for (;;) {
            expect(Token::block_end, "'%}'");
            std::string stopped;
            Body body = until({"endif", "elif", "else"}, stopped);
            n.branches.emplace_back(std::move(cond), std::move(body));
            if (stopped == "endif") break;
            cond = stopped == "elif" ? or_expr() : nullptr;
            if (!cond && !n.branches.back().first) expected("{% endif %} after {% else %}");
        }
        expect(Token::block_end, "'%}'");
        return n;
    }

    // --- expressions, Jinja's precedence from loosest to tightest ---

    // Jinja2's conditional expression: `a if c else b`, `a if c` (undefined when c is false),
    // and chains, `a if c else b if d else e`, the else part itself a conditional.
    ExprP expression() {
        const Nest nest(*this);
        ExprP e = or_expr();
        while (accept_name("if")) {
            ExprP cond = or_expr();
            ExprP otherwise = accept_name("else") ? expression() : nullptr;
            e = bounded(make(Expr::Kind::cond, "", exprs(std::move(cond), std::move(e), std::move(otherwise))));
        }
        return e;
    }

    ExprP or_expr() {
        ExprP e = and_expr();
        while (accept_name("or")) e = bounded(make(Expr::Kind::binary, "or", exprs(std::move(e), and_expr())));
        return e;
    }

    ExprP and_expr() {
        ExprP e = not_expr();
        while (accept_name("and")) e = bounded(make(Expr::Kind::binary, "and", exprs(std::move(e), not_expr())));
        return e;
    }

    ExprP not_expr() {
        const Nest nest(*this);
        if (accept_name("not")) return make(Expr::Kind::unary, "not", exprs(not_expr()));
        return compare();
    }

    std::string compare_op() {
        for (std::string_view op : {"==", "!=", "<", ">", "<=", ">="})
            if (accept_op(op)) return std::string(op);
        if (accept_name("in")) return "in";
        if (is_name("not") && peek(1).kind == Token::name && peek(1).text == "in") return i_ += 2, "not in";
        return "";
    }

    ExprP compare() {
        ExprP e = concat();
        const std::string op = compare_op();
        if (op.empty()) return e;
        e = make(Expr::Kind::binary, op, exprs(std::move(e), concat()));
        if (!compare_op().empty()) refuse("a chained comparison (a < b < c)");
        return e;
    }

    ExprP concat() {
        ExprP e = sum();
        while (accept_op("~")) e = bounded(make(Expr::Kind::binary, "~", exprs(std::move(e), sum())));
        return e;
    }

    ExprP sum() {
        ExprP e = product();
        while (is_op("+") || is_op("-")) {
            const std::string op = t_[i_++].text;
            e = bounded(make(Expr::Kind::binary, op, exprs(std::move(e), product())));
        }
        return e;
    }

    ExprP product() {
        ExprP e = unary(true);
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = t_[i_++].text;
            e = bounded(make(Expr::Kind::binary, op, exprs(std::move(e), unary(true))));
        }
        if (is_op("**")) refuse("the power operator **");
        return e;
    }

    ExprP unary(bool with_filter) {
        const Nest nest(*this);
        ExprP e;
        if (is_op("-") || is_op("+")) {
            const std::string op = t_[i_++].text;
            e = make(Expr::Kind::unary, op, exprs(unary(false)));
        } else {
            e = postfix(primary());
        }
        return with_filter ? filters(std::move(e)) : std::move(e);
    }

    ExprP literal(Json v) {
        ExprP e = make(Expr::Kind::literal);
        e->value = std::move(v);
        return e;
    }

    ExprP primary() {
        const Token& t = peek();
        if (t.kind == Token::string) {
            std::string s;
            while (peek().kind == Token::string) s += t_[i_++].text;  // adjacent literals join, as in Python
            return literal(s);
        }
        if (t.kind == Token::number) return ++i_, literal(t.value);
        if (t.kind == Token::name) {
            ++i_;
            if (t.text == "true" || t.text == "True") return literal(true);
            if (t.text == "false" || t.text == "False") return literal(false);
            if (t.text == "none" || t.text == "None") return literal(nullptr);
            return make(Expr::Kind::name, t.text);
        }
        if (accept_op("(")) {
            ExprP e = expression();
            if (is_op(",")) refuse("a tuple");
            expect_op(")");
            return e;
        }
        if (accept_op("[")) {
            ExprP e = make(Expr::Kind::list);
            while (!accept_op("]")) {
                if (!e->args.empty()) expect_op(",");
                if (accept_op("]")) break;
                e->args.push_back(expression());
            }
            return e;
        }
        if (is_op("{")) refuse("a dict literal {...}");
        expected("a value");
    }

    ExprP postfix(ExprP e) {
        for (;;) {
            if (accept_op(".")) {
                std::string attr = name("an attribute name");
                if (is_op("(")) {
                    if (!known(kMethods, attr)) refuse("the method ." + attr + "()");
                    e = bounded(make(Expr::Kind::method, attr, exprs(std::move(e))));
                    call_args(*e);
                    continue;
                }
                if (e->kind == Expr::Kind::name && e->name == "loop" && !known(kLoopAttrs, attr)) refuse("loop." + attr);
                e = bounded(make(Expr::Kind::attr, attr, exprs(std::move(e))));
            } else if (accept_op("[")) {
                e = bounded(subscript(std::move(e)));
            } else if (is_op("(")) {
                if (e->kind != Expr::Kind::name) refuse("calling an expression");
                if (!known(kFunctions, e->name)) refuse("the function " + e->name + "()");
                e->kind = Expr::Kind::call;
                call_args(*e);
            } else {
                return e;
            }
        }
    }

    // After '[': x[i], or a slice x[a:b:c] with any part left out.
    ExprP subscript(ExprP e) {
        std::vector<ExprP> parts;
        parts.push_back(std::move(e));
        parts.push_back(is_op(":") ? nullptr : expression());
        if (accept_op("]")) return make(Expr::Kind::index, "", std::move(parts));
        for (int k = 0; k < 2; ++k) {
            if (!accept_op(":")) {
                parts.push_back(nullptr);
                continue;
            }
            parts.push_back(is_op(":") || is_op("]") ? nullptr : expression());
        }
        expect_op("]");
        return make(Expr::Kind::slice, "", std::move(parts));
    }

    // '(' args ')' appended to e.args; keyword arguments as name=value.
    void call_args(Expr& e) {
        expect_op("(");
        const std::size_t base = e.args.size();
        e.kwargs.assign(base, "");
        while (!accept_op(")")) {
            if (e.args.size() > base) {
                expect_op(",");
                if (accept_op(")")) return;
            }
            std::string kw;
            if (peek().kind == Token::name && is_op("=", 1)) kw = name("a keyword"), ++i_;
            e.args.push_back(expression());
            e.kwargs.push_back(kw);
        }
    }

    ExprP filters(ExprP e) {
        for (;;) {
            if (accept_op("|")) {
                const std::string f = name("a filter name");
                if (!known(kFilters, f)) refuse("the filter |" + f);
                e = bounded(make(Expr::Kind::filter, f, exprs(std::move(e))));
                if (is_op("(")) call_args(*e);
                check_filter_args(*e);
            } else if (accept_name("is")) {
                e = bounded(test(std::move(e)));
            } else {
                return e;
            }
        }
    }

    // After 'is': [not] name, then an argument as Jinja2 reads one: in parentheses, or a
    // value right after the name (x is equalto 'user'); `else`, `or` and `and` end the test.
    ExprP test(ExprP e) {
        const bool negated = accept_name("not");
        const std::string test = name("a test name");
        if (!known(kTests, test)) refuse("the test 'is " + test + "'");
        e = make(Expr::Kind::test, test, exprs(std::move(e)));
        e->negated = negated;
        if (is_op("(")) {
            call_args(*e);
        } else if (peek().kind == Token::string || peek().kind == Token::number || is_op("[") || is_op("{") ||
                   (peek().kind == Token::name && !is_name("else") && !is_name("or") && !is_name("and"))) {
            if (is_name("is")) expected("one test, not a chain of 'is'");
            e->args.push_back(postfix(primary()));
            e->kwargs.assign(2, "");
        }
        check_test_args(test, e->args.size() - 1, std::any_of(e->kwargs.begin(), e->kwargs.end(), [](const std::string& k) { return !k.empty(); }));
        return e;
    }

    void check_test_args(const std::string& test, std::size_t given, bool keywords) const {
        const std::size_t wanted = known(kTestsWithArgument, test) ? 1 : 0;
        if (keywords) refuse("the test '" + test + "' with a keyword argument");
        if (given != wanted) refuse(fmt::format("the test '{}' with {} argument(s) (it takes {})", test, given, wanted));
    }

    // What can be checked before rendering: tojson's options, and the test
    // selectattr/rejectattr apply when it is named by a literal.
    void check_filter_args(const Expr& e) const {
        const auto keyword = [&](std::size_t i) { return e.kwargs.size() > i ? e.kwargs[i] : std::string(); };
        if (e.name == "tojson") {
            for (std::size_t i = 1; i < e.args.size(); ++i)
                if (keyword(i) != "indent") refuse(keyword(i).empty() ? "|tojson with a positional argument" : "|tojson(" + keyword(i) + "=...)");
            return;
        }
        if (e.name != "selectattr" && e.name != "rejectattr") return;
        for (std::size_t i = 1; i < e.args.size(); ++i)
            if (!keyword(i).empty()) refuse("|" + e.name + "(" + keyword(i) + "=...)");
        if (e.args.size() < 3 || e.args[2]->kind != Expr::Kind::literal || !e.args[2]->value.is_string()) return;
        const std::string test = e.args[2]->value.get<std::string>();
        if (!known(kTests, test)) refuse("the test '" + test + "' (in |" + e.name + ")");
        check_test_args(test, e.args.size() - 3, false);
    }

    std::vector<Token> t_;
    std::size_t i_ = 0;
    int depth_ = 0;  // the nesting Nest guards count
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex_template(source)).run(); }

}  // namespace pd::tok::tmpl
