#include "base/kit_root.hpp"

#include <cstdlib>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

namespace pd {

namespace fs = std::filesystem;

namespace {

bool holds_kit(const fs::path& dir) {
    std::error_code ec;
    return fs::is_directory(dir / "data" / "models", ec);
}

// The source folder meson records in a build folder, or empty.
fs::path meson_source(const fs::path& build) {
    std::ifstream in(build / "meson-info" / "meson-info.json");
    if (!in) return {};
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("directories")) return {};
    const auto& dirs = j["directories"];
    return dirs.contains("source") && dirs["source"].is_string() ? fs::path(dirs["source"].get<std::string>())
                                                                : fs::path();
}

fs::path find_kit_root() {
    if (const char* env = std::getenv("PDLAB_KIT"); env && *env) return env;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
        if (holds_kit(dir)) return dir;
        if (const fs::path src = meson_source(dir); !src.empty() && holds_kit(src)) return src;
        if (dir == dir.root_path()) break;
    }
    return {};
}

}  // namespace

fs::path kit_root() {
    static const fs::path root = find_kit_root();  // the environment and the link read once
    return root;
}

}  // namespace pd
