#include "plot.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

#include "base/kit_root.hpp"  // where each lab's plot.py lies

namespace fs = std::filesystem;

namespace pd::lab {

namespace {

// The interpreter by its full path: /bin/sh's PATH may find another python3
// first (a virtual environment without matplotlib).
const std::string kPython = "/usr/bin/python3";

// s in single quotes, safe to paste into a POSIX shell whatever it holds.
std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Why plot.py cannot run here, or "" when it can.
std::string why_not_runnable(const std::string& script, const fs::path& out, bool skip) {
    if (skip) return "--no-plot";
    if (!fs::exists(kPython))
        return kPython + " is missing; the CSV files are in " + out.string() +
               ", draw them where python3 and matplotlib are installed";
    if (!fs::exists(script)) return script + " is missing: was the source folder this build came from moved?";
    return "";
}

// "status 1", or the signal that stopped plot.py: std::system returns a wait status.
std::string describe_exit(int status) {
    if (status == -1) return "could not start /bin/sh";
    if (WIFEXITED(status)) return "plot.py exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "plot.py was stopped by signal " + std::to_string(WTERMSIG(status));
    return "plot.py failed (wait status " + std::to_string(status) + ")";
}

// The script's path as the user can paste it: relative to the current folder
// when the script lies under it (./kit runs the labs from the kit's root, so
// the command reads the same on every machine), absolute otherwise.
std::string printable(const std::string& script) {
    std::error_code ec;
    const fs::path here = fs::current_path(ec);
    if (ec) return script;
    const fs::path rel = fs::path(script).lexically_proximate(here);
    return rel.empty() || *rel.begin() == ".." || rel.is_absolute() ? script : rel.string();
}

}  // namespace

void draw_plot(const std::string& lab_dir, const fs::path& out, bool skip, const std::string& drawn) {
    const std::string script = (kit_root() / lab_dir / "plot.py").string();
    const std::string cmd = kPython + " " + shell_quote(script) + " " + shell_quote(out.string());
    std::string why = why_not_runnable(script, out, skip);
    if (why.empty()) {
        std::fflush(stdout);  // the lab's report so far comes before anything plot.py prints
        const int status = std::system((cmd + " 1>&2").c_str());
        if (status == 0) {
            std::printf("\nplots: %s in %s\n", drawn.c_str(), out.string().c_str());
            return;
        }
        why = describe_exit(status) + "; matplotlib missing? apt-get install python3-matplotlib "
              "(or pip install matplotlib)";
    }
    std::printf("\nplots: not drawn (%s). Draw them with:\n  %s %s %s\n", why.c_str(), kPython.c_str(),
                shell_quote(printable(script)).c_str(), shell_quote(out.string()).c_str());
}

}  // namespace pd::lab
