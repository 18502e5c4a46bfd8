#include "base/kit_root.hpp"

#include <cstdlib>
#include <system_error>

namespace pd {

namespace fs = std::filesystem;

namespace {

fs::path find_kit_root() {
    if (const char* env = std::getenv("PDLAB_KIT"); env && *env) return env;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
        if (fs::is_directory(dir / "data" / "models", ec)) return dir;
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
