// Comparing a student's lab JSON with the reference solution's: integers,
// strings, booleans and nulls exactly, other numbers within a tolerance,
// arrays element by element, objects key by key. Keys that hold timings are
// skipped inside compared values (a rubric names only deterministic fields).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pd::grade {

using json = nlohmann::json;

// Points that scale with a value (lab 17's goodput): the student's number in
// `field` over the reference's, r; the check earns its points times
// clamp((r - zero_at) / (full_at - zero_at), 0, 1). Never more than full points;
// a missing field, a string, null (JSON's NaN and inf), a negative number or a
// reference value that is not > 0 earns none.
struct ScaleSpec {
    std::string field;  // empty: all or nothing
    double zero_at = 0, full_at = 1;
    bool any() const { return !field.empty(); }
};

// The share of the points in [0, 1], and `why` (one line for the report).
double scaled_share(const json& got, const json& want, const ScaleSpec& spec, std::string& why);

struct CompareSpec {
    // Paths of the fields to compare ("head_map", "cache.bytes_per_token",
    // "steps[0].len" or "steps.0.len"); empty: the whole document.
    std::vector<std::string> fields;
    double float_rtol = 0;  // a float passes when |got - want| <= float_atol + float_rtol * |want|
    double float_atol = 0;
    // Object keys skipped inside compared values: a key is skipped when it, or
    // one of its '_'-separated words, is in this set ("ms" skips "ttft_ms").
    std::set<std::string> ignore = default_ignore();
    ScaleSpec scale;  // optional: once the fields match, the points scale with this value

    static std::set<std::string> default_ignore();
};

// Where `path` points inside `doc`, or nullptr.
const json* find_path(const json& doc, const std::string& path);

bool is_ignored_key(const std::string& key, const std::set<std::string>& ignore);

// The differences, each one line ("head_map[3]: got 2, expected 1"); empty when
// the documents agree. At most `max` lines, then a count of the rest.
std::vector<std::string> compare_json(const json& got, const json& want, const CompareSpec& spec,
                                      std::size_t max = 8);

}  // namespace pd::grade
