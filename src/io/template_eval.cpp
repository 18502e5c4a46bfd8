#include "io/template_eval.hpp"

#include <climits>
#include <cmath>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <utf8proc.h>

#include "io/template_lexer.hpp"
#include "io/utf8.hpp"

namespace pd::tok::tmpl {

namespace {

struct Value {
    bool defined = true;
    Json j;
    std::shared_ptr<Json> space;  // a namespace(): its attributes, shared by every copy
};

const Value kUndefined{false, nullptr, nullptr};

[[noreturn]] void error(const std::string& message) { throw RenderError("chat_template: " + message); }

std::string type_name(const Value& v) {
    if (!v.defined) return "undefined";
    if (v.space) return "namespace";
    switch (v.j.type()) {
        case Json::value_t::null: return "none";
        case Json::value_t::boolean: return "bool";
        case Json::value_t::string: return "string";
        case Json::value_t::array: return "list";
        case Json::value_t::object: return "dict";
        case Json::value_t::number_float: return "float";
        default: return "int";
    }
}

bool truthy(const Value& v) {
    if (!v.defined) return false;
    if (v.space) return true;
    const Json& j = v.j;
    if (j.is_null()) return false;
    if (j.is_boolean()) return j.get<bool>();
    if (j.is_number_float()) return j.get<double>() != 0;
    if (j.is_number()) return j.get<long long>() != 0;
    return !j.empty() && !(j.is_string() && j.get_ref<const std::string&>().empty());
}

std::u32string codepoints(std::string_view s) {
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
        const Utf8Char c = next_utf8(s, i);
        out += c.status == Utf8Char::ok ? c.cp : U'\uFFFD';
        i += c.status == Utf8Char::ok ? c.len : std::max<std::size_t>(c.len, 1);
    }
    return out;
}

std::string utf8(std::u32string_view s) {
    std::string out;
    for (char32_t c : s) append_utf8(out, c);
    return out;
}

// Python's repr of a float: the shortest text that reads back, with ".0" on whole numbers.
std::string float_text(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    std::string s = fmt::format("{}", d);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
}

// str(value), as {{ }} and ~ print it.
std::string text(const Value& v) {
    if (!v.defined) return "";
    if (v.space || v.j.is_array() || v.j.is_object()) error("printing a " + type_name(v) + " is not supported");
    const Json& j = v.j;
    if (j.is_string()) return j.get<std::string>();
    if (j.is_null()) return "None";
    if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
    if (j.is_number_float()) return float_text(j.get<double>());
    return std::to_string(j.get<long long>());
}

// json.dumps(v, ensure_ascii=False): ", " and ": " between items, keys in order.
std::string dumps(const Json& j) {
    if (j.is_array() || j.is_object()) {
        std::string out = j.is_array() ? "[" : "{";
        bool first = true;
        for (auto it = j.begin(); it != j.end(); ++it, first = false) {
            if (!first) out += ", ";
            if (j.is_object()) out += Json(it.key()).dump() + ": ";
            out += dumps(*it);
        }
        return out + (j.is_array() ? "]" : "}");
    }
    if (j.is_number_float()) return float_text(j.get<double>());
    if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

const std::string& str_arg(const Value& v, const std::string& what) {
    if (!v.defined || !v.j.is_string()) error(what + " needs a string, got " + type_name(v));
    return v.j.get_ref<const std::string&>();
}

// Python's strip family: `chars` null strips white space.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
    const std::u32string cs = codepoints(s);
    const std::u32string set = chars && chars->defined && !chars->j.is_null() ? codepoints(str_arg(*chars, "strip()")) : U"";
    auto drop = [&](char32_t c) { return chars && chars->defined && !chars->j.is_null() ? set.find(c) != std::u32string::npos : py_space(c); };
    std::size_t b = 0, e = cs.size();
    while (left && b < e && drop(cs[b])) ++b;
    while (right && e > b && drop(cs[e - 1])) --e;
    return utf8(std::u32string_view(cs).substr(b, e - b));
}

// str.split(sep) and str.split() (runs of white space, no empty parts).
Json split(const std::string& s, const Value* sep) {
    Json out = Json::array();
    if (sep && sep->defined && !sep->j.is_null()) {
        const std::string& d = str_arg(*sep, "split()");
        if (d.empty()) error("split() with an empty separator");
        std::size_t from = 0;
        for (std::size_t at; (at = s.find(d, from)) != std::string::npos; from = at + d.size())
            out.push_back(s.substr(from, at - from));
        out.push_back(s.substr(from));
        return out;
    }
    const std::u32string cs = codepoints(s);
    std::u32string part;
    for (char32_t c : cs + U" ") {
        if (!py_space(c)) part += c;
        else if (!part.empty()) out.push_back(utf8(part)), part.clear();
    }
    return out;
}

// Simple (one code point to one) case mapping, as utf8proc gives it.
std::string map_case(const std::string& s, int how) {  // 0 lower, 1 upper, 2 capitalize
    std::u32string cs = codepoints(s);
    for (std::size_t i = 0; i < cs.size(); ++i) {
        const auto c = utf8proc_int32_t(cs[i]);
        cs[i] = char32_t(how == 1 ? utf8proc_toupper(c) : how == 2 && i == 0 ? utf8proc_totitle(c) : utf8proc_tolower(c));
    }
    return utf8(cs);
}

long long length(const Value& v) {
    if (!v.defined) return 0;
    if (v.j.is_string()) return (long long)codepoints(v.j.get_ref<const std::string&>()).size();
    if (v.j.is_array() || v.j.is_object()) return (long long)v.j.size();
    error("the length of a " + type_name(v));
}

// Python's ==: True == 1, 1 == 1.0, and no other mixed types equal.
bool equal(const Value& a, const Value& b) {
    if (!a.defined || !b.defined) return !a.defined && !b.defined;
    if (a.space || b.space) return a.space == b.space;
    auto numeric = [](const Json& j) { return j.is_number() || j.is_boolean(); };
    if (numeric(a.j) && numeric(b.j) && (a.j.is_boolean() || b.j.is_boolean()))
        return (a.j.is_boolean() ? double(a.j.get<bool>()) : a.j.get<double>()) ==
               (b.j.is_boolean() ? double(b.j.get<bool>()) : b.j.get<double>());
    return a.j == b.j;
}

double number(const Value& v, const std::string& op) {
    if (!v.defined || !v.j.is_number() || v.j.is_boolean()) error("'" + op + "' on a " + type_name(v));
    return v.j.get<double>();
}

bool both_int(const Value& a, const Value& b) {
    return a.j.is_number_integer() && b.j.is_number_integer() && !a.j.is_boolean() && !b.j.is_boolean();
}

Value compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return {true, equal(a, b), nullptr};
    if (op == "!=") return {true, !equal(a, b), nullptr};
    int c = 0;
    if (a.defined && b.defined && a.j.is_string() && b.j.is_string()) c = a.j.get_ref<const std::string&>().compare(b.j.get_ref<const std::string&>());
    else c = number(a, op) < number(b, op) ? -1 : number(a, op) > number(b, op) ? 1 : 0;
    return {true, op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0, nullptr};
}

