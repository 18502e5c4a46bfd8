// How the lab tests print and compare lists: show() writes a list as
// "[a, b, c]" for a failure message, flat() turns a list of small structs into
// their fields in order, so two lists compare with == and go to observe() (the
// grader records ints, not structs).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "serve/step_policy.hpp"

namespace pd::lab {

// "[text(v[0]), text(v[1]), ...]"
template <class T, class Text>
std::string show_each(const std::vector<T>& v, Text text) {
    std::string s = "[";
    for (const T& x : v) s += (s.size() > 1 ? ", " : "") + text(x);
    return s + "]";
}

// The named fields of every item in turn: flat_fields(v, &P::first, &P::last)
// gives {v[0].first, v[0].last, v[1].first, ...}.
template <class T, class... Field>
std::vector<int> flat_fields(const std::vector<T>& v, Field... field) {
    std::vector<int> f;
    for (const T& x : v) (f.push_back(x.*field), ...);
    return f;
}

inline std::string show(const std::vector<int>& v) {
    return show_each(v, [](int x) { return std::to_string(x); });
}

// A batch as "[{seq 3, 1 tok}, {seq 0, 12 tok}]".
inline std::string show(const std::vector<pd::serve::BatchItem>& v) {
    return show_each(v, [](const pd::serve::BatchItem& b) { return fmt::format("{{seq {}, {} tok}}", b.seq, b.n); });
}

// A batch as {seq, n, seq, n, ...}.
inline std::vector<int> flat(const std::vector<pd::serve::BatchItem>& v) {
    return flat_fields(v, &pd::serve::BatchItem::seq, &pd::serve::BatchItem::n);
}

}  // namespace pd::lab
