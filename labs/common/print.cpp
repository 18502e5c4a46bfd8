#include "print.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pd::lab {

std::string quoted(const std::string& bytes) {
    std::string out = "\"";
    for (unsigned char ch : bytes) {
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '"') out += "\\\"";
        else if (ch >= 0x20 && ch < 0x7f) out += char(ch);
        else out += fmt::format("\\x{:02x}", ch);
    }
    return out + "\"";
}

std::string quoted_token(const Tokenizer& tok, int id) { return quoted(tok.token_bytes(id)); }

std::string id_list(const std::vector<int>& ids) { return fmt::format("{}", fmt::join(ids, ", ")); }

std::string text_of(const Tokenizer& tok, const std::vector<int>& ids) {
    StreamDecoder d(tok);
    std::string s;
    for (int id : ids) s += d.push(id);
    return s + d.flush();
}

std::string human_bytes(double b) {
    const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024.0 && i < 4) b /= 1024.0, i++;
    return i == 0 ? fmt::format("{:.0f} {}", b, unit[i]) : fmt::format("{:.1f} {}", b, unit[i]);
}

std::string shape(std::initializer_list<long> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

std::string synthetic_body(const std::string& spec) {
    const std::string prefix = "synthetic:";
    return spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : spec;
}

}  // namespace pd::lab