bool contains(const Value& hay, const Value& needle) {
    if (!hay.defined) error("'in' an undefined value");
    if (hay.j.is_string()) return hay.j.get_ref<const std::string&>().find(str_arg(needle, "'in' a string")) != std::string::npos;
    if (hay.j.is_object()) return needle.j.is_string() && hay.j.contains(needle.j.get<std::string>());
    if (hay.j.is_array()) {
        for (const Json& x : hay.j)
            if (equal({true, x, nullptr}, needle)) return true;
        return false;
    }
    error("'in' a " + type_name(hay));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") return {true, text(a) + text(b), nullptr};
    if (op == "+" && a.defined && b.defined && a.j.is_string() && b.j.is_string())
        return {true, a.j.get<std::string>() + b.j.get<std::string>(), nullptr};
    if (op == "+" && a.defined && b.defined && a.j.is_array() && b.j.is_array()) {
        Json out = a.j;
        out.insert(out.end(), b.j.begin(), b.j.end());
        return {true, out, nullptr};
    }
    const double x = number(a, op), y = number(b, op);
    if (op == "/") {
        if (y == 0) error("division by zero");
        return {true, x / y, nullptr};
    }
    if (!both_int(a, b)) {
        if ((op == "%" || op == "//") && y == 0) error("division by zero");
        const double r = op == "+" ? x + y : op == "-" ? x - y : op == "*" ? x * y
                       : op == "//" ? std::floor(x / y) : x - y * std::floor(x / y);
        return {true, r, nullptr};
    }
    const long long p = a.j.get<long long>(), q = b.j.get<long long>();
    long long r = 0;
    if (op == "+" || op == "-" || op == "*") {
        // Python's integers do not overflow; 64 bits do: refuse rather than wrap.
        const bool over = op == "+" ? __builtin_add_overflow(p, q, &r)
                        : op == "-" ? __builtin_sub_overflow(p, q, &r) : __builtin_mul_overflow(p, q, &r);
        if (over) error("an integer past 64 bits");
        return {true, r, nullptr};
    }
    // Only // and % divide: p / q with q == 0 (or LLONG_MIN / -1) traps the CPU, SIGFPE.
    if (q == 0) error("division by zero");
    if (p == LLONG_MIN && q == -1) error("an integer past 64 bits");
    const long long fl = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));  // Python's floor division
    r = op == "//" ? fl : p - q * fl;
    return {true, r, nullptr};
}

