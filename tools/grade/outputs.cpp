#include "outputs.hpp"

#include <cctype>
#include <optional>
#include <string_view>
#include <sstream>
#include <vector>

namespace pd::grade {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::stringstream ss(text);
    std::string line;
    while (std::getline(ss, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    return lines;
}

std::string join(const std::vector<std::string>& lines, std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to && i < lines.size(); i++) out += lines[i] + "\n";
    return out;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// "../src/labs/x.cpp:12:5: error: ..." -> "x.cpp:12:5: error: ..." is left to the caller;
// this only shortens very long lines.
std::string clip_line(std::string s, std::size_t n = 300) {
    if (s.size() > n) s = s.substr(0, n - 3) + "...";
    return s;
}

}  // namespace

std::string trim(const std::string& s) {
    auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
    if (from.empty()) return text;
    std::size_t pos = 0;
    while ((pos = text.find(from, pos)) != std::string::npos) {
        text.replace(pos, from.size(), to);
        pos += to.size();
    }
    return text;
}

std::string last_lines(const std::string& text, std::size_t n) {
    auto lines = lines_of(text);
    std::size_t from = lines.size() > n ? lines.size() - n : 0;
    return join(lines, from, lines.size());
}

namespace {

// Reads "<blanks><digits>" at `pos` (at most 9 digits); -1 when none are there.
long read_count(const std::string& s, std::size_t& pos) {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) pos++;
    std::size_t start = pos;
    while (pos < s.size() && pos - start < 9 && std::isdigit(static_cast<unsigned char>(s[pos]))) pos++;
    return pos == start ? -1 : std::stol(s.substr(start, pos - start));
}

// Skips blanks, then `word`; false when the text is something else.
bool expect(const std::string& s, std::size_t& pos, std::string_view word) {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) pos++;
    if (s.compare(pos, word.size(), word) != 0) return false;
    pos += word.size();
    return true;
}

// The rest of "[doctest] test cases: 3 | 2 passed | 1 failed[ | 0 skipped]"
// from `pos`, just after the colon. Parsed by hand: no std::regex on text a
// student's program printed (it recurses per character and overflows).
std::optional<DoctestSummary> read_summary_at(const std::string& s, std::size_t pos) {
    DoctestSummary r;
    long cases = read_count(s, pos);
    if (cases < 0 || !expect(s, pos, "|")) return std::nullopt;
    long passed = read_count(s, pos);
    if (passed < 0 || !expect(s, pos, "passed") || !expect(s, pos, "|")) return std::nullopt;
    long failed = read_count(s, pos);
    if (failed < 0 || !expect(s, pos, "failed")) return std::nullopt;
    long skipped = 0;
    std::size_t after = pos;
    if (expect(s, after, "|")) {
        long n = read_count(s, after);
        if (n >= 0 && expect(s, after, "skipped")) skipped = n;
    }
    r.found = true;
    r.cases = int(cases), r.passed = int(passed), r.failed = int(failed), r.skipped = int(skipped);
    return r;
}

}  // namespace

DoctestSummary parse_doctest_summary(const std::string& out) {
    static constexpr std::string_view kPrefix = "[doctest] test cases:";
    DoctestSummary last;
    // The last summary wins (there is one per run).
    for (std::size_t at = out.find(kPrefix); at != std::string::npos; at = out.find(kPrefix, at + 1))
        if (auto s = read_summary_at(out, at + kPrefix.size())) last = *s;
    return last;
}

std::string doctest_failure_excerpt(const std::string& out, std::size_t max_lines) {
    auto lines = lines_of(out);
    std::size_t err = lines.size();
    for (std::size_t i = 0; i < lines.size(); i++)
        if (contains(lines[i], "ERROR:") && !contains(lines[i], "[doctest]")) {
            err = i;
            break;
        }
    if (err == lines.size()) return "";
    // Back to the block's opening rule, forward to the next one.
    std::size_t from = err;
    while (from > 0 && lines[from - 1].rfind("=====", 0) != 0) from--;
    std::size_t to = err + 1;
    while (to < lines.size() && lines[to].rfind("=====", 0) != 0) to++;
    while (to > err + 1 && trim(lines[to - 1]).empty()) to--;
    std::string text = join(lines, from, std::min(to, from + max_lines));
    if (to > from + max_lines) text += "[...]\n";
    return text;
}

std::string doctest_failure_reason(const std::string& out) {
    auto lines = lines_of(out);
    std::string test_case;
    for (std::size_t i = 0; i < lines.size(); i++) {
        const auto& l = lines[i];
        if (l.rfind("TEST CASE:", 0) == 0) test_case = trim(l.substr(10));
        auto p = l.find("ERROR:");
        if (p == std::string::npos || contains(l, "[doctest]")) continue;
        std::string reason = (test_case.empty() ? "" : test_case + ": ") + trim(l.substr(p + 6));
        // The values and messages doctest prints under it, indented.
        for (std::size_t j = i + 1; j < lines.size() && j < i + 4; j++) {
            std::string t = trim(lines[j]);
            if (t.empty() || lines[j][0] != ' ') break;
            reason += " (" + t + ")";
        }
        return clip_line(reason, 400);
    }
    return "";
}

std::string compile_error_reason(const std::string& out) {
    auto lines = lines_of(out);
    for (const auto& l : lines)
        if (contains(l, "error:") || contains(l, "undefined reference") || contains(l, "Error:"))
            return clip_line(trim(l));
    for (const auto& l : lines)
        if (l.rfind("FAILED:", 0) == 0) return clip_line(trim(l));
    return clip_line(trim(last_lines(out, 1)));
}

std::string compile_error_excerpt(const std::string& out, std::size_t max_lines) {
    auto lines = lines_of(out);
    std::size_t from = lines.size();
    for (std::size_t i = 0; i < lines.size(); i++)
        if (lines[i].rfind("FAILED:", 0) == 0) {
            from = i + 1;  // the command line after FAILED: is long and not interesting
            while (from < lines.size() && lines[from].find("-o ") != std::string::npos &&
                   lines[from].find("error") == std::string::npos)
                from++;
            break;
        }
    if (from >= lines.size()) from = lines.size() > max_lines ? lines.size() - max_lines : 0;
    std::string text;
    std::size_t n = 0;
    for (std::size_t i = from; i < lines.size() && n < max_lines; i++, n++) {
        if (lines[i].rfind("ninja: build stopped", 0) == 0) break;
        text += clip_line(lines[i], 400) + "\n";
    }
    return text;
}

}  // namespace pd::grade
