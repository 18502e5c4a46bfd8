#include "engine/engine_settings.hpp"

#include <cstdlib>
#include <string_view>

#include "common.hpp"

namespace pd {

namespace {

// An on/off variable: `unset` when it is not set.
bool switch_from(const EnvLookup& env, const char* name, bool unset) {
    const char* v = env(name);
    if (!v) return unset;
    const std::string_view s(v);
    if (s == "1" || s == "on" || s == "yes") return true;
    if (s == "0" || s == "off" || s == "no") return false;
    fail("{}={} is not a switch: use 1 (or on, yes) or 0 (or off, no)", name, s);
}

KvPrecision kv_from(const EnvLookup& env) {
    const char* v = env("PDLAB_CUDA_KV");
    if (!v || std::string_view(v) == "f32") return KvPrecision::f32;
    if (std::string_view(v) == "bf16") return KvPrecision::bf16;
    fail("PDLAB_CUDA_KV={} is not a KV cache precision: use f32 (the default) or bf16", v);
}

}  // namespace

EngineSettings engine_settings_from(const EnvLookup& env) {
    EngineSettings s;
    s.cuda.kv = kv_from(env);
    if (env("PDLAB_CUDA_FLASH"))
        s.cuda.flash = switch_from(env, "PDLAB_CUDA_FLASH", true) ? CudaSettings::Flash::on : CudaSettings::Flash::off;
    s.cuda.graphs = switch_from(env, "PDLAB_CUDA_GRAPHS", true);
    s.huge_pages = switch_from(env, "PDLAB_HUGEPAGES", true);
    return s;
}

EngineSettings engine_settings_from_env() {
    return engine_settings_from([](const char* name) -> const char* { return std::getenv(name); });
}

namespace {

const EngineSettings& environment_settings() {
    static const EngineSettings once = engine_settings_from_env();
    return once;
}

}  // namespace

const CudaSettings& environment_cuda_settings() { return environment_settings().cuda; }

bool environment_huge_pages() { return environment_settings().huge_pages; }

}  // namespace pd
