#include "startup_load.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace pd::cli {

namespace {

constinit StartupLoad g_startup;

// Set in the environment of the program run again with the choice applied:
// the other work seen the first time, e.g. "1.9", and ",passive" when the
// wait policy was set here (an OMP_WAIT_POLICY already there is the user's).
constexpr char kMarker[] = "PDLAB_OPENMP_FROM_LOAD";

// NAME's value in `envp`, or nullptr. The C library has not initialised yet
// when this runs (getenv reads the environment it sets up later).
const char* env_value(char** envp, const char* name) {
    const std::size_t n = std::strlen(name);
    for (char** e = envp; e && *e; ++e)
        if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return nullptr;
}

// Runs the program again from the start with `extra` added to its
// environment (static buffers: no heap yet). Returns only when it cannot.
void exec_again_with(char** argv, char** envp, char* const* extra, int n_extra) {
    static char* env[4096];
    int n = 0;
    for (char** e = envp; e && *e; ++e)
        if (n + n_extra + 1 < int(std::size(env))) env[n++] = *e;
        else return;
    for (int i = 0; i < n_extra; ++i) env[n++] = extra[i];
    env[n] = nullptr;
    ::execve("/proc/self/exe", argv, env);
}

// Runs before any library's constructor, the C library's, C++'s and OpenMP's
// among them: only plain C calls and machine_load's reads here. OpenMP reads
// its environment in its constructor, and the C library's puts back the
// environment the program started with, so a choice that needs
// OMP_NUM_THREADS or OMP_WAIT_POLICY runs the program again with them set:
// once, only on a busy machine (a few ms of start-up against a 50x slowdown).
void choose_openmp_settings(int, char** argv, char** envp) {
    g_startup.machine = read_machine_load();
    const char* threads = env_value(envp, "OMP_NUM_THREADS");
    if (const char* seen = env_value(envp, kMarker)) {  // the second start: the choice is in the environment
        g_startup.busy_cores = std::strtod(seen, nullptr);
        g_startup.threads = threads ? std::atoi(threads) : g_startup.machine.cores;
        g_startup.passive = std::strstr(seen, ",passive") != nullptr;
        g_startup.user_policy = !g_startup.passive && (env_value(envp, "OMP_WAIT_POLICY") || env_value(envp, "GOMP_SPINCOUNT"));
        return;
    }
    g_startup.busy_cores = busy_cores(g_startup.machine, 1);
    g_startup.user_policy = env_value(envp, "OMP_WAIT_POLICY") || env_value(envp, "GOMP_SPINCOUNT");
    const OpenmpChoice choice = openmp_choice_for(g_startup.busy_cores, g_startup.machine.cores);
    g_startup.threads = threads ? 0 : choice.threads;
    const bool set_threads = !threads && choice.threads != g_startup.machine.cores;
    const bool set_passive = !g_startup.user_policy && choice.passive;
    if (!set_threads && !set_passive) return;
    static char threads_var[32], marker_var[64], passive_var[] = "OMP_WAIT_POLICY=PASSIVE";
    std::snprintf(threads_var, sizeof threads_var, "OMP_NUM_THREADS=%d", choice.threads);
    std::snprintf(marker_var, sizeof marker_var, "%s=%.1f%s", kMarker, g_startup.busy_cores,
                  set_passive ? ",passive" : "");
    char* extra[3];
    int n = 0;
    extra[n++] = marker_var;
    if (set_threads) extra[n++] = threads_var;
    if (set_passive) extra[n++] = passive_var;
    exec_again_with(argv, envp, extra, n);
}

// The loader calls the functions of an executable's .preinit_array before it
// initialises any shared library.
[[gnu::section(".preinit_array"), gnu::used]] void (*const g_choose_openmp_settings)(int, char**, char**) =
    choose_openmp_settings;

}  // namespace

const StartupLoad& startup_load() { return g_startup; }

std::string default_threads_note() {
    const StartupLoad& s = g_startup;
    if (s.threads == 0) return fmt::format("{} from OMP_NUM_THREADS", std::getenv("OMP_NUM_THREADS"));
    const std::string wait = s.passive       ? ", waiting at barriers without spinning"
                             : s.user_policy ? ", waiting as OMP_WAIT_POLICY/GOMP_SPINCOUNT say"
                                             : "";
    if (s.busy_cores < 0.5) return fmt::format("{}: all {} cores are free{}", s.threads, s.machine.cores, wait);
    return fmt::format("{}: other work keeps about {:.1f} of the {} cores busy{}", s.threads, s.busy_cores,
                       s.machine.cores, wait);
}

void print_threads_note(int threads_option) {
    const StartupLoad& s = g_startup;
    if (threads_option == 0) {
        std::fprintf(stderr, "threads: %s\n", default_threads_note().c_str());
        return;
    }
    if (!s.passive) return;
    fmt::print(stderr, "note: OpenMP threads sleep between parallel regions (OMP_WAIT_POLICY=PASSIVE, chosen because "
                       "other work kept about {:.1f} of the {} cores busy as pdlab started); each region pays to "
                       "wake them: a decode step once, a prefill once per product. To time spinning threads, "
                       "rerun with OMP_WAIT_POLICY=ACTIVE\n",
               s.busy_cores, s.machine.cores);
}

void warn_if_timings_unreliable() {
    const std::string w = unreliable_timing_warning(g_startup.machine, read_machine_load());
    if (!w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
}

}  // namespace pd::cli
