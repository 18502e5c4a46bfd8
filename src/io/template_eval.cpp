#include "io/template_eval.hpp"

#include <climits>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>


#include <fmt/format.h>
#include <utf8proc.h>

#include "io/template_lexer.hpp"
#include "io/utf8.hpp"

namespace pd::tok::tmpl {

namespace {

// What selectattr/rejectattr give: a Python generator, whose items run out
// after one pass. A second read is an error here, where Jinja2 would see
// nothing (or what a first, partial read left): add |list to keep them.
struct Generator {
    Json items;
    bool used = false;
};

struct Namespace;

// A value is never copied when read: messages[i].content shares the memory of
// messages (so a loop that reads messages each turn costs nothing per read).
struct Value {
    bool defined = true;
    std::shared_ptr<const Json> p;     // the JSON value, or null (read as None)
    std::shared_ptr<Namespace> space;  // a namespace(), shared by every copy
    std::shared_ptr<Generator> gen;    // a generator, shared by every copy
    std::string function;              // a global function named as a value (strftime_now is defined)

    const Json& j() const {
        static const Json none;
        return p ? *p : none;
    }
};

struct Namespace {
    std::map<std::string, Value> attrs;
};

Value val(Json j) { return {true, std::make_shared<const Json>(std::move(j)), nullptr, nullptr, ""}; }

// `part` of `whole`'s JSON, sharing its memory.
Value sub(const Value& whole, const Json& part) { return {true, std::shared_ptr<const Json>(whole.p, &part), nullptr, nullptr, ""}; }

const Value kUndefined{false, nullptr, nullptr, nullptr, ""};

// Jinja2's global functions (its own and the two transformers adds); only
// those in the parser's kFunctions can be called.
const std::vector<std::string_view> kGlobalFunctions = {"raise_exception", "strftime_now", "namespace", "range",
                                                        "dict", "lipsum", "cycler", "joiner"};

// Lists nested deeper than this are refused: copying and printing them recurse.
// Messages arrive nested at most kMaxJsonDepth (64) deep; a template could
// otherwise nest a list one level a turn ({% set ns.x = [ns.x] %}).
constexpr long long kMaxNesting = 200;

[[noreturn]] void error(const std::string& message) { throw RenderError("chat_template: " + message); }

std::string type_name(const Value& v) {
    if (!v.defined) return "undefined";
    if (v.space) return "namespace";
    if (v.gen) return "generator";
    if (!v.function.empty()) return "function";
    switch (v.j().type()) {
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
    if (v.space || v.gen || !v.function.empty()) return true;
    const Json& j = v.j();
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

// str(value), as {{ }}, ~ and |string print it; Python's repr of a list,
// dict or object is not reproduced.
std::string text(const Value& v) {
    if (!v.defined) return "";
    if (v.space || v.gen || !v.function.empty() || v.j().is_array() || v.j().is_object())
        error("printing a " + type_name(v) + " is not supported");
    const Json& j = v.j();
    if (j.is_string()) return j.get<std::string>();
    if (j.is_null()) return "None";
    if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
    if (j.is_number_float()) return float_text(j.get<double>());
    if (j.is_number_unsigned()) return std::to_string(j.get<unsigned long long>());
    return std::to_string(j.get<long long>());
}

// json.dumps(v, ensure_ascii=False, indent=indent): without indent ", " and ": "
// between items; with it each item on its own line, `indent` spaces a level
// deeper than its container, and "," after all but the last. Keys in order.
std::string dumps(const Json& j, std::optional<long long> indent = std::nullopt, long long level = 0) {
    if (level > kMaxNesting) error(fmt::format("|tojson of a value nested more than {} deep", kMaxNesting));
    if ((j.is_array() || j.is_object()) && !j.empty()) {
        const std::string inner = indent ? "\n" + std::string(std::size_t(std::max(0LL, *indent) * (level + 1)), ' ') : "";
        std::string out = j.is_array() ? "[" : "{";
        bool first = true;
        for (auto it = j.begin(); it != j.end(); ++it, first = false) {
            out += first ? inner : (indent ? "," : ", ") + inner;
            if (j.is_object()) out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ": ";
            out += dumps(*it, indent, level + 1);
        }
        if (indent) out += "\n" + std::string(std::size_t(std::max(0LL, *indent) * level), ' ');
        return out + (j.is_array() ? "]" : "}");
    }
    if (j.is_number_float()) return float_text(j.get<double>());
    if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// transformers' strftime_now(fmt), datetime.now().strftime(fmt): Python reads
// %f (microseconds), %z and %Z (empty: now() has no time zone) itself and hands
// the rest to the C library's strftime on the local time, in the C locale
// (Python leaves LC_TIME alone, as the kit does).
std::string strftime_now(const std::string& format) {
    if (format.find('\0') != std::string::npos) error("strftime_now() of a format with a NUL character");
    if (format.size() > 1024) error("strftime_now() of a format longer than 1024 bytes");
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::tm local{};
    localtime_r(&now.tv_sec, &local);
    std::string c_format;
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 == format.size()) {
            c_format += format[i];
            continue;
        }
        const char k = format[++i];
        if (k == 'f') c_format += fmt::format("{:06d}", now.tv_nsec / 1000);
        else if (k != 'z' && k != 'Z') c_format += {'%', k};
    }
    if (c_format.empty()) return "";
    std::string out(std::max<std::size_t>(1024, 256 * c_format.size()), '\0');  // Python's largest buffer
    out.resize(std::strftime(out.data(), out.size(), c_format.c_str(), &local));
    return out;
}

const std::string& str_arg(const Value& v, const std::string& what) {
    if (!v.defined || !v.j().is_string()) error(what + " needs a string, got " + type_name(v));
    return v.j().get_ref<const std::string&>();
}

// Python's strip family: `chars` null strips white space.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
    const std::u32string cs = codepoints(s);
    const std::u32string set = chars && chars->defined && !chars->j().is_null() ? codepoints(str_arg(*chars, "strip()")) : U"";
    auto drop = [&](char32_t c) { return chars && chars->defined && !chars->j().is_null() ? set.find(c) != std::u32string::npos : py_space(c); };
    std::size_t b = 0, e = cs.size();
    while (left && b < e && drop(cs[b])) ++b;
    while (right && e > b && drop(cs[e - 1])) --e;
    return utf8(std::u32string_view(cs).substr(b, e - b));
}

// str.split(sep) and str.split() (runs of white space, no empty parts);
// `fixed`, when given, is the separator.
Json split(const std::string& s, const Value* sep, std::string_view fixed = {}) {
    Json out = Json::array();
    if (!fixed.empty() || (sep && sep->defined && !sep->j().is_null())) {
        const std::string d = fixed.empty() ? str_arg(*sep, "split()") : std::string(fixed);
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

// How deep j nests, counted up to `limit` levels (so the recursion stays within it).
long long nesting(const Json& j, long long limit) {
    if (limit <= 0 || !j.is_structured()) return 0;
    long long d = 0;
    for (const Json& x : j) d = std::max(d, nesting(x, limit - 1));
    return d + 1;
}

long long length(const Value& v) {
    if (!v.defined) return 0;
    if (v.j().is_string()) return (long long)codepoints(v.j().get_ref<const std::string&>()).size();
    if (v.j().is_array() || v.j().is_object()) return (long long)v.j().size();
    error("the length of a " + type_name(v));
}

// Python's == on JSON values: True == 1, 1 == 1.0, dicts equal whatever their
// keys' order, lists item by item; no other mixed types equal.
bool equal(const Json& a, const Json& b) {
    auto numeric = [](const Json& j) { return j.is_number() || j.is_boolean(); };
    if (numeric(a) && numeric(b) && (a.is_boolean() || b.is_boolean()))
        return (a.is_boolean() ? double(a.get<bool>()) : a.get<double>()) ==
               (b.is_boolean() ? double(b.get<bool>()) : b.get<double>());
    if (a.is_array() && b.is_array())
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Json& x, const Json& y) { return equal(x, y); });
    if (a.is_object() && b.is_object()) {
        if (a.size() != b.size()) return false;
        for (auto it = a.begin(); it != a.end(); ++it)
            if (!b.contains(it.key()) || !equal(*it, b[it.key()])) return false;
        return true;
    }
    return a == b;
}

// Undefined equals undefined (Jinja2's Undefined.__eq__); namespaces,
// generators and functions equal only themselves.
bool equal(const Value& a, const Value& b) {
    if (!a.defined || !b.defined) return !a.defined && !b.defined;
    if (a.space || b.space || a.gen || b.gen) return a.space == b.space && a.gen == b.gen;
    if (!a.function.empty() || !b.function.empty()) return a.function == b.function;
    return equal(a.j(), b.j());
}

double number(const Value& v, const std::string& op) {
    if (!v.defined || v.space || v.gen || !v.function.empty() || !v.j().is_number() || v.j().is_boolean())
        error("'" + op + "' on a " + type_name(v));
    return v.j().get<double>();
}

// An integer as 64 bits; a JSON number past them (18446744073709551615) is refused, never wrapped.
long long int_of(const Json& j) {
    if (j.is_number_unsigned() && j.get<unsigned long long>() > (unsigned long long)LLONG_MAX) error("an integer past 64 bits");
    return j.get<long long>();
}

bool both_int(const Value& a, const Value& b) {
    return a.j().is_number_integer() && b.j().is_number_integer() && !a.j().is_boolean() && !b.j().is_boolean();
}

Value compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return val(equal(a, b));
    if (op == "!=") return val(!equal(a, b));
    int c = 0;
    if (a.defined && b.defined && a.j().is_string() && b.j().is_string()) c = a.j().get_ref<const std::string&>().compare(b.j().get_ref<const std::string&>());
    else c = number(a, op) < number(b, op) ? -1 : number(a, op) > number(b, op) ? 1 : 0;
    return val(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
}

// The items a for loop, |list or |selectattr reads from v, as a list: a
// list's items (itself, not copied), a dict's keys, a string's characters, a
// generator's (once); nothing from undefined.
Value iterate(const Value& v, const std::string& what) {
    if (!v.defined) return val(Json::array());
    if (v.gen) {
        if (v.gen->used) error(what + " a generator (selectattr/rejectattr's result) a second time: Jinja2's is "
                               "spent after one pass; |list keeps the items");
        v.gen->used = true;
        return val(std::move(v.gen->items));
    }
    if (v.space || !v.function.empty()) error(what + " a " + type_name(v));
    if (v.j().is_array()) return v;
    Json items = Json::array();
    if (v.j().is_object())
        for (auto it = v.j().begin(); it != v.j().end(); ++it) items.push_back(it.key());
    else if (v.j().is_string())
        for (char32_t c : codepoints(v.j().get_ref<const std::string&>())) items.push_back(utf8(std::u32string(1, c)));
    else
        error(what + " a " + type_name(v));
    return val(std::move(items));
}

bool contains(const Value& hay, const Value& needle) {
    if (!hay.defined) error("'in' an undefined value");
    if (!hay.gen && hay.j().is_string())
        return hay.j().get_ref<const std::string&>().find(str_arg(needle, "'in' a string")) != std::string::npos;
    const Value items = iterate(hay, "'in'");
    for (const Json& x : items.j())  // a dict's keys, a list's or generator's items
        if (equal(val(x), needle)) return true;
    return false;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") return val(text(a) + text(b));
    if (op == "+" && a.defined && b.defined && a.j().is_string() && b.j().is_string())
        return val(a.j().get<std::string>() + b.j().get<std::string>());
    if (op == "+" && a.defined && b.defined && a.j().is_array() && b.j().is_array()) {
        Json out = a.j();
        out.insert(out.end(), b.j().begin(), b.j().end());
        return val(out);
    }
    const double x = number(a, op), y = number(b, op);
    if (op == "/") {
        if (y == 0) error("division by zero");
        return val(x / y);
    }
    if (!both_int(a, b)) {
        if ((op == "%" || op == "//") && y == 0) error("division by zero");
        const double r = op == "+" ? x + y : op == "-" ? x - y : op == "*" ? x * y
                       : op == "//" ? std::floor(x / y) : x - y * std::floor(x / y);
        return val(r);
    }
    const long long p = int_of(a.j()), q = int_of(b.j());
    long long r = 0;
    if (op == "+" || op == "-" || op == "*") {
        // Python's integers do not overflow; 64 bits do: refuse rather than wrap.
        const bool over = op == "+" ? __builtin_add_overflow(p, q, &r)
                        : op == "-" ? __builtin_sub_overflow(p, q, &r) : __builtin_mul_overflow(p, q, &r);
        if (over) error("an integer past 64 bits");
        return val(r);
    }
    // Only // and % divide: p / q with q == 0 (or LLONG_MIN / -1) traps the CPU, SIGFPE.
    if (q == 0) error("division by zero");
    if (p == LLONG_MIN && q == -1) error("an integer past 64 bits");
    const long long fl = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));  // Python's floor division
    r = op == "//" ? fl : p - q * fl;
    return val(r);
}

