#include "io/template_parser.hpp"

#include <algorithm>
#include <initializer_list>

#include "common.hpp"
#include "io/template_lexer.hpp"

namespace pd::tok::tmpl {

namespace {

// What the evaluator (template_eval.cpp) implements; anything else is refused here.
const std::vector<std::string_view> kFilters = {"trim", "tojson", "length", "count", "upper", "lower",
                                                "capitalize", "default", "d"};
const std::vector<std::string_view> kTests = {"defined", "undefined", "none", "string", "number", "integer",
                                              "float", "boolean", "true", "false", "mapping", "iterable",
                                              "sequence"};
const std::vector<std::string_view> kFunctions = {"raise_exception", "namespace"};
const std::vector<std::string_view> kMethods = {"startswith", "endswith", "strip", "lstrip", "rstrip",
                                                "split", "upper", "lower", "replace", "get"};
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
    return e;
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
             "set, for, if, namespace, the filters trim/tojson/length/upper/lower/capitalize/default, "
             "string methods, slicing, raise_exception)", peek().line, what);
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
        Body body;
        for (;;) {
            const Token& t = peek();
            if (t.kind == Token::eof) {
                if (stops.size() != 0) fail("chat_template: a {{% {} %}} is never closed", *stops.begin() == "endfor" ? "for" : "if");
                return body;
            }
            ++i_;
            if (t.kind == Token::data) body.push_back(Node{Node::Kind::text, t.text, "", nullptr, {}, {}});
            else if (t.kind == Token::var_begin) {
                body.push_back(Node{Node::Kind::output, "", "", expression(), {}, {}});
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
        Node n{Node::Kind::set, name("a variable name"), "", nullptr, {}, {}};
        if (accept_op(".")) n.attr = name("an attribute name");
        if (is_op(",")) refuse("unpacking in {% set a, b = ... %}");
        if (!is_op("=")) refuse("{% set %} ... {% endset %} (a block set)");
        ++i_;
        n.expr = expression();
        expect(Token::block_end, "'%}'");
        return n;
    }

    Node for_statement() {
        Node n{Node::Kind::for_, name("the loop variable"), "", nullptr, {}, {}};
        if (is_op(",")) refuse("unpacking in {% for a, b in ... %}");
        if (!accept_name("in")) expected("'in'");
        n.expr = or_expr();
        if (is_name("if")) refuse("a filtered loop {% for x in xs if ... %}");
        if (is_name("recursive")) refuse("a recursive loop");
        expect(Token::block_end, "'%}'");
        std::string stopped;
        n.body = until({"endfor", "else"}, stopped);
        if (stopped == "else") refuse("{% for %} ... {% else %}");
        expect(Token::block_end, "'%}'");
        return n;
    }

    Node if_statement() {
        Node n{Node::Kind::if_, "", "", nullptr, {}, {}};
        ExprP cond = expression();
        for (;;) {
            expect(Token::block_end, "'%}'");
            std::string stopped;
            Body body = until({"endif", "elif", "else"}, stopped);
            n.branches.emplace_back(std::move(cond), std::move(body));
            if (stopped == "endif") break;
            cond = stopped == "elif" ? expression() : nullptr;
            if (!cond && !n.branches.back().first) expected("{% endif %} after {% else %}");
        }
        expect(Token::block_end, "'%}'");
        return n;
    }

    // --- expressions, Jinja's precedence from loosest to tightest ---

    ExprP expression() {
        ExprP e = or_expr();
        if (is_name("if")) refuse("an inline if (x if cond else y)");
        return e;
    }

    ExprP or_expr() {
        ExprP e = and_expr();
        while (accept_name("or")) e = make(Expr::Kind::binary, "or", exprs(std::move(e), and_expr()));
        return e;
    }

    ExprP and_expr() {
        ExprP e = not_expr();
        while (accept_name("and")) e = make(Expr::Kind::binary, "and", exprs(std::move(e), not_expr()));
        return e;
    }

    ExprP not_expr() {
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
        while (accept_op("~")) e = make(Expr::Kind::binary, "~", exprs(std::move(e), sum()));
        return e;
    }

    ExprP sum() {
        ExprP e = product();
        while (is_op("+") || is_op("-")) {
            const std::string op = t_[i_++].text;
            e = make(Expr::Kind::binary, op, exprs(std::move(e), product()));
        }
        return e;
    }

    ExprP product() {
        ExprP e = unary(true);
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = t_[i_++].text;
            e = make(Expr::Kind::binary, op, exprs(std::move(e), unary(true)));
        }
        if (is_op("**")) refuse("the power operator **");
        return e;
    }

    ExprP unary(bool with_filter) {
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
                    e = make(Expr::Kind::method, attr, exprs(std::move(e)));
                    call_args(*e);
                    continue;
                }
                if (e->kind == Expr::Kind::name && e->name == "loop" && !known(kLoopAttrs, attr)) refuse("loop." + attr);
                e = make(Expr::Kind::attr, attr, exprs(std::move(e)));
            } else if (accept_op("[")) {
                e = subscript(std::move(e));
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
                e = make(Expr::Kind::filter, f, exprs(std::move(e)));
                if (is_op("(")) call_args(*e);
            } else if (accept_name("is")) {
                const bool negated = accept_name("not");
                const std::string test = name("a test name");
                if (!known(kTests, test)) refuse("the test 'is " + test + "'");
                e = make(Expr::Kind::test, test, exprs(std::move(e)));
                e->negated = negated;
                if (is_op("(") || peek().kind == Token::string || peek().kind == Token::number)
                        refuse("a test with an argument");
            } else {
                return e;
            }
        }
    }

    std::vector<Token> t_;
    std::size_t i_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(lex_template(source)).run(); }

}  // namespace pd::tok::tmpl
