#include "forbidden.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "outputs.hpp"
#include "process.hpp"
#include "report.hpp"
#include "workdir.hpp"

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

// A shell command line as words: quotes ('' and "") and backslashes undone,
// as meson writes compile_commands.json.
std::vector<std::string> shell_words(const std::string& line) {
    std::vector<std::string> words;
    std::string w;
    bool in_word = false;
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char ch = line[i];
        if (quote) {
            if (ch == quote) quote = 0;
            else if (ch == '\\' && quote == '"' && i + 1 < line.size()) w += line[++i];
            else w += ch;
        } else if (ch == '\'' || ch == '"') {
            quote = ch, in_word = true;
        } else if (ch == '\\' && i + 1 < line.size()) {
            w += line[++i], in_word = true;
        } else if (ch == ' ' || ch == '\t') {
            if (in_word) words.push_back(w);
            w.clear(), in_word = false;
        } else {
            w += ch, in_word = true;
        }
    }
    if (in_word) words.push_back(w);
    return words;
}

fs::path unoptimized_dir(const Context& c) { return c.work_build / "grade-unoptimized"; }

// The exercise sources compiled unoptimised, in the student's build sandbox
// (their code is compiled: its #includes may reach only what ninja's may). A
// compile that fails leaves a note: the check of inline calls did not run.
std::vector<fs::path> unoptimized_objects(const Context& c, StudentResult& r) {
    std::error_code ec;
    fs::remove_all(unoptimized_dir(c), ec);
    fs::create_directories(unoptimized_dir(c));
    if (c.opt.sandbox) hand_to_sandbox(c, unoptimized_dir(c));
    std::vector<fs::path> objects;
    for (const auto& argv : c.unoptimized_compiles) {
        RunSpec cc;
        cc.argv = argv;
        cc.cwd = c.work_build.string();
        cc.timeout_s = c.opt.build_timeout_s;
        if (c.opt.sandbox) {
            cc.sandbox = SandboxSpec{{c.work_src}, {c.work_build}, c.work_build};
            cc.extra_procs = sandbox_processes(c, true);
            cc.run_as = sandbox_uid(c);
            cc.file_bytes = std::size_t(1) << 30;
        }
        // The object follows -o (unoptimized_command put it there).
        const fs::path object = *(std::find(argv.begin(), argv.end(), "-o") + 1);
        const RunResult out = run_process(cc);
        if (out.ok()) objects.push_back(object);
        else r.notes.push_back("the exercise did not compile without optimisation (-O0 -fno-inline), so its calls "
                               "of the headers' inline functions were not checked against the lab's may_not_use "
                               "list: " + out.describe());
    }
    return objects;
}

}  // namespace

Symbols parse_nm(const std::string& output) {
    Symbols s;
    std::stringstream ss(output);
    for (std::string line; std::getline(ss, line);) {
        line = trim(line);
        const auto sp = line.find(' ');
        if (sp == std::string::npos) continue;
        if (sp == 1) {  // no address: undefined, strong (U) or weak (w, v)
            s.called.push_back(line.substr(2));
            s.present.push_back(line.substr(2));
        } else if (sp + 3 <= line.size()) {
            s.present.push_back(line.substr(sp + 3));
        }
    }
    return s;
}

namespace {

Symbols symbols_of(const fs::path& object) {
    RunSpec nm;
    nm.argv = {"nm", "-C", object.string()};
    nm.timeout_s = 30;
    return parse_nm(run_process(nm).output);
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

std::vector<std::string> unoptimized_command(const std::vector<std::string>& command, const std::string& object) {
    std::vector<std::string> out;
    bool compiles = false, writes = false;
    for (std::size_t i = 0; i < command.size(); ++i) {
        const std::string& w = command[i];
        if (i == 0 && w == "ccache") continue;
        if (w == "-MD" || w == "-MMD") continue;
        if (w == "-MF" || w == "-MQ" || w == "-MT") {
            ++i;
            continue;
        }
        if (w.size() == 3 && w.rfind("-O", 0) == 0) {
            // The macros that tell optimised code from unoptimised keep their optimised
            // values: an exercise must not call a forbidden helper only where it is inlined.
            out.insert(out.end(), {"-O0", "-fno-inline", "-D__OPTIMIZE__=1", "-U__NO_INLINE__"});
            continue;
        }
        if (w == "-o" && i + 1 < command.size()) {
            out.insert(out.end(), {"-o", object});
            writes = true;
            ++i;
            continue;
        }
        compiles = compiles || w == "-c";
        out.push_back(w);
    }
    if (!compiles || !writes) return {};
    return out;
}

std::vector<std::vector<std::string>> unoptimized_compiles(const Context& c) {
    const fs::path db = c.work_build / "compile_commands.json";
    if (!fs::exists(db)) return {};
    const json entries = json::parse(read_file(db));
    std::vector<std::vector<std::string>> commands;
    for (const auto& src : c.lab.sources) {
        const fs::path want = (c.work_src / c.lab.rel / src).lexically_normal();
        for (const auto& e : entries) {
            const fs::path file = fs::path(e.value("directory", "")) / e.value("file", "");
            if (file.lexically_normal() != want) continue;
            std::vector<std::string> cc = unoptimized_command(shell_words(e.value("command", "")),
                                                              (unoptimized_dir(c) / (src + ".o")).string());
            if (!cc.empty()) commands.push_back(cc);
            break;
        }
    }
    return commands;
}

namespace {

// `name` against `pattern`, where '*' stands for any run of characters within
// one part of a qualified name (no ':').
bool glob_matches(std::string_view name, std::string_view pattern) {
    if (pattern.empty()) return name.empty();
    if (pattern[0] != '*') return !name.empty() && name[0] == pattern[0] && glob_matches(name.substr(1), pattern.substr(1));
    for (std::size_t n = 0; n <= name.size(); n++) {
        if (glob_matches(name.substr(n), pattern.substr(1))) return true;
        if (n < name.size() && name[n] == ':') return false;
    }
    return false;
}

}  // namespace

bool symbol_matches(const std::string& name, const std::string& symbol) {
    return name == symbol || glob_matches(std::string_view(name).substr(0, name.find('(')), symbol);
}

void apply_may_not_use(const Context& c, StudentResult& r) {
    Symbols all;
    for (const auto& o : exercise_objects(c)) {
        Symbols s = symbols_of(o);
        all.called.insert(all.called.end(), s.called.begin(), s.called.end());
        all.present.insert(all.present.end(), s.present.begin(), s.present.end());
    }
    // Unoptimised, a header's inline function the exercise calls is a weak copy
    // in its object (defined, not undefined): every symbol there is a use.
    for (const auto& o : unoptimized_objects(c, r)) {
        const Symbols s = symbols_of(o);
        all.called.insert(all.called.end(), s.present.begin(), s.present.end());
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
