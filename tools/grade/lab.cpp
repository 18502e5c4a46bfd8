#include "lab.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "workdir.hpp"

namespace pd::grade {

namespace {

std::string list_labs(const fs::path& kit) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(kit / "labs", ec)) {
        if (!t.is_directory() || t.path().filename().string().rfind("track", 0) != 0) continue;
        for (const auto& l : fs::directory_iterator(t.path()))
            if (l.is_directory() && std::isdigit(static_cast<unsigned char>(l.path().filename().string()[0])))
                names.push_back(t.path().filename().string() + "/" + l.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "(none)" : s;
}

// What --lab asks for: an optional track, the two-digit number, and the whole
// folder name when one was given ("track1-03-cache" -> track1, 03, 03-cache).
struct LabQuery {
    std::string track, number, full;
};

LabQuery parse_lab_arg(const fs::path& kit, const std::string& arg) {
    LabQuery q;
    std::string rest = arg;
    if (rest.rfind("track", 0) == 0) {
        auto cut = rest.find_first_of("/-");
        q.track = rest.substr(0, cut);
        rest = cut == std::string::npos ? "" : rest.substr(cut + 1);
    }
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) digits++;
    if (digits == 0)
        throw UsageError(fmt::format("--lab {}: give the lab's number, e.g. --lab 03; the labs are: {}", arg,
                                     list_labs(kit)));
    q.number = rest.substr(0, digits);
    while (q.number.size() < 2) q.number = "0" + q.number;
    while (q.number.size() > 2 && q.number[0] == '0') q.number.erase(0, 1);
    q.full = rest.size() > digits ? q.number + rest.substr(digits) : "";
    return q;
}

std::vector<Lab> matching_labs(const fs::path& kit, const LabQuery& q) {
    std::vector<Lab> found;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(kit / "labs", ec)) {
        std::string tname = t.path().filename().string();
        if (!t.is_directory() || tname.rfind("track", 0) != 0 || (!q.track.empty() && tname != q.track)) continue;
        for (const auto& l : fs::directory_iterator(t.path())) {
            std::string name = l.path().filename().string();
            if (!l.is_directory() || name.rfind(q.number + "-", 0) != 0) continue;
            if (!q.full.empty() && name != q.full) continue;
            Lab lab;
            lab.track = tname;
            lab.folder = name;
            lab.number = q.number;
            lab.rel = fs::path("labs") / tname / name;
            found.push_back(lab);
        }
    }
    return found;
}

// The files a student hands in are the solution's sources.
void add_solution(Lab& lab, const fs::path& kit) {
    lab.solution_dir = kit / "solutions" / lab.track / lab.folder;
    if (!fs::is_directory(kit / "solutions"))
        throw UsageError(fmt::format("{} has no solutions/ folder (is it a student handout?): grade with the "
                                     "instructor's copy of the kit (--kit DIR)",
                                     kit.string()));
    if (!fs::is_directory(lab.solution_dir))
        throw UsageError(fmt::format("lab {} has no reference solution: {} is missing", lab.folder,
                                     lab.solution_dir.string()));
    for (const auto& f : fs::directory_iterator(lab.solution_dir))
        if (f.is_regular_file() && is_source_name(f.path().filename().string()))
            lab.sources.push_back(f.path().filename().string());
    std::sort(lab.sources.begin(), lab.sources.end());
    if (lab.sources.empty())
        throw UsageError(fmt::format("{} holds no exercise source (.cpp) to compare against",
                                     lab.solution_dir.string()));
}

}  // namespace

bool is_source_name(const std::string& name) {
    for (const char* ext : {".cpp", ".cc", ".cxx", ".c"}) {
        std::string e(ext);
        if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) return true;
    }
    return false;
}

Lab find_lab(const fs::path& kit, const std::string& arg) {
    std::vector<Lab> found = matching_labs(kit, parse_lab_arg(kit, arg));
    if (found.empty())
        throw UsageError(fmt::format("--lab {}: there is no such lab; the labs are: {}", arg, list_labs(kit)));
    if (found.size() > 1)
        throw UsageError(fmt::format("--lab {} matches several labs ({}/{} and {}/{}): give the track too, "
                                     "e.g. --lab {}/{}",
                                     arg, found[0].track, found[0].folder, found[1].track, found[1].folder,
                                     found[0].track, found[0].number));
    Lab lab = found[0];
    add_solution(lab, kit);
    return lab;
}

Rubric load_lab_rubric(const Lab& lab) {
    fs::path rubric_path = lab.solution_dir / "rubric.json";
    if (!fs::is_regular_file(rubric_path))
        throw UsageError(fmt::format("lab {} has no rubric: write {} (see docs/instructors.md, \"Rubrics\")",
                                     lab.folder, rubric_path.string()));
    Rubric rubric;
    try {
        rubric = load_rubric(rubric_path.string());
    } catch (const RubricError& e) {
        throw UsageError(e.what());
    }
    std::string rl = rubric.lab;
    while (rl.size() < 2) rl = "0" + rl;
    if (rl != lab.number && rubric.lab != lab.folder)
        throw UsageError(fmt::format("{}: \"lab\" is \"{}\", but this is lab {}", rubric_path.string(),
                                     rubric.lab, lab.number));
    return rubric;
}

}  // namespace pd::grade
