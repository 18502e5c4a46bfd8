// Reading what the tools printed: doctest's summary and first failure, the
// compiler's first error, and short excerpts for reports.
#pragma once

#include <string>

namespace pd::grade {

struct DoctestSummary {
    bool found = false;  // the "[doctest] test cases: ..." line was there
    int cases = 0, passed = 0, failed = 0, skipped = 0;
};

DoctestSummary parse_doctest_summary(const std::string& out);

// The first failing test case's block (TEST CASE line, the errors and their
// messages), at most max_lines lines; empty when there is none.
std::string doctest_failure_excerpt(const std::string& out, std::size_t max_lines = 16);

// One line: "lab03.kv_cache.append: CHECK( got == want ) is NOT correct! (values: ...) (logged: ...)".
std::string doctest_failure_reason(const std::string& out);

// The compiler's (or linker's) first error: one line, and a block of at most
// max_lines lines starting there.
std::string compile_error_reason(const std::string& out);
std::string compile_error_excerpt(const std::string& out, std::size_t max_lines = 25);

// The last n lines, and every occurrence of `from` replaced by `to`.
std::string last_lines(const std::string& text, std::size_t n);
std::string replace_all(std::string text, const std::string& from, const std::string& to);
std::string trim(const std::string& s);

}  // namespace pd::grade
