// What of a checkpoint's files the kit does not act on, said out loud: the
// keys of config.json it does not know (io/config.hpp's unknown_config_keys)
// and the decoding generation_config.json asks for (io/generation_config.hpp).
#pragma once

#include "load/model_source.hpp"

namespace pd::cli {

// pdlab info's "config keys" and "generation" lines (nothing for a synthetic model).
void print_keys_not_acted_on(const LoadedModel& loaded);

// A note on stderr naming what generation_config.json asks for and the kit
// does not apply (pdlab generate and serve); nothing when there is none.
void note_generation_config(const LoadedModel& loaded);

}  // namespace pd::cli
