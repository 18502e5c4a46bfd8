// Checked access to untrusted JSON: config.json, tokenizer.json, a safetensors
// header, a shard index. Every typed read goes through here so that a wrong
// type, a number out of range or a fraction where an integer belongs is one
// UserError (exit 2) naming the file and the key, never an "internal error"
// or a silent narrowing (2^32+256 read as 256, 2.5 read as 2).
//
// Messages never echo the untrusted value: they name its JSON type, or for a
// number its value (a number prints in a bounded length), and clip keys.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pd {

using Json = nlohmann::json;

// Real files nest at most ~6 deep (tokenizer.json: root, model, merges, pair).
constexpr int kMaxJsonDepth = 64;

// `text` parsed; a UserError naming `origin` (and the byte where it went wrong)
// for invalid JSON or nesting deeper than kMaxJsonDepth.
Json parse_json(std::string_view text, const std::string& origin);

// "a string", "an array", "the number 2.5": what a message may say about a value.
std::string describe_json(const Json& v);

// `s` as a JSON string literal, cut to `max_chars` bytes ("..." marks the cut).
std::string clipped_quote(std::string_view s, std::size_t max_chars = 60);

// The value itself, type-checked; `where` is "file: key" for the message.
long long json_integer(const Json& v, const std::string& where, long long lo, long long hi);
double json_number(const Json& v, const std::string& where, double lo, double hi);
bool json_bool(const Json& v, const std::string& where);
const std::string& json_string(const Json& v, const std::string& where);
const Json& json_array(const Json& v, const std::string& where);

// A JSON object read field by field. Absent and null fields take the fallback.
class JsonObject {
public:
    // Fails unless `j` is an object; `path` is its key path in the file ("model").
    JsonObject(const Json& j, std::string origin, std::string path = "");

    const Json& json() const { return j_; }
    const std::string& origin() const { return origin_; }
    // "origin: path.key", for messages.
    std::string where(std::string_view key) const;
    // The field, or nullptr when it is absent or null.
    const Json* find(std::string_view key) const;
    // The field, or a null value when it is absent.
    const Json& value_or_null(std::string_view key) const;

    long long integer(std::string_view key, long long lo, long long hi) const;
    long long integer_or(std::string_view key, long long fallback, long long lo, long long hi) const;
    double number_or(std::string_view key, double fallback, double lo, double hi) const;
    bool bool_or(std::string_view key, bool fallback) const;
    std::string string(std::string_view key) const;
    std::string string_or(std::string_view key, std::string fallback) const;
    JsonObject object(std::string_view key) const;
    const Json& array(std::string_view key) const;
    // The array, or an empty one when the field is absent or null.
    const Json& array_or_empty(std::string_view key) const;

private:
    const Json& required(std::string_view key) const;

    const Json& j_;
    std::string origin_;
    std::string path_;
};

}  // namespace pd
