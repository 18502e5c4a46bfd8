// The settings the environment gives the engines (engine/engine_settings.hpp):
// each variable lands in its typed field, and a value that is not one of the
// documented ones is refused by the variable's name, never taken as the default.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "common.hpp"
#include "engine/engine_settings.hpp"

using pd::CudaSettings;
using pd::KvPrecision;

namespace {

// engine_settings_from over a fixed table instead of the process's environment.
pd::EngineSettings settings_of(const std::map<std::string, std::string>& vars) {
    return pd::engine_settings_from([&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

}  // namespace

TEST_CASE("engine.settings.defaults") {
    const pd::EngineSettings s = settings_of({});
    CHECK(s.cuda.kv == KvPrecision::f32);
    CHECK(s.cuda.flash == CudaSettings::Flash::by_cache);
    CHECK(s.cuda.graphs);
    CHECK(s.huge_pages);
}

TEST_CASE("engine.settings.fields") {
    const pd::EngineSettings s = settings_of(
        {{"PDLAB_CUDA_KV", "bf16"}, {"PDLAB_CUDA_FLASH", "0"}, {"PDLAB_CUDA_GRAPHS", "off"}, {"PDLAB_HUGEPAGES", "no"}});
    CHECK(s.cuda.kv == KvPrecision::bf16);
    CHECK(s.cuda.flash == CudaSettings::Flash::off);
    CHECK_FALSE(s.cuda.graphs);
    CHECK_FALSE(s.huge_pages);
    CHECK(settings_of({{"PDLAB_CUDA_FLASH", "1"}}).cuda.flash == CudaSettings::Flash::on);
    CHECK(settings_of({{"PDLAB_CUDA_FLASH", "yes"}}).cuda.flash == CudaSettings::Flash::on);
    CHECK(settings_of({{"PDLAB_CUDA_GRAPHS", "on"}}).cuda.graphs);
    CHECK(settings_of({{"PDLAB_HUGEPAGES", "1"}}).huge_pages);
    CHECK(settings_of({{"PDLAB_CUDA_KV", "f32"}}).cuda.kv == KvPrecision::f32);
}

TEST_CASE("engine.settings.refusals") {
    const std::map<std::string, std::string> bad[] = {{{"PDLAB_CUDA_KV", "fp8"}},
                                                      {{"PDLAB_CUDA_KV", ""}},
                                                      {{"PDLAB_CUDA_FLASH", "maybe"}},
                                                      {{"PDLAB_CUDA_GRAPHS", "2"}},
                                                      {{"PDLAB_HUGEPAGES", "true"}}};
    for (const auto& vars : bad) {
        const std::string named = vars.begin()->first + "=" + vars.begin()->second;
        INFO(named);
        CHECK_THROWS_WITH_AS(settings_of(vars), doctest::Contains(named.c_str()), pd::UserError);
    }
}
