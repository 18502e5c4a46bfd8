// The settings the environment gives the engines, read once into typed values
// that travel in EngineOptions and Backends: at the command line's edge
// (pdlab's start-up, cli_common.cpp), and as those structs' defaults
// (environment_cuda_settings, environment_huge_pages), so that an engine or a
// load built without them still follows the environment. No engine reads the
// environment itself.
//   PDLAB_CUDA_KV      f32 (default) | bf16         the CUDA cache's element type
//   PDLAB_CUDA_FLASH   1 | 0 (default: 1 with a bf16 cache)   flash prefill attention
//   PDLAB_CUDA_GRAPHS  1 (default) | 0              decode steps as CUDA graphs
//   PDLAB_HUGEPAGES    1 (default) | 0              CPU decode weights advised as huge pages
// A switch takes 1, on or yes and 0, off or no. Any other value is refused by
// name (UserError), never taken as the default.
#pragma once

#include <functional>

#include "engine/engine.hpp"

namespace pd {

struct EngineSettings {
    CudaSettings cuda;
    bool huge_pages = true;
};

// The variable's value, or null when unset: std::getenv, or a test's table.
using EnvLookup = std::function<const char*(const char*)>;

EngineSettings engine_settings_from(const EnvLookup& env);
EngineSettings engine_settings_from_env();  // from this process's environment

}  // namespace pd
