#include "observations.hpp"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "compare.hpp"
#include "workdir.hpp"

namespace pd::grade {

namespace {

// A student's program wrote the strings: shown clipped, on one line.
std::string clip_one_line(const std::string& s, std::size_t max = 80) {
    std::string out;
    for (char ch : s.substr(0, max)) out += (ch == '\n' || ch == '\r') ? ' ' : ch;
    return s.size() > max ? out + "..." : out;
}

const json& field(const json& obj, const char* key, bool (json::*is)() const noexcept, const char* type) {
    auto it = obj.find(key);
    if (it == obj.end() || !((*it).*is)()) throw std::runtime_error(fmt::format("no {} \"{}\"", type, key));
    return *it;
}

Observation observation_of(const json& o) {
    if (!o.is_object()) throw std::runtime_error("an observation that is not an object");
    Observation ob;
    ob.what = field(o, "what", &json::is_string, "string").get<std::string>();
    ob.atol = field(o, "atol", &json::is_number, "number").get<double>();
    ob.rtol = field(o, "rtol", &json::is_number, "number").get<double>();
    auto v = o.find("v");
    if (v == o.end()) throw std::runtime_error("an observation without a value \"v\"");
    ob.value = *v;
    return ob;
}

CaseObservations case_of(const json& line) {
    if (!line.is_object()) throw std::runtime_error("not a JSON object");
    CaseObservations c;
    c.test_case = field(line, "case", &json::is_string, "string").get<std::string>();
    c.passed = field(line, "passed", &json::is_boolean, "boolean").get<bool>();
    for (const auto& o : field(line, "obs", &json::is_array, "array")) c.obs.push_back(observation_of(o));
    return c;
}

}  // namespace

std::vector<CaseObservations> parse_observations(const std::string& text) {
    std::vector<CaseObservations> cases;
    std::stringstream ss(text);
    int number = 0;
    for (std::string line; std::getline(ss, line);) {
        number++;
        if (line.empty()) continue;
        try {
            cases.push_back(case_of(parse_json_limited(line, 16)));
        } catch (const std::exception& e) {
            throw std::runtime_error(fmt::format("line {}: {}", number, clip_one_line(e.what())));
        }
    }
    return cases;
}

std::optional<std::vector<CaseObservations>> read_observations(const fs::path& file, std::string& why) {
    auto text = read_untrusted(file, kMaxObservationBytes, why);
    if (!text) return std::nullopt;
    try {
        return parse_observations(*text);
    } catch (const std::exception& e) {
        why = fmt::format("garbled observations ({})", e.what());
        return std::nullopt;
    }
}

std::optional<Mismatch> compare_observations(const std::vector<CaseObservations>& got,
                                             const std::vector<CaseObservations>& want) {
    for (std::size_t i = 0; i < std::max(got.size(), want.size()); i++) {
        if (i >= got.size())
            return Mismatch{false, fmt::format("test case {} recorded no observations: the test program did not "
                                               "run it to its end", want[i].test_case)};
        if (i >= want.size())
            return Mismatch{false, fmt::format("observations of a test case the check does not run: \"{}\"",
                                               clip_one_line(got[i].test_case))};
        const auto& g = got[i];
        const auto& w = want[i];
        if (g.test_case != w.test_case)
            return Mismatch{false, fmt::format("the observations of test case {} were expected next, found \"{}\"",
                                               w.test_case, clip_one_line(g.test_case))};
        if (!g.passed) return Mismatch{true, fmt::format("{}: the test case failed", w.test_case)};
        if (g.obs.size() != w.obs.size())
            return Mismatch{false, fmt::format("{}: {} observations recorded, the reference solution's run "
                                               "recorded {}", w.test_case, g.obs.size(), w.obs.size())};
        for (std::size_t j = 0; j < w.obs.size(); j++) {
            const auto& a = g.obs[j];
            const auto& b = w.obs[j];
            if (a.what != b.what)
                return Mismatch{false, fmt::format("{}: observation {} should be \"{}\", found \"{}\"", w.test_case,
                                                   j + 1, b.what, clip_one_line(a.what))};
            CompareSpec spec;
            spec.float_atol = b.atol, spec.float_rtol = b.rtol, spec.ignore = {};
            auto diffs = compare_json(a.value, b.value, spec, 1);
            if (!diffs.empty())
                return Mismatch{true, fmt::format("{}: {}{} (the reference solution's value, same inputs)",
                                                  w.test_case, b.what, diffs[0])};
        }
    }
    return std::nullopt;
}

std::size_t count_observations(const std::vector<CaseObservations>& cases) {
    std::size_t n = 0;
    for (const auto& c : cases) n += c.obs.size();
    return n;
}

}  // namespace pd::grade
