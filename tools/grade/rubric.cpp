#include "rubric.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace pd::grade {

double Rubric::max_points() const {
    double s = 0;
    for (const auto& c : checks) s += c.points;
    return s;
}

namespace {

void only_keys(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
    for (const auto& [k, v] : obj.items()) {
        if (!allowed.count(k)) {
            std::string list;
            for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
            throw RubricError(fmt::format("{}: unknown key \"{}\" (known: {})", where, k, list));
        }
    }
}

std::string get_string(const json& obj, const char* key, const std::string& where, bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
        if (required) throw RubricError(fmt::format("{}: \"{}\" is missing", where, key));
        return "";
    }
    if (!it->is_string()) throw RubricError(fmt::format("{}: \"{}\" must be a string", where, key));
    return it->get<std::string>();
}

double get_number(const json& obj, const char* key, const std::string& where, double fallback,
                  bool required) {
    auto it = obj.find(key);
    if (it == obj.end()) {
        if (required) throw RubricError(fmt::format("{}: \"{}\" is missing", where, key));
        return fallback;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
        throw RubricError(fmt::format("{}: \"{}\" must be a number >= 0", where, key));
    return it->get<double>();
}

std::vector<std::string> get_strings(const json& obj, const char* key, const std::string& where) {
    std::vector<std::string> out;
    auto it = obj.find(key);
    if (it == obj.end()) return out;
    if (!it->is_array()) throw RubricError(fmt::format("{}: \"{}\" must be a list of strings", where, key));
    for (const auto& v : *it) {
        if (!v.is_string())
            throw RubricError(fmt::format("{}: \"{}\" must be a list of strings", where, key));
        out.push_back(v.get<std::string>());
    }
    return out;
}

}  // namespace

