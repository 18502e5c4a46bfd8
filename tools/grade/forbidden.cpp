#include "forbidden.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "outputs.hpp"
#include "process.hpp"
#include "report.hpp"

namespace pd::grade {

namespace {

// The lab's compiled exercise objects in WORK/build: meson names the object
// of labs/track1/03-x/exercise.cpp in a library of labs/ as
// "track1_03-x_exercise.cpp.o" (the path from the library's folder, '/' -> '_').
std::vector<fs::path> exercise_objects(const Context& c) {
    std::set<std::string> names;
    std::string from_labs = c.lab.rel.lexically_relative("labs").string();
    std::replace(from_labs.begin(), from_labs.end(), '/', '_');
    for (const auto& src : c.lab.sources) names.insert(from_labs + "_" + src + ".o");
    std::vector<fs::path> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(c.work_build / "labs", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (names.count(it->path().filename().string())) found.push_back(it->path());
    std::sort(found.begin(), found.end());
    return found;
}

// `nm -C -u` lines are "                 U pd::argmax(float const*, int)".
std::vector<std::string> undefined_symbols(const fs::path& object) {
    RunSpec nm;
    nm.argv = {"nm", "-C", "-u", object.string()};
    nm.timeout_s = 30;
    std::vector<std::string> names;
    std::stringstream ss(run_process(nm).output);
    for (std::string line; std::getline(ss, line);) {
        line = trim(line);
        if (line.rfind("U ", 0) == 0) names.push_back(line.substr(2));
    }
    return names;
}

}  // namespace

bool symbol_matches(const std::string& name, const std::string& symbol) {
    return name == symbol || (name.size() > symbol.size() && name.rfind(symbol, 0) == 0 && name[symbol.size()] == '(');
}

void apply_may_not_use(const Context& c, StudentResult& r) {
    if (c.rubric.may_not_use.empty()) return;
    std::vector<std::string> called;
    for (const auto& o : exercise_objects(c))
        for (auto& n : undefined_symbols(o)) called.push_back(std::move(n));
    double off = 0;
    for (const auto& f : c.rubric.may_not_use) {
        auto hit = std::find_if(called.begin(), called.end(), [&](auto& n) { return symbol_matches(n, f.symbol); });
        if (hit == called.end()) continue;
        off += f.points;
        r.notes.push_back(fmt::format("calls {}, which this lab does not allow ({}): -{} points", *hit,
                                      f.why.empty() ? "see the rubric" : f.why, fmt_points(f.points)));
    }
    if (off == 0) return;
    r.total = std::max(0.0, r.total - off);
    r.status = r.status == "ok" ? "forbidden symbol" : r.status + ", forbidden symbol";
}

}  // namespace pd::grade
