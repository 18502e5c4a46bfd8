#include "lab_main.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "startup_load.hpp"
#include "todo_exercise.hpp"

namespace pd::lab {

NotImplemented::NotImplemented(std::string f, std::string fn, std::string h)
    : std::logic_error(fn + " is not implemented yet"), file(std::move(f)), function(std::move(fn)),
      hint(std::move(h)) {}

int run_lab(CommandLine& cl, int argc, char** argv, const std::function<int()>& body) {
    if (const std::optional<int> rc = cl.parse(argc, argv)) return *rc;
    // The handout-commands test checks every command a handout shows; for the
    // long ones it stops here, once the arguments have parsed.
    if (const char* only = std::getenv("PDLAB_ARGS_ONLY"); only && std::string_view(only) == "1") {
        std::printf("PDLAB_ARGS_ONLY=1: the arguments parse; the lab does not run.\n");
        return 0;
    }
    try {
        const int rc = body();
        cli::warn_if_timings_unreliable();
        return rc;
    } catch (const NotImplemented& e) {
        std::fprintf(stderr,
                     "\nExercise not implemented yet: %s\n  in %s\n  hint: %s\n"
                     "Implement it, rebuild (./kit build) and run this lab again; its tests\n"
                     "(meson test -C build --suite <lab>) tell you when it is right.\n",
                     e.function.c_str(), e.file.c_str(), e.hint.c_str());
        return 3;
    } catch (const UserError& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
}

int finish(bool all_ok) {
    std::printf("%s\n", all_ok ? "All checks passed."
                                : "Some checks FAILED: see the rows marked above (exit code 1).");
    return all_ok ? 0 : 1;
}

}  // namespace pd::lab