// A slice bound: an integer (None counts as left out), as Python takes it.
long long slice_index(const Value& v) {
    if (!v.j().is_number_integer() || v.j().is_boolean() || v.space || v.gen || !v.function.empty())
        error("a slice bound that is a " + type_name(v) + ", not an integer");
    return std::clamp(int_of(v.j()), -(1LL << 62), 1LL << 62);  // beyond any length; keeps i + n from overflowing
}

// Python's slice indices for a sequence of n items.
std::vector<long long> slice_positions(long long n, const Value* lo, const Value* hi, const Value* st) {
    auto opt = [](const Value* v) { return v && v->defined && !v->j().is_null(); };
    const long long step = opt(st) ? slice_index(*st) : 1;
    if (step == 0) error("a slice step of 0");
    auto clamp = [&](const Value* v, long long dflt) {
        if (!opt(v)) return dflt;
        long long i = slice_index(*v);
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
    Evaluator(const Json& globals, const Limits& limits) : limits_(limits) {
        scopes_.emplace_back();
        for (auto it = globals.begin(); it != globals.end(); ++it) scopes_[0][it.key()] = val(*it);
    }

    void run(const Body& body) {
        for (const Node& n : body) node(n);
    }

    std::string out;

private:
    // One step, or `n` for an operation that walks or copies n items.
    void step(std::size_t n = 1) {
        steps_ += (long long)std::min<std::size_t>(n, std::size_t(limits_.steps) + 1);
        if (steps_ > limits_.steps) error(fmt::format("the template ran past {} steps", limits_.steps));
    }

    // Every string a render makes or copies counts against limits_.text_bytes.
    const Value& charged(const Value& v) {
        if (v.j().is_string()) built_ += v.j().get_ref<const std::string&>().size();
        if (built_ > limits_.text_bytes) error(fmt::format("the template made more than {} bytes of text", limits_.text_bytes));
        return v;
    }

    void node(const Node& n) {
        step();
        switch (n.kind) {
            case Node::Kind::text: out += n.text; break;
            case Node::Kind::output: out += charged(val(text(eval(*n.expr)))).j().get_ref<const std::string&>(); break;
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
        target.space->attrs[n.attr] = std::move(v);
    }

    // A loop's body runs in its own scope: its {% set %}s end with it, as in Jinja.
    // With a filter (for x in xs if cond) the loop sees only the items kept:
    // loop.index and loop.length count those.
    void loop(const Node& n) {
        Value items = iterate(eval(*n.expr), "looping over");
        if (n.filter) items = kept(n, items);
        const long long len = (long long)items.j().size();
        for (long long i = 0; i < len; ++i) {
            step();
            scopes_.emplace_back();
            bind(n, sub(items, items.j()[std::size_t(i)]));
            scopes_.back()["loop"] = val(Json{{"index0", i}, {"index", i + 1}, {"first", i == 0}, {"last", i == len - 1},
                                              {"length", len}, {"revindex", len - i}, {"revindex0", len - i - 1}});
            run(n.body);
            scopes_.pop_back();
        }
    }

    // The items for which the loop's filter holds, each tried with the loop variables bound.
    Value kept(const Node& n, const Value& items) {
        Json out = Json::array();
        for (const Json& item : items.j()) {
            scopes_.emplace_back();
            bind(n, sub(items, item));
            const bool keep = truthy(eval(*n.filter));
            scopes_.pop_back();
            if (keep) out.push_back(item);
        }
        return val(std::move(out));
    }

    // The loop variable, or with {% for a, b in ... %} the item unpacked as Python does:
    // a list's items, a string's characters or a dict's keys, exactly as many as the names.
    void bind(const Node& n, const Value& item) {
        if (n.targets.empty()) return void(scopes_.back()[n.text] = item);
        if (!item.j().is_structured() && !item.j().is_string()) error("unpacking a " + type_name(item) + " in a for loop");
        const Value parts = iterate(item, "unpacking");
        if (parts.j().size() != n.targets.size())
            error(fmt::format("unpacking {} values into {} loop variables", parts.j().size(), n.targets.size()));
        for (std::size_t k = 0; k < n.targets.size(); ++k) scopes_.back()[n.targets[k]] = sub(parts, parts.j()[k]);
    }

    // A variable, else one of Jinja2's global functions (as a value: `strftime_now is defined`).
    Value lookup(const std::string& name) const {
        for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
            if (auto it = s->find(name); it != s->end()) return it->second;
        if (std::find(kGlobalFunctions.begin(), kGlobalFunctions.end(), name) == kGlobalFunctions.end()) return kUndefined;
        Value f = kUndefined;
        f.defined = true;
        f.function = name;
        return f;
    }

    Value eval(const Expr& e) {
        step();
        return charged(evaluate(e));
    }

    Value evaluate(const Expr& e) {
        switch (e.kind) {
            case Expr::Kind::literal: return val(e.value);
            case Expr::Kind::list: return list(e);
            case Expr::Kind::cond:
                if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
                return e.args[2] ? eval(*e.args[2]) : kUndefined;
            case Expr::Kind::name: return lookup(e.name);
            case Expr::Kind::attr: return attribute(eval(*e.args[0]), e.name);
            case Expr::Kind::index: return item(eval(*e.args[0]), eval(*e.args[1]));
            case Expr::Kind::slice: return slice(e);
            case Expr::Kind::call: return call(e);
            case Expr::Kind::method: return method(e);
            case Expr::Kind::filter: return filter(e);
            case Expr::Kind::test: return val(test(e) != e.negated);
            case Expr::Kind::unary: return unary(e);
            case Expr::Kind::binary: return binary(e);
        }
        error("unknown expression");
    }

    // v as JSON, to be stored in a list or namespace (undefined becomes None). A
    // namespace, generator or function has no JSON form, and a list may not nest
    // past kMaxNesting.
    static Json plain(const Value& v, const std::string& where) {
        if (v.space || v.gen || !v.function.empty()) error("a " + type_name(v) + " in " + where);
        if (v.defined && nesting(v.j(), kMaxNesting) >= kMaxNesting) error(fmt::format("a list nested more than {} deep", kMaxNesting));
        return v.defined ? v.j() : Json(nullptr);
    }

    Value list(const Expr& e) {
        Json a = Json::array();
        for (const ExprP& x : e.args) a.push_back(plain(eval(*x), "a list item"));
        return val(a);
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
        if (obj.space) {
            const auto it = obj.space->attrs.find(name);
            return it == obj.space->attrs.end() ? kUndefined : it->second;
        }
        if (!obj.j().is_object()) return kUndefined;
        const auto it = obj.j().find(name);
        return it == obj.j().end() ? kUndefined : sub(obj, *it);
    }

    // obj[key]; as in Jinja2, undefined where there is no such item, and for a
    // value that has no items (a number, a generator).
    static Value item(const Value& obj, const Value& key) {
        if (!obj.defined) error("an item of an undefined value");
        if (obj.space) return attribute(obj, str_arg(key, "a namespace's item"));
        if (obj.j().is_object()) return key.defined && key.j().is_string() ? attribute(obj, key.j().get<std::string>()) : kUndefined;
        if (obj.gen || !obj.function.empty() || (!obj.j().is_array() && !obj.j().is_string())) return kUndefined;
        if (!key.defined || !key.j().is_number_integer() || key.j().is_boolean()) return kUndefined;
        long long i = std::clamp(int_of(key.j()), -(1LL << 62), 1LL << 62);
        if (obj.j().is_array()) {
            const long long n = (long long)obj.j().size();
            if (i < 0) i += n;
            return i >= 0 && i < n ? sub(obj, obj.j()[std::size_t(i)]) : kUndefined;
        }
        const std::u32string cs = codepoints(obj.j().get_ref<const std::string&>());
        if (i < 0) i += (long long)cs.size();
        return i >= 0 && i < (long long)cs.size() ? val(utf8(cs.substr(std::size_t(i), 1))) : kUndefined;
    }

    Value slice(const Expr& e) {
        const Value obj = eval(*e.args[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k) parts[k] = e.args[std::size_t(k) + 1] ? eval(*e.args[std::size_t(k) + 1]) : kUndefined;
        if (obj.defined && obj.j().is_array()) {
            step(obj.j().size());
            Json out = Json::array();
            for (long long i : slice_positions((long long)obj.j().size(), &parts[0], &parts[1], &parts[2])) out.push_back(obj.j()[std::size_t(i)]);
            return val(out);
        }
        if (!obj.defined || !obj.j().is_string()) error("slicing a " + type_name(obj));
        const std::u32string cs = codepoints(obj.j().get_ref<const std::string&>());
        std::u32string out;
        for (long long i : slice_positions((long long)cs.size(), &parts[0], &parts[1], &parts[2])) out += cs[std::size_t(i)];
        return val(utf8(out));
    }

    Value call(const Expr& e) {
        if (e.name == "raise_exception") {
            const std::vector<Value> a = args(e, 0, 1, "raise_exception()");
            throw RenderError("the chat template refused these messages: " + (a.empty() ? std::string() : text(a[0])));
        }
        if (e.name == "strftime_now") {
            const std::vector<Value> a = args(e, 0, 1, "strftime_now()");
            if (a.empty()) error("strftime_now() needs a format");
            return val(strftime_now(str_arg(a[0], "strftime_now()")));
        }
        auto space = std::make_shared<Namespace>();
        for (std::size_t i = 0; i < e.args.size(); ++i) {
            if (e.kwargs[i].empty()) error("namespace() with a positional argument");
            Value v = eval(*e.args[i]);
            if (v.space) error("a namespace stored in a namespace");
            space->attrs[e.kwargs[i]] = std::move(v);
        }
        Value out = val(nullptr);
        out.space = space;
        return out;
    }

    Value method(const Expr& e) {
        const Value obj = eval(*e.args[0]);
        const std::string& m = e.name;
        if (m == "items") {  // a dict's (key, value) pairs, each a two-item list
            if (!obj.defined || obj.gen || obj.space || !obj.j().is_object()) error(".items() on a " + type_name(obj));
            args(e, 1, 0, ".items()");
            Json pairs = Json::array();
            step(obj.j().size());
            for (auto it = obj.j().begin(); it != obj.j().end(); ++it) pairs.push_back(Json::array({it.key(), *it}));
            return val(pairs);
        }
        if (m == "get") {
            if (!obj.defined || !obj.j().is_object()) error(".get() on a " + type_name(obj));
            const std::vector<Value> a = args(e, 1, 2, ".get()");
            if (a.empty()) error(".get() needs a key");
            const Value v = item(obj, a[0]);
            return v.defined ? v : a.size() > 1 ? a[1] : val(nullptr);
        }
        const std::string& s = str_arg(obj, "." + m + "()");
        const std::vector<Value> a = args(e, 1, 2, "." + m + "()");
        const Value* a0 = a.empty() ? nullptr : &a[0];
        if (m == "startswith" || m == "endswith") {
            if (a.size() != 1) error("." + m + "() takes one string");
            const std::string& x = str_arg(a[0], "." + m + "()");
            return val(m == "startswith" ? s.starts_with(x) : s.ends_with(x));
        }
        if (m == "strip" || m == "lstrip" || m == "rstrip") return val(strip(s, a0, m != "rstrip", m != "lstrip"));
        if (m == "split") {
            if (a.size() > 1) error(".split() with maxsplit is not supported");
            return val(split(s, a0));
        }
        if (m == "upper" || m == "lower") return val(map_case(s, m == "upper"));
        if (a.size() != 2) error(".replace() takes two strings");  // replace
        const std::string& from = str_arg(a[0], ".replace()"), &to = str_arg(a[1], ".replace()");
        if (from.empty()) error(".replace() of an empty string");
        std::string out;
        std::size_t at = 0;
        for (std::size_t k; (k = s.find(from, at)) != std::string::npos; at = k + from.size()) out += s.substr(at, k - at) + to;
        return val(out + s.substr(at));
    }

    Value filter(const Expr& e) {
        const Value v = eval(*e.args[0]);
        const std::string& f = e.name;
        if (f == "default" || f == "d") {
            const std::vector<Value> a = args(e, 1, 2, "|default");
            const bool falsy = a.size() > 1 && truthy(a[1]);
            if (v.defined && !(falsy && !truthy(v))) return v;
            return a.empty() ? val("") : a[0];
        }
        if (f == "tojson") return tojson(e, v);
        if (f == "selectattr" || f == "rejectattr") return select_attribute(e, v);
        args(e, 1, 0, "|" + f);
        if (f == "length" || f == "count") return val(length(v));
        if (f == "list") return iterate(v, "|list of");
        const std::string s = text(v);
        if (f == "string") return val(s);
        if (f == "trim") return val(strip(s, nullptr, true, true));
        return val(map_case(s, f == "upper" ? 1 : f == "lower" ? 0 : 2));  // capitalize lowers the rest
    }

    // transformers' tojson: json.dumps(v, ensure_ascii=False, indent=indent).
    Value tojson(const Expr& e, const Value& v) {
        std::optional<long long> indent;
        for (std::size_t i = 1; i < e.args.size(); ++i) {  // the parser let only indent= through
            const Value n = eval(*e.args[i]);
            if (n.j().is_null()) continue;
            if (!n.j().is_number_integer() || n.j().is_boolean() || n.gen || n.space || !n.function.empty())
                error("|tojson(indent=...) of a " + type_name(n) + ", not an integer");
            indent = int_of(n.j());
            if (*indent > 100) error("|tojson(indent=...) past 100");
        }
        if (!v.defined) error("|tojson of an undefined value");
        return val(dumps(plain(v, "|tojson"), indent));
    }

    // xs|selectattr(attr[, test, arg...]): the items whose attribute passes the
    // test (or is true); rejectattr the others. A generator, as in Jinja2. The
    // attribute may be a path, "a.b.0"; nothing is read from a false xs.
    Value select_attribute(const Expr& e, const Value& xs) {
        const std::vector<Value> a = args(e, 1, 3, "|" + e.name);
        if (a.empty()) error("|" + e.name + " needs an attribute name");
        const std::vector<Json> path = attribute_path(a[0]);
        const std::string test_name = a.size() > 1 ? str_arg(a[1], "|" + e.name + "'s test") : "";
        const std::vector<Value> test_args(a.begin() + std::min<std::ptrdiff_t>(2, std::ptrdiff_t(a.size())), a.end());
        auto gen = std::make_shared<Generator>();
        gen->items = Json::array();
        const Value items = truthy(xs) ? iterate(xs, "|" + e.name + " over") : val(Json::array());
        for (const Json& x : items.j()) {
            step();
            Value at = sub(items, x);
            for (const Json& key : path) at = item(at, val(key));
            const bool pass = test_name.empty() ? truthy(at) : test(test_name, at, test_args);
            if (pass == (e.name == "selectattr")) gen->items.push_back(x);
        }
        Value out = val(nullptr);
        out.gen = gen;
        return out;
    }

    // Jinja2's attribute paths: "a.b.0" reads ["a"]["b"][0]; a number reads that item.
    static std::vector<Json> attribute_path(const Value& attr) {
        if (attr.j().is_number_integer() && !attr.j().is_boolean()) return {attr.j()};
        std::vector<Json> path;
        for (const Json& part : split(str_arg(attr, "an attribute name"), nullptr, ".")) {
            const std::string& p = part.get_ref<const std::string&>();
            const bool digits = !p.empty() && p.size() <= 18 && p.find_first_not_of("0123456789") == std::string::npos;
            path.push_back(digits ? Json(std::stoll(p)) : part);
        }
        return path;
    }

    bool test(const Expr& e) {
        const Value v = eval(*e.args[0]);
        std::vector<Value> a;
        for (std::size_t i = 1; i < e.args.size(); ++i) a.push_back(eval(*e.args[i]));
        return test(e.name, v, a);
    }

    // Jinja2's tests; `args` after the value (equalto's other side).
    static bool test(const std::string& t, const Value& v, const std::vector<Value>& args) {
        const std::size_t wanted = t == "equalto" ? 1 : 0;
        if (args.size() != wanted) error(fmt::format("the test '{}' with {} argument(s) (it takes {})", t, args.size(), wanted));
        const Json& j = v.j();
        const bool d = v.defined && !v.space && !v.gen && v.function.empty();
        if (t == "equalto") return equal(v, args[0]);
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
        if (t == "iterable" && v.gen) return true;
        if (t == "iterable" || t == "sequence") return !v.defined || (d && (j.is_string() || j.is_array() || j.is_object()));
        error("no test named '" + t + "'");
    }

    Value unary(const Expr& e) {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return val(!truthy(v));
        const double x = number(v, e.name);
        if (e.name == "+") return v;
        if (v.j().is_number_float()) return val(-x);
        const long long i = int_of(v.j());
        if (i == LLONG_MIN) error("an integer past 64 bits");
        return val(-i);
    }

    Value binary(const Expr& e) {
        const std::string& op = e.name;
        const Value a = eval(*e.args[0]);
        if (op == "and") return truthy(a) ? eval(*e.args[1]) : a;
        if (op == "or") return truthy(a) ? a : eval(*e.args[1]);
        const Value b = eval(*e.args[1]);
        step(a.j().size() + b.j().size());  // the lists or dicts compared, concatenated or searched
        if (op == "in" || op == "not in") return val(contains(b, a) != (op == "not in"));
        if (op.size() <= 2 && op.find_first_of("=<>!") != std::string::npos) return compare(op, a, b);
        return arithmetic(op, a, b);
    }

    std::vector<std::map<std::string, Value>> scopes_;
    const Limits limits_;
    long long steps_ = 0;
    std::size_t built_ = 0;
};

}  // namespace

std::string render(const Body& body, const Json& globals, const Limits& limits) {
    Evaluator ev(globals, limits);
    ev.run(body);
    return std::move(ev.out);
}

}  // namespace pd::tok::tmpl
