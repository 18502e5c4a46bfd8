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

struct Symbols {
    std::vector<std::string> called;   // undefined: what the object calls outside itself
    std::vector<std::string> present;  // every symbol, inline code from headers included
};

// `nm -C` lines are "                 U pd::argmax(float const*, int)" (undefined)
// or "0000000000000000 W pd::test::randn(...)" (defined here, e.g. inline).
Symbols symbols_of(const fs::path& object) {
    RunSpec nm;
    nm.argv = {"nm", "-C", object.string()};
    nm.timeout_s = 30;
    Symbols s;
    std::stringstream ss(run_process(nm).output);
    for (std::string line; std::getline(ss, line);) {
        line = trim(line);
        if (line.rfind("U ", 0) == 0) {
            s.called.push_back(line.substr(2));
            s.present.push_back(line.substr(2));
        } else if (auto sp = line.find(' '); sp != std::string::npos && sp + 3 <= line.size()) {
            s.present.push_back(line.substr(sp + 3));
        }
    }
    return s;
}

// The first symbol of the tests' own code in `present`, or "".
std::string test_code_symbol(const std::vector<std::string>& present) {
    for (const auto& name : present)
        for (const char* ns : kTestCodeNamespaces)
            if (name.find(ns) != std::string::npos) return name;
    return "";
}

// Penalties of the rubric's may_not_use list; a note per symbol found.
double may_not_use_penalty(const Context& c, const std::vector<std::string>& called, StudentResult& r) {
    double off = 0;
    for (const auto& f : c.rubric.may_not_use) {
        auto hit = std::find_if(called.begin(), called.end(), [&](auto& n) { return symbol_matches(n, f.symbol); });
        if (hit == called.end()) continue;
        off += f.points;
        r.notes.push_back(fmt::format("calls {}, which this lab does not allow ({}): -{} points", *hit,
                                      f.why.empty() ? "see the rubric" : f.why, fmt_points(f.points)));
    }
    return off;
}

}  // namespace

bool symbol_matches(const std::string& name, const std::string& symbol) {
    return name == symbol || (name.size() > symbol.size() && name.rfind(symbol, 0) == 0 && name[symbol.size()] == '(');
}

void apply_may_not_use(const Context& c, StudentResult& r) {
    Symbols all;
    for (const auto& o : exercise_objects(c)) {
        Symbols s = symbols_of(o);
        all.called.insert(all.called.end(), s.called.begin(), s.called.end());
        all.present.insert(all.present.end(), s.present.begin(), s.present.end());
    }
    std::size_t notes_before = r.notes.size();
    double off = may_not_use_penalty(c, all.called, r);
    if (std::string hit = test_code_symbol(all.present); !hit.empty()) {
        off = r.total;
        r.notes.push_back(fmt::format("uses the tests' own code ({}): an exercise may not call or contain test, "
                                      "reference or observation code (it could forge what the tests check): "
                                      "the lab scores 0", hit));
    }
    if (r.notes.size() == notes_before) return;
    r.total = std::max(0.0, r.total - off);
    r.status = r.status == "ok" ? "forbidden symbol" : r.status + ", forbidden symbol";
}

}  // namespace pd::grade