// Python's slice indices for a sequence of n items.
std::vector<long long> slice_positions(long long n, const Value* lo, const Value* hi, const Value* st) {
    auto opt = [](const Value* v) { return v && v->defined && !v->j.is_null(); };
    const long long step = opt(st) ? (long long)number(*st, "slice") : 1;
    if (step == 0) error("a slice step of 0");
    auto clamp = [&](const Value* v, long long dflt) {
        if (!opt(v)) return dflt;
        long long i = (long long)number(*v, "slice");
        if (i < 0) i += n;
        return step > 0 ? std::clamp(i, 0LL, n) : std::clamp(i, -1LL, n - 1);
    };
    const long long b = clamp(lo, step > 0 ? 0 : n - 1), e = clamp(hi, step > 0 ? n : -1);
    std::vector<long long> out;
    for (long long i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
    return out;
}

class Evaluator {
public:
    explicit Evaluator(const Json& globals) {
        scopes_.emplace_back();
        for (auto it = globals.begin(); it != globals.end(); ++it) scopes_[0][it.key()] = {true, *it, nullptr};
    }

    void run(const Body& body) {
        for (const Node& n : body) node(n);
    }

    std::string out;

private:
    void node(const Node& n) {
        switch (n.kind) {
            case Node::Kind::text: out += n.text; break;
            case Node::Kind::output: out += text(eval(*n.expr)); break;
            case Node::Kind::set: set(n); break;
            case Node::Kind::for_: loop(n); break;
            case Node::Kind::if_:
                for (const auto& [cond, body] : n.branches)
                    if (!cond || truthy(eval(*cond))) return run(body);
                break;
        }
    }

    void set(const Node& n) {
        Value v = eval(*n.expr);
        if (n.attr.empty()) return void(scopes_.back()[n.text] = std::move(v));
        const Value target = lookup(n.text);
        if (!target.space) error("{% set " + n.text + "." + n.attr + " %} on a " + type_name(target) + ", not a namespace");
        if (v.space) error("a namespace stored in a namespace");
        (*target.space)[n.attr] = v.defined ? v.j : Json(nullptr);
    }

    // A loop's body runs in its own scope: its {% set %}s end with it, as in Jinja.
    void loop(const Node& n) {
        const Value seq = eval(*n.expr);
        Json items = Json::array();
        if (seq.defined && seq.j.is_array()) items = seq.j;
        else if (seq.defined && seq.j.is_object())
            for (auto it = seq.j.begin(); it != seq.j.end(); ++it) items.push_back(it.key());
        else if (seq.defined && seq.j.is_string())
            for (char32_t c : codepoints(seq.j.get_ref<const std::string&>())) items.push_back(utf8(std::u32string(1, c)));
        else if (seq.defined) error("looping over a " + type_name(seq));
        const long long len = (long long)items.size();
        for (long long i = 0; i < len; ++i) {
            scopes_.emplace_back();
            scopes_.back()[n.text] = {true, items[std::size_t(i)], nullptr};
            scopes_.back()["loop"] = {true, Json{{"index0", i}, {"index", i + 1}, {"first", i == 0}, {"last", i == len - 1},
                                                 {"length", len}, {"revindex", len - i}, {"revindex0", len - i - 1}},
                                      nullptr};
            run(n.body);
            scopes_.pop_back();
        }
    }

    Value lookup(const std::string& name) const {
        for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
            if (auto it = s->find(name); it != s->end()) return it->second;
        return kUndefined;
    }

    Value eval(const Expr& e) {
        switch (e.kind) {
            case Expr::Kind::literal: return {true, e.value, nullptr};
            case Expr::Kind::list: {
                Json a = Json::array();
                for (const ExprP& x : e.args) a.push_back(plain(eval(*x), "a list item"));
                return {true, a, nullptr};
            }
            case Expr::Kind::name: return lookup(e.name);
            case Expr::Kind::attr: return attribute(eval(*e.args[0]), e.name);
            case Expr::Kind::index: return item(eval(*e.args[0]), eval(*e.args[1]));
            case Expr::Kind::slice: return slice(e);
            case Expr::Kind::call: return call(e);
            case Expr::Kind::method: return method(e);
            case Expr::Kind::filter: return filter(e);
            case Expr::Kind::test: return {true, test(e.name, eval(*e.args[0])) != e.negated, nullptr};
            case Expr::Kind::unary: return unary(e);
            case Expr::Kind::binary: return binary(e);
        }
        error("unknown expression");
    }

    static Json plain(const Value& v, const std::string& where) {
        if (v.space) error("a namespace in " + where);
        return v.defined ? v.j : Json(nullptr);
    }

    std::vector<Value> args(const Expr& e, std::size_t from, std::size_t most, const std::string& what) {
        if (e.args.size() - from > most) error(fmt::format("{} takes at most {} argument(s)", what, most));
        std::vector<Value> v;
        for (std::size_t i = from; i < e.args.size(); ++i) {
            if (!e.kwargs.empty() && !e.kwargs[i].empty()) error(what + " takes no keyword arguments");
            v.push_back(eval(*e.args[i]));
        }
        return v;
    }

    static Value attribute(const Value& obj, const std::string& name) {
        if (!obj.defined) error("'" + name + "' of an undefined value");
        if (obj.space) return obj.space->contains(name) ? Value{true, (*obj.space)[name], nullptr} : kUndefined;
        if (obj.j.is_object() && obj.j.contains(name)) return {true, obj.j[name], nullptr};
        return kUndefined;
    }

    static Value item(const Value& obj, const Value& key) {
        if (!obj.defined) error("an item of an undefined value");
        if (obj.space) return attribute(obj, str_arg(key, "a namespace's item"));
        if (obj.j.is_object())
            return key.defined && key.j.is_string() && obj.j.contains(key.j.get<std::string>())
                       ? Value{true, obj.j[key.j.get<std::string>()], nullptr} : kUndefined;
        if (!obj.j.is_array() && !obj.j.is_string()) error("an item of a " + type_name(obj));
        if (!key.defined || !key.j.is_number_integer() || key.j.is_boolean()) return kUndefined;
        long long i = key.j.get<long long>();
        if (obj.j.is_array()) {
            const long long n = (long long)obj.j.size();
            if (i < 0) i += n;
            return i >= 0 && i < n ? Value{true, obj.j[std::size_t(i)], nullptr} : kUndefined;
        }
        const std::u32string cs = codepoints(obj.j.get_ref<const std::string&>());
        if (i < 0) i += (long long)cs.size();
        return i >= 0 && i < (long long)cs.size() ? Value{true, utf8(cs.substr(std::size_t(i), 1)), nullptr} : kUndefined;
    }

    Value slice(const Expr& e) {
        const Value obj = eval(*e.args[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k) parts[k] = e.args[std::size_t(k) + 1] ? eval(*e.args[std::size_t(k) + 1]) : kUndefined;
        if (obj.defined && obj.j.is_array()) {
            Json out = Json::array();
            for (long long i : slice_positions((long long)obj.j.size(), &parts[0], &parts[1], &parts[2])) out.push_back(obj.j[std::size_t(i)]);
            return {true, out, nullptr};
        }
        if (!obj.defined || !obj.j.is_string()) error("slicing a " + type_name(obj));
        const std::u32string cs = codepoints(obj.j.get_ref<const std::string&>());
        std::u32string out;
        for (long long i : slice_positions((long long)cs.size(), &parts[0], &parts[1], &parts[2])) out += cs[std::size_t(i)];
        return {true, utf8(out), nullptr};
    }

    Value call(const Expr& e) {
        if (e.name == "raise_exception") {
            const std::vector<Value> a = args(e, 0, 1, "raise_exception()");
            throw RenderError("the chat template refused these messages: " + (a.empty() ? std::string() : text(a[0])));
        }
        auto space = std::make_shared<Json>(Json::object());
        for (std::size_t i = 0; i < e.args.size(); ++i) {
            if (e.kwargs[i].empty()) error("namespace() with a positional argument");
            (*space)[e.kwargs[i]] = plain(eval(*e.args[i]), "namespace()");
        }
        return {true, nullptr, space};
    }

    Value method(const Expr& e) {
        const Value obj = eval(*e.args[0]);
        const std::string& m = e.name;
        if (m == "get") {
            if (!obj.defined || !obj.j.is_object()) error(".get() on a " + type_name(obj));
            const std::vector<Value> a = args(e, 1, 2, ".get()");
            if (a.empty()) error(".get() needs a key");
            const Value v = item(obj, a[0]);
            return v.defined ? v : a.size() > 1 ? a[1] : Value{true, nullptr, nullptr};
        }
        const std::string& s = str_arg(obj, "." + m + "()");
        const std::vector<Value> a = args(e, 1, 2, "." + m + "()");
        const Value* a0 = a.empty() ? nullptr : &a[0];
        if (m == "startswith" || m == "endswith") {
            if (a.size() != 1) error("." + m + "() takes one string");
            const std::string& x = str_arg(a[0], "." + m + "()");
            return {true, m == "startswith" ? s.starts_with(x) : s.ends_with(x), nullptr};
        }
        if (m == "strip" || m == "lstrip" || m == "rstrip") return {true, strip(s, a0, m != "rstrip", m != "lstrip"), nullptr};
        if (m == "split") {
            if (a.size() > 1) error(".split() with maxsplit is not supported");
            return {true, split(s, a0), nullptr};
        }
        if (m == "upper" || m == "lower") return {true, map_case(s, m == "upper"), nullptr};
        if (a.size() != 2) error(".replace() takes two strings");  // replace
        const std::string& from = str_arg(a[0], ".replace()"), &to = str_arg(a[1], ".replace()");
        if (from.empty()) error(".replace() of an empty string");
        std::string out;
        std::size_t at = 0;
        for (std::size_t k; (k = s.find(from, at)) != std::string::npos; at = k + from.size()) out += s.substr(at, k - at) + to;
        return {true, out + s.substr(at), nullptr};
    }

    Value filter(const Expr& e) {
        const Value v = eval(*e.args[0]);
        const std::string& f = e.name;
        if (f == "default" || f == "d") {
            const std::vector<Value> a = args(e, 1, 2, "|default");
            const bool falsy = a.size() > 1 && truthy(a[1]);
            if (v.defined && !(falsy && !truthy(v))) return v;
            return a.empty() ? Value{true, "", nullptr} : a[0];
        }
        args(e, 1, 0, "|" + f);
        if (f == "length" || f == "count") return {true, length(v), nullptr};
        if (f == "tojson") {
            if (!v.defined) error("|tojson of an undefined value");
            return {true, dumps(plain(v, "|tojson")), nullptr};
        }
        const std::string s = text(v);
        if (f == "trim") return {true, strip(s, nullptr, true, true), nullptr};
        return {true, map_case(s, f == "upper" ? 1 : f == "lower" ? 0 : 2), nullptr};  // capitalize lowers the rest
    }

    static bool test(const std::string& t, const Value& v) {
        const Json& j = v.j;
        const bool d = v.defined && !v.space;
        if (t == "defined") return v.defined;
        if (t == "undefined") return !v.defined;
        if (t == "none") return d && j.is_null();
        if (t == "string") return d && j.is_string();
        if (t == "number") return d && (j.is_number() || j.is_boolean());  // Python's bools are numbers
        if (t == "integer") return d && j.is_number_integer();
        if (t == "float") return d && j.is_number_float();
        if (t == "boolean") return d && j.is_boolean();
        if (t == "true") return d && j.is_boolean() && j.get<bool>();
        if (t == "false") return d && j.is_boolean() && !j.get<bool>();
        if (t == "mapping") return d && j.is_object();
        return !v.defined || (d && (j.is_string() || j.is_array() || j.is_object()));  // iterable, sequence
    }

    Value unary(const Expr& e) {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return {true, !truthy(v), nullptr};
        const double x = number(v, e.name);
        if (e.name == "+") return v;
        if (v.j.is_number_float()) return {true, -x, nullptr};
        return {true, -v.j.get<long long>(), nullptr};
    }

    Value binary(const Expr& e) {
        const std::string& op = e.name;
        const Value a = eval(*e.args[0]);
        if (op == "and") return truthy(a) ? eval(*e.args[1]) : a;
        if (op == "or") return truthy(a) ? a : eval(*e.args[1]);
        const Value b = eval(*e.args[1]);
        if (op == "in" || op == "not in") return {true, contains(b, a) != (op == "not in"), nullptr};
        if (op.size() <= 2 && op.find_first_of("=<>!") != std::string::npos) return compare(op, a, b);
        return arithmetic(op, a, b);
    }

    std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

std::string render(const Body& body, const Json& globals) {
    Evaluator ev(globals);
    ev.run(body);
    return std::move(ev.out);
}

}  // namespace pd::tok::tmpl
