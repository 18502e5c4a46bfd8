// pdlab isa: which instruction set the CPU kernels run with here, and which
// ones PDLAB_ISA can choose.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "base/hardware.hpp"
#include "engine/isa.hpp"

namespace pd::cli {

// What `pdlab isa --help` says before the options.
constexpr const char* kIsaAbout = R"(Show the instruction set the CPU kernels use on this machine. One build carries kernels for
AVX-512, AVX2, NEON (ARM64) and a portable fallback, and picks the best this CPU runs.
Set PDLAB_ISA to one of the names listed to run a lesser one instead (to test or compare
the path a student's laptop takes), e.g.  PDLAB_ISA=avx2 pdlab bench ...)";

Command add_isa(CLI::App& app) {
    auto list = std::make_shared<bool>(false);
    auto* sub = app.add_subcommand("isa", kIsaAbout);
    sub->add_flag("--list", *list, "print only the names PDLAB_ISA accepts here, best first");
    return {sub, [list]() {
        std::string names;
        for (const std::string& n : available_isas()) names += (names.empty() ? "" : " ") + n;
        if (*list) {
            std::printf("%s\n", names.c_str());
            return 0;
        }
        std::printf("CPU              %s\n", cpu_model().c_str());
        std::printf("PDLAB_ISA        %s (best first; unset or \"best\" picks the first)\n", names.c_str());
        std::printf("kernels          %s\n", kernel_isa().c_str());
        std::printf("AVX-512 BF16     %s\n", use_avx512_bf16() ? "used for bf16 decode (vdpbf16ps)" : "not used");
        std::printf("AVX-512 VNNI     %s\n", use_avx512_vnni() ? "used for int8/int4 decode (vpdpwssd)" : "not used");
        return 0;
    }};
}

}  // namespace pd::cli
