#include "submissions.hpp"

#include <algorithm>
#include <string_view>
#include <sstream>

#include <fmt/format.h>

#include "workdir.hpp"

namespace pd::grade {

namespace {

// Line endings and trailing blanks differ between editors, not between files.
std::string normalized(const std::string& text) {
    std::string out, line;
    std::stringstream ss(text);
    while (std::getline(ss, line)) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        out += line + "\n";
    }
    while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') out.pop_back();
    return out;
}

std::vector<fs::path> find_named(const fs::path& dir, const std::string& name) {
    std::vector<fs::path> hits;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (ec) break;
        std::string f = it->path().filename().string();
        auto st = it->symlink_status(ec);
        if (fs::is_directory(st) && (f.empty() || f[0] == '.' || f == "__MACOSX" || it.depth() >= 5)) {
            it.disable_recursion_pending();
            continue;
        }
        if (fs::is_regular_file(st) && f == name) hits.push_back(it->path());
    }
    std::sort(hits.begin(), hits.end());
    return hits;
}

// Fills s.sources; returns the folder of the first source found (the other
// files there are compared with the kit's), or sets s.problem.
fs::path find_sources(Submission& s, const Lab& lab) {
    fs::path base;
    for (const auto& src : lab.sources) {
        fs::path direct = s.dir / src;
        if (fs::is_regular_file(fs::symlink_status(direct))) {
            s.sources[src] = direct;
        } else {
            auto hits = find_named(s.dir, src);
            if (hits.size() == 1) {
                s.sources[src] = hits[0];
                s.notes.push_back(fmt::format("{} was found in a subfolder: {}", src,
                                              hits[0].lexically_relative(s.dir).string()));
            } else if (hits.size() > 1) {
                s.problem = "ambiguous submission";
                std::string list;
                for (const auto& h : hits) list += "\n  " + h.lexically_relative(s.dir).string();
                s.problem_detail = fmt::format("the submission holds {} files named {}; hand in one:{}",
                                               hits.size(), src, list);
                return base;
            }
        }
        if (base.empty() && s.sources.count(src)) base = s.sources[src].parent_path();
    }
    if (s.sources.empty()) {
        s.problem = "no " + lab.sources[0];
        s.problem_detail = fmt::format("the submission has no {} (in {} or its subfolders)", lab.sources[0],
                                       s.dir.string());
    }
    return base;
}

// The kit's headers and programs are always the kit's own: say which of the
// student's copies differ, and which files are not the lab's at all.
void note_other_files(Submission& s, const fs::path& base, const Lab& lab, const fs::path& kit) {
    fs::path kit_lab = kit / lab.rel;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(base, ec)) {
        if (!fs::is_regular_file(f.symlink_status(ec))) continue;
        std::string fname = f.path().filename().string();
        if (std::find(lab.sources.begin(), lab.sources.end(), fname) != lab.sources.end()) continue;
        if (fs::is_regular_file(kit_lab / fname)) {
            std::string why;
            auto theirs = read_untrusted(f.path(), kMaxSourceBytes, why);
            if (theirs && normalized(*theirs) != normalized(read_file(kit_lab / fname)))
                s.notes.push_back(fmt::format("{} differs from the kit's: graded with the kit's {}, "
                                              "unchanged (a lab's headers are not part of the exercise)",
                                              fname, fname));
        } else if (is_source_name(fname) || fname.ends_with(".hpp") || fname.ends_with(".h")) {
            s.notes.push_back(fmt::format("{} is not a file of this lab and was ignored", fname));
        }
    }
}

// The file an #include line names ("" when the line is no include), read by
// hand: std::regex recursed through a 30,000-character line and overflowed the stack.
std::string included_path(std::string_view line) {
    auto skip_blanks = [&] { while (!line.empty() && (line[0] == ' ' || line[0] == '\t')) line.remove_prefix(1); };
    skip_blanks();
    if (!line.starts_with('#')) return "";
    line.remove_prefix(1);
    skip_blanks();
    if (!line.starts_with("include")) return "";
    line.remove_prefix(7);
    skip_blanks();
    if (line.empty() || (line[0] != '<' && line[0] != '"')) return "";
    char close = line[0] == '<' ? '>' : '"';
    auto end = line.find(close, 1);
    return end == std::string_view::npos ? "" : std::string(line.substr(1, end - 1));
}

