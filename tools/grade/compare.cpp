#include "compare.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace pd::grade {

std::set<std::string> CompareSpec::default_ignore() {
    return {"ms",      "us",      "ns",         "s",       "sec",       "secs",      "seconds",
            "time",    "times",   "timing",     "timings", "timestamp", "timestamps", "elapsed",
            "wall",    "clock",   "duration",   "latency", "latencies", "throughput", "tps",
            "gflops",  "tflops",  "gbps",       "bandwidth", "hostname",  "date"};
}

double scaled_share(const json& got, const json& want, const ScaleSpec& spec, std::string& why) {
    const json* g = find_path(got, spec.field);
    const json* w = find_path(want, spec.field);
    if (!w || !w->is_number() || !(w->get<double>() > 0) || !std::isfinite(w->get<double>())) {
        why = fmt::format("{}: the reference's value is not a number > 0", spec.field);
        return 0;
    }
    if (!g || !g->is_number()) {
        why = fmt::format("{}: {}", spec.field, g ? "not a number" : "missing");
        return 0;
    }
    const double v = g->get<double>(), ratio = v / w->get<double>();
    if (!std::isfinite(v) || !(v >= 0)) {
        why = fmt::format("{}: {} is not a finite number >= 0", spec.field, v);
        return 0;
    }
    const double share = std::clamp((ratio - spec.zero_at) / (spec.full_at - spec.zero_at), 0.0, 1.0);
    why = fmt::format("{} {:.4g}, x{:.3f} the reference's {:.4g}: {:.0f}% of the points (0 at x{}, all at x{})",
                      spec.field, v, ratio, w->get<double>(), 100 * share, spec.zero_at, spec.full_at);
    return std::isfinite(share) ? share : 0;
}

bool is_ignored_key(const std::string& key, const std::set<std::string>& ignore) {
    if (ignore.empty()) return false;
    std::string lower;
    for (char c : key) lower += char(std::tolower(static_cast<unsigned char>(c)));
    if (ignore.count(lower)) return true;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= lower.size(); i++) {
        if (i == lower.size() || lower[i] == '_' || lower[i] == '-' || lower[i] == '.') {
            if (i > start && ignore.count(lower.substr(start, i - start))) return true;
            start = i + 1;
        }
    }
    return false;
}

namespace {

// "a.b[2].c" -> {"a", "b", "2", "c"}
std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : path) {
        if (c == '.' || c == '[' || c == ']') {
            if (!cur.empty()) parts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (!cur.empty()) parts.push_back(cur);
    return parts;
}

bool all_digits(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

std::string show(const json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

struct Walker {
    const CompareSpec& spec;
    std::size_t max;
    std::vector<std::string> diffs;
    std::size_t extra = 0;

    void diff(std::string line) {
        if (diffs.size() < max) diffs.push_back(std::move(line));
        else extra++;
    }

    void walk(const json& got, const json& want, const std::string& where) {
        if (want.is_number() && got.is_number()) {
            bool want_int = want.is_number_integer(), got_int = got.is_number_integer();
            if (want_int && got_int) {
                bool same = got == want;  // json compares signed and unsigned by value
                if (!same) diff(fmt::format("{}: got {}, expected {}", where, show(got), show(want)));
                return;
            }
            double g = got.get<double>(), w = want.get<double>();
            bool ok;
            if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
            else if (std::isinf(w) || std::isinf(g)) ok = g == w;
            else ok = std::fabs(g - w) <= spec.float_atol + spec.float_rtol * std::fabs(w);
            if (!ok)
                diff(fmt::format("{}: got {}, expected {} (tolerance {} + {} * |expected|)", where,
                                 show(got), show(want), spec.float_atol, spec.float_rtol));
            return;
        }
        if (got.type() != want.type()) {
            diff(fmt::format("{}: got {} ({}), expected {} ({})", where, show(got), got.type_name(),
                             show(want), want.type_name()));
            return;
        }
        if (want.is_array()) {
            if (got.size() != want.size()) {
                diff(fmt::format("{}: got {} elements, expected {}", where, got.size(), want.size()));
                return;
            }
            for (std::size_t i = 0; i < want.size(); i++)
                walk(got[i], want[i], fmt::format("{}[{}]", where, i));
            return;
        }
        if (want.is_object()) {
            for (const auto& [k, v] : want.items()) {
                if (is_ignored_key(k, spec.ignore)) continue;
                std::string sub = where.empty() ? k : where + "." + k;
                auto it = got.find(k);
                if (it == got.end()) diff(fmt::format("{}: missing", sub));
                else walk(*it, v, sub);
            }
            return;
        }
        if (got != want) diff(fmt::format("{}: got {}, expected {}", where, show(got), show(want)));
    }
};

}  // namespace

const json* find_path(const json& doc, const std::string& path) {
    const json* cur = &doc;
    for (const auto& part : split_path(path)) {
        if (cur->is_object()) {
            auto it = cur->find(part);
            if (it == cur->end()) return nullptr;
            cur = &*it;
        } else if (cur->is_array() && all_digits(part)) {
            std::size_t i = std::stoul(part);
            if (i >= cur->size()) return nullptr;
            cur = &(*cur)[i];
        } else {
            return nullptr;
        }
    }
    return cur;
}

std::vector<std::string> compare_json(const json& got, const json& want, const CompareSpec& spec,
                                      std::size_t max) {
    Walker w{spec, max, {}, 0};
    if (spec.fields.empty()) {
        w.walk(got, want, "");
    } else {
        for (const auto& f : spec.fields) {
            const json* g = find_path(got, f);
            const json* e = find_path(want, f);
            if (!e) w.diff(fmt::format("{}: not in the reference output (a rubric error)", f));
            else if (!g) w.diff(fmt::format("{}: missing", f));
            else w.walk(*g, *e, f);
        }
    }
    if (w.extra) w.diffs.push_back(fmt::format("... and {} more differences", w.extra));
    return w.diffs;
}

}  // namespace pd::grade
