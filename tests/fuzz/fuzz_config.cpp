// libFuzzer target: the text of a config.json. Bad input must end in a
// UserError; a crash, a sanitizer report or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common.hpp"
#include "io/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        pd::Config c = pd::parse_hf_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
        // An accepted config must be usable for sizing without overflow traps.
        volatile std::size_t n = c.n_params() + c.kv_elems_per_token();
        (void)n;
    } catch (const pd::UserError&) {
    }
    return 0;
}