namespace {

void check_name(const Check& k, const std::string& where, std::set<std::string>& names) {
    if (k.name.empty()) throw RubricError(where + ": \"name\" must not be empty");
    for (char ch : k.name)
        if (ch == ',' || ch == '"' || ch == '\n' || ch == '\r')
            throw RubricError(where + ": \"name\" is a gradebook column: no commas, quotes or newlines");
    if (!names.insert(k.name).second) throw RubricError(where + ": two checks have this name");
    if (k.name == "student" || k.name == "total" || k.name == "max" || k.name == "status" || k.name == "seed")
        throw RubricError(where + ": this name is taken by a gradebook column");
}

void parse_output_check(const json& c, const std::string& where, Check& k) {
    only_keys(c, {"name", "kind", "description", "points", "timeout", "args", "compare", "comment"}, where);
    k.args = get_strings(c, "args", where);
    for (const auto& a : k.args)
        if (a == "--json" || a.rfind("--json=", 0) == 0)
            throw RubricError(where + ": leave --json out of \"args\"; the grader adds it");
    auto cmp = c.find("compare");
    if (cmp == c.end() || !cmp->is_object())
        throw RubricError(where + ": \"compare\" is missing (an object with \"fields\")");
    std::string cw = where + ": compare";
    only_keys(*cmp, {"fields", "float_rtol", "float_atol", "ignore", "scale"}, cw);
    k.compare.fields = get_strings(*cmp, "fields", cw);
    if (cmp->find("fields") == cmp->end())
        throw RubricError(cw + ": \"fields\" is missing: name the JSON fields that must match "
                               "(an empty list compares the whole document except timing keys)");
    k.compare.float_rtol = get_number(*cmp, "float_rtol", cw, 0, false);
    k.compare.float_atol = get_number(*cmp, "float_atol", cw, 0, false);
    if (cmp->find("ignore") != cmp->end()) {
        auto ig = get_strings(*cmp, "ignore", cw);
        k.compare.ignore = std::set<std::string>(ig.begin(), ig.end());
    }
    if (auto sc = cmp->find("scale"); sc != cmp->end()) {
        const std::string sw = cw + ": scale";
        if (!sc->is_object()) throw RubricError(sw + ": must be an object with \"field\", \"zero_at\", \"full_at\"");
        only_keys(*sc, {"field", "zero_at", "full_at"}, sw);
        ScaleSpec& s = k.compare.scale;
        s.field = get_string(*sc, "field", sw, true);
        s.zero_at = get_number(*sc, "zero_at", sw, 0, true);
        s.full_at = get_number(*sc, "full_at", sw, 1, true);
        if (s.field.empty()) throw RubricError(sw + ": \"field\" is empty: name the JSON number the points scale with");
        if (!(s.zero_at >= 0 && s.full_at > s.zero_at && std::isfinite(s.full_at)))
            throw RubricError(fmt::format("{}: give 0 <= zero_at < full_at (finite), got {} and {}", sw, s.zero_at,
                                          s.full_at));
    }
}

Check parse_check(const json& c, const std::string& origin, int index, std::set<std::string>& names) {
    std::string where = fmt::format("{}: check {}", origin, index);
    if (!c.is_object()) throw RubricError(where + ": must be an object");
    Check k;
    k.name = get_string(c, "name", where, true);
    where = fmt::format("{}: check {} (\"{}\")", origin, index, k.name);
    check_name(k, where, names);
    k.kind = get_string(c, "kind", where, true);
    k.description = get_string(c, "description", where, false);
    k.points = get_number(c, "points", where, 0, true);
    k.timeout_s = get_number(c, "timeout", where, 0, false);
    if (k.kind == "test") {
        only_keys(c, {"name", "kind", "description", "points", "timeout", "test_case", "comment"}, where);
        k.test_case = get_string(c, "test_case", where, true);
        if (k.test_case.empty()) throw RubricError(where + ": \"test_case\" must not be empty");
    } else if (k.kind == "output") {
        parse_output_check(c, where, k);
    } else {
        throw RubricError(where + ": \"kind\" must be \"test\" or \"output\", got \"" + k.kind + "\"");
    }
    return k;
}

// "may_not_use": [{"symbol": "pd::argmax", "points": 5, "why": "..."}]
std::vector<Forbidden> parse_may_not_use(const json& j, const std::string& origin) {
    std::vector<Forbidden> out;
    auto list = j.find("may_not_use");
    if (list == j.end()) return out;
    if (!list->is_array()) throw RubricError(origin + ": \"may_not_use\" must be a list");
    for (const auto& f : *list) {
        std::string where = fmt::format("{}: may_not_use {}", origin, out.size() + 1);
        if (!f.is_object()) throw RubricError(where + ": must be an object");
        only_keys(f, {"symbol", "points", "why", "comment"}, where);
        Forbidden b{get_string(f, "symbol", where, true), get_number(f, "points", where, 0, true),
                    get_string(f, "why", where, false)};
        if (b.symbol.empty()) throw RubricError(where + ": \"symbol\" must not be empty");
        out.push_back(b);
    }
    return out;
}

}  // namespace

Rubric parse_rubric(const json& j, const std::string& origin) {
    if (!j.is_object()) throw RubricError(origin + ": the rubric must be a JSON object");
    // "seed": prose for instructors on how the tests use PDLAB_TEST_SEED.
    only_keys(j, {"lab", "title", "checks", "may_not_use", "seed", "comment"}, origin);
    Rubric r;
    r.lab = get_string(j, "lab", origin, true);
    r.title = get_string(j, "title", origin, false);
    auto checks = j.find("checks");
    if (checks == j.end() || !checks->is_array() || checks->empty())
        throw RubricError(origin + ": \"checks\" must be a non-empty list");
    std::set<std::string> names;
    int index = 0;
    for (const auto& c : *checks) r.checks.push_back(parse_check(c, origin, ++index, names));
    r.may_not_use = parse_may_not_use(j, origin);
    return r;
}

Rubric load_rubric(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw RubricError(path + ": cannot read it");
    std::stringstream ss;
    ss << in.rdbuf();
    json j;
    try {
        j = json::parse(ss.str());
    } catch (const json::parse_error& e) {
        throw RubricError(fmt::format("{}: not valid JSON: {}", path, e.what()));
    }
    return parse_rubric(j, path);
}

}  // namespace pd::grade
