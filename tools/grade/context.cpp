#include "context.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "outputs.hpp"

namespace pd::grade {

std::string in_kit(const Context& c, const fs::path& built) {
    return (fs::path("build") / built.lexically_relative(c.work_build)).string();
}

std::string tidy(const Context& c, const std::string& text) {
    std::string t = replace_all(text, c.work_src.string() + "/", "");
    t = replace_all(t, c.work_build.string() + "/", "build/");
    return replace_all(t, "../src/", "");
}

std::string shell_quote(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") ==
                          std::string::npos)
        return s;
    return fmt::format("'{}'", replace_all(s, "'", "'\\''"));
}

void say(const std::string& line) { std::fprintf(stderr, "pdlab-grade: %s\n", line.c_str()); }

fs::path fresh_scratch(const Context& c, const std::string& name) {
    fs::path p = c.work_runs / name;
    std::error_code ec;
    fs::remove_all(p, ec);
    fs::create_directories(p);
    return p;
}

}  // namespace pd::grade