// An include that can reach past the lab folder (an absolute path, a '..'
// component) or names the solutions may copy the answer: flagged for the
// instructor, and the "includes" note costs the points docs/instructors.md says.
bool include_leaves_lab(const std::string& inc) {
    if (inc.empty()) return false;
    if (inc[0] == '/' || inc.find("solutions") != std::string::npos) return true;
    for (const auto& part : fs::path(inc)) if (part == "..") return true;
    return false;
}

void note_outside_includes(Submission& s) {
    for (const auto& [src, path] : s.sources) {
        std::string why;
        auto text = read_untrusted(path, kMaxSourceBytes, why);
        if (!text) continue;  // refused in find_sources already
        std::stringstream ss(*text);
        std::string line;
        int n = 0;
        while (std::getline(ss, line)) {
            n++;
            std::string inc = included_path(line);
            if (!include_leaves_lab(inc)) continue;
            s.outside_includes++;
            s.notes.push_back(fmt::format("{} line {} includes \"{}\", outside the lab folder: look at it by hand",
                                          src, n, inc.substr(0, 200)));
        }
    }
}

// Symlinks and special files are never followed or read (a link to another
// student's folder or to /etc, a FIFO that hangs a read); hidden folders are
// not searched but named, so the instructor sees what was skipped.
void note_unusual_entries(Submission& s) {
    std::error_code ec;
    int shown = 0;
    for (auto it = fs::recursive_directory_iterator(s.dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        auto st = it->symlink_status(ec);
        std::string rel = it->path().lexically_relative(s.dir).string();
        std::string f = it->path().filename().string();
        std::string note;
        if (fs::is_symlink(st)) note = rel + " is a symlink: refused (not followed)";
        else if (fs::is_directory(st) && !f.empty() && f[0] == '.') note = rel + " is a hidden folder: not searched";
        else if (!fs::is_directory(st) && !fs::is_regular_file(st)) note = rel + " is not a regular file: refused";
        if (fs::is_directory(st) && (f[0] == '.' || it.depth() >= 5)) it.disable_recursion_pending();
        if (!note.empty() && shown++ < 20) s.notes.push_back(note);
    }
}

}  // namespace

Students list_students(const fs::path& submissions, const std::vector<std::string>& only, const Lab& lab) {
    Students st;
    for (const auto& e : fs::directory_iterator(submissions)) {
        std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        if (e.is_directory() && !e.is_symlink()) st.folders.emplace_back(name, e.path());
        else st.stray.push_back(name);
    }
    std::sort(st.folders.begin(), st.folders.end());
    if (st.folders.empty())
        throw UsageError(fmt::format("{} holds no student folders: make one folder per student holding their {}",
                                     submissions.string(), lab.sources[0]));
    if (only.empty()) return st;
    std::vector<std::pair<std::string, fs::path>> picked;
    for (const auto& want : only) {
        auto it = std::find_if(st.folders.begin(), st.folders.end(), [&](auto& s) { return s.first == want; });
        if (it == st.folders.end())
            throw UsageError(fmt::format("--student {}: no such folder in {}", want, submissions.string()));
        picked.push_back(*it);
    }
    st.folders = picked;
    return st;
}

Submission locate(const std::string& name, const fs::path& dir, const Lab& lab, const fs::path& kit) {
    Submission s;
    s.name = name;
    s.dir = dir;
    note_unusual_entries(s);  // first: a refused symlink explains a missing source
    fs::path base = find_sources(s, lab);
    if (!s.problem.empty()) return s;
    for (const auto& [src, path] : s.sources) {
        std::string why;
        if (!read_untrusted(path, kMaxSourceBytes, why)) {
            s.problem = "refused file";
            s.problem_detail = why;
            return s;
        }
    }
    for (const auto& src : lab.sources)
        if (!s.sources.count(src))
            s.notes.push_back(fmt::format("{} is missing: graded with the kit's starter {}", src, src));
    note_other_files(s, base, lab, kit);
    note_outside_includes(s);
    return s;
}

}  // namespace pd::grade
