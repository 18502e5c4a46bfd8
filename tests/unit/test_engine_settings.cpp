// The settings the environment gives the engines (engine/engine_settings.hpp):
// each variable lands in its typed field, and a value that is not one of the
// documented ones is refused by the variable's name, never taken as the default;
// huge_pages reaches the packed weights.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "common.hpp"
#include "engine/engine_settings.hpp"
#include "engine/weights_cpu.hpp"
#include "load/model_source.hpp"

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
    const pd::EngineSettings s = settings_of({{"PDLAB_CUDA_KV", "bf16"},
                                              {"PDLAB_CUDA_FLASH", "0"},
                                              {"PDLAB_CUDA_GRAPHS", "off"},
                                              {"PDLAB_HUGEPAGES", "no"}});
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

// PDLAB_HUGEPAGES reaches the memory decode streams through the load
// (Backends::huge_pages): every arena of the packed weights carries it.
TEST_CASE("engine.settings.huge_pages_reach_the_arenas") {
    for (bool huge : {true, false}) {
        INFO("huge_pages " << huge);
        auto lm = pd::load_model("synthetic:llama,dim=64,ffn=96,layers=2,heads=4,kv_heads=4,vocab=97,ctx=64",
                                 pd::Precision::f32, false, {.cpu = true, .huge_pages = huge});
        const pd::CpuWeights& w = pd::cpu_weights(*lm.model);
        for (const pd::Linear* L : {&w.layers[0].qkv, &w.layers.back().mlp_out, &w.head}) {
            REQUIRE(L->store);
            for (const auto& arena : L->store->arenas) CHECK(arena.get_allocator().advise == huge);
        }
    }
}
