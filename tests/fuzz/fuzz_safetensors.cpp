// libFuzzer target: a safetensors file (8-byte length, JSON header, data) held
// in memory, as Checkpoint reads each mapped file. Bad input must end in a
// UserError; anything else (a crash, a sanitizer report, another exception)
// is a finding.
#include <cstddef>
#include <cstdint>

#include "common.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        auto tensors = pd::read_safetensors(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
        // Touch every view's bytes: an accepted span must lie inside the input.
        volatile std::uint8_t sum = 0;
        for (const auto& [name, t] : tensors)
            for (std::size_t i = 0; i < t.nbytes; i += 64) sum = sum + std::uint8_t(t.data[i]);
    } catch (const pd::UserError&) {
    }
    return 0;
}
