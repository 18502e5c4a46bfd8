#include "io/json_checked.hpp"

#include <cmath>
#include <limits>

#include "common.hpp"

namespace pd {

Json parse_json(std::string_view text, const std::string& origin) {
    // Called as each value starts, with the count of containers around it;
    // refusing here stops the parse before a deep value is ever built.
    auto limit_depth = [&](int depth, Json::parse_event_t event, Json&) {
        bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
        if (opens && depth >= kMaxJsonDepth)
            fail("{}: JSON nested deeper than {} levels; no model file nests like this", origin, kMaxJsonDepth);
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), limit_depth);
    } catch (const Json::parse_error& e) {
        // e.what() quotes the text last read, which may be long; the byte is enough.
        fail("{}: not valid JSON (syntax error near byte {})", origin, e.byte);
    } catch (const Json::exception&) {
        fail("{}: not valid JSON (a number too large for a double)", origin);
    }
}

std::string describe_json(const Json& v) {
    switch (v.type()) {
        case Json::value_t::number_integer: return fmt::format("the number {}", v.get<long long>());
        case Json::value_t::number_unsigned: return fmt::format("the number {}", v.get<unsigned long long>());
        case Json::value_t::number_float: return fmt::format("the number {}", v.get<double>());
        case Json::value_t::object: return "an object";
        case Json::value_t::array: return "an array";
        case Json::value_t::string: return "a string";
        case Json::value_t::boolean: return "a boolean";
        case Json::value_t::null: return "null";
        default: return "a binary value";
    }
}

std::string clipped_quote(std::string_view s, std::size_t max_chars) {
    bool cut = s.size() > max_chars;
    std::string quoted = Json(std::string(s.substr(0, max_chars)))
                             .dump(-1, ' ', false, Json::error_handler_t::replace);
    return cut ? quoted + "..." : quoted;
}

long long json_integer(const Json& v, const std::string& where, long long lo, long long hi) {
    auto out_of_range = [&] {
        fail("{} must be an integer in {}..{}, got {}", where, lo, hi, describe_json(v));
    };
    if (v.is_number_unsigned()) {
        const unsigned long long u = v.get<unsigned long long>();
        if (u > static_cast<unsigned long long>(hi) || (lo > 0 && u < static_cast<unsigned long long>(lo)))
            out_of_range();
        return static_cast<long long>(u);
    }
    if (v.is_number_integer()) {
        if (v.get<long long>() < lo || v.get<long long>() > hi) out_of_range();
        return v.get<long long>();
    }
    // A float that is a whole number (64.0, 1e3) is that integer; 2.5 is refused.
    if (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>()) {
        double d = v.get<double>();
        if (d < double(lo) || d > double(hi)) out_of_range();
        return static_cast<long long>(d);
    }
    out_of_range();
    return 0;  // not reached: out_of_range() throws
}

double json_number(const Json& v, const std::string& where, double lo, double hi) {
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi))
        fail("{} must be a number in {}..{}, got {}", where, lo, hi, describe_json(v));
    return v.get<double>();
}

bool json_bool(const Json& v, const std::string& where) {
    if (!v.is_boolean()) fail("{} must be true or false, got {}", where, describe_json(v));
    return v.get<bool>();
}

const std::string& json_string(const Json& v, const std::string& where) {
    if (!v.is_string()) fail("{} must be a string, got {}", where, describe_json(v));
    return v.get_ref<const std::string&>();
}

const Json& json_array(const Json& v, const std::string& where) {
    if (!v.is_array()) fail("{} must be an array, got {}", where, describe_json(v));
    return v;
}

// --- JsonObject -----------------------------------------------------------------

JsonObject::JsonObject(const Json& j, std::string origin, std::string path)
    : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
    if (!j.is_object())
        fail("{}: {} must be a JSON object, got {}", origin_, path_.empty() ? "the file" : path_,
             describe_json(j));
}

std::string JsonObject::where(std::string_view key) const {
    return fmt::format("{}: {}{}{}", origin_, path_, path_.empty() ? "" : ".", key);
}

const Json* JsonObject::find(std::string_view key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
}

const Json& JsonObject::value_or_null(std::string_view key) const {
    static const Json null_value;
    const Json* v = find(key);
    return v ? *v : null_value;
}

const Json& JsonObject::required(std::string_view key) const {
    const Json* v = find(key);
    if (!v) fail("{} is missing", where(key));
    return *v;
}

long long JsonObject::integer(std::string_view key, long long lo, long long hi) const {
    return json_integer(required(key), where(key), lo, hi);
}

long long JsonObject::integer_or(std::string_view key, long long fallback, long long lo, long long hi) const {
    const Json* v = find(key);
    return v ? json_integer(*v, where(key), lo, hi) : fallback;
}

double JsonObject::number_or(std::string_view key, double fallback, double lo, double hi) const {
    const Json* v = find(key);
    return v ? json_number(*v, where(key), lo, hi) : fallback;
}

bool JsonObject::bool_or(std::string_view key, bool fallback) const {
    const Json* v = find(key);
    return v ? json_bool(*v, where(key)) : fallback;
}

std::string JsonObject::string(std::string_view key) const { return json_string(required(key), where(key)); }

std::string JsonObject::string_or(std::string_view key, std::string fallback) const {
    const Json* v = find(key);
    return v ? json_string(*v, where(key)) : fallback;
}

JsonObject JsonObject::object(std::string_view key) const {
    return JsonObject(required(key), origin_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

const Json& JsonObject::array(std::string_view key) const { return json_array(required(key), where(key)); }

const Json& JsonObject::array_or_empty(std::string_view key) const {
    static const Json empty = Json::array();
    const Json* v = find(key);
    return v ? json_array(*v, where(key)) : empty;
}

}  // namespace pd
