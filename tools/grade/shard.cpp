#include "shard.hpp"

#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "workdir.hpp"

namespace pd::grade {

namespace {

int parse_int(std::string_view s) {
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() ? v : -1;
}

// A gradebook: its header line and its rows, one line each (cells with line
// breaks are quoted by the grader and never hold one: names are folder names).
struct Gradebook {
    std::string header;
    std::vector<std::string> rows;
};

Gradebook read_gradebook(const fs::path& part) {
    std::stringstream ss(read_file(part / "gradebook.csv"));
    Gradebook g;
    std::getline(ss, g.header);
    for (std::string line; std::getline(ss, line);) g.rows.push_back(line);
    return g;
}

// The parts by their shard number, checked to be 1..N of one N, each once.
std::map<int, fs::path> parts_by_number(const std::vector<fs::path>& parts) {
    std::map<int, fs::path> by_k;
    int n = 0;
    for (const auto& p : parts) {
        if (!fs::is_regular_file(p / "shard.txt"))
            throw UsageError(fmt::format("{}: no shard.txt (not the --out of a --shard run)", p.string()));
        std::string spec = read_file(p / "shard.txt");
        while (!spec.empty() && spec.back() == '\n') spec.pop_back();
        Shard s = parse_shard(spec);
        if (n && s.n != n) throw UsageError(fmt::format("{} is shard {} but another part is of {}", p.string(), spec, n));
        n = s.n;
        if (!by_k.emplace(s.k, p).second) throw UsageError(fmt::format("shard {} is given twice", spec));
    }
    if (int(by_k.size()) != n) throw UsageError(fmt::format("{} of {} shards given: merge needs all", by_k.size(), n));
    return by_k;
}

}  // namespace

Shard parse_shard(const std::string& spec) {
    auto slash = spec.find('/');
    Shard s;
    if (slash != std::string::npos) {
        s.k = parse_int(std::string_view(spec).substr(0, slash));
        s.n = parse_int(std::string_view(spec).substr(slash + 1));
    }
    if (slash == std::string::npos || s.n < 1 || s.k < 1 || s.k > s.n)
        throw UsageError(fmt::format("--shard {}: give K/N with 1 <= K <= N (part K of N)", spec));
    return s;
}

std::vector<std::pair<std::string, fs::path>> shard_of(const std::vector<std::pair<std::string, fs::path>>& all,
                                                       Shard s) {
    std::vector<std::pair<std::string, fs::path>> mine;
    for (std::size_t i = 0; i < all.size(); i++)
        if (int(i % std::size_t(s.n)) == s.k - 1) mine.push_back(all[i]);
    return mine;
}

void write_shard_mark(const fs::path& out, Shard s) { std::ofstream(out / "shard.txt") << s.k << "/" << s.n << "\n"; }

void merge_gradebooks(const fs::path& out, const std::vector<fs::path>& parts) {
    std::vector<Gradebook> books;
    for (const auto& [k, p] : parts_by_number(parts)) books.push_back(read_gradebook(p));
    std::string csv = books[0].header + "\n";
    for (std::size_t j = 0; j < books[0].rows.size(); j++)
        for (const auto& b : books) {
            if (b.header != books[0].header) throw UsageError("the shards' gradebooks have different columns");
            if (j < b.rows.size()) csv += b.rows[j] + "\n";
        }
    fs::create_directories(out / "reports");
    std::ofstream(out / "gradebook.csv") << csv;
    for (const auto& p : parts)
        fs::copy(p / "reports", out / "reports", fs::copy_options::overwrite_existing | fs::copy_options::recursive);
}

}  // namespace pd::grade
