// Where the kit's files lie (data/models, labs/*/plot.py) for a program that
// may have been moved: nothing of the build machine's paths is compiled in.
//
//   $PDLAB_KIT                 when set: the kit's folder, as given
//   else the nearest folder above the running program (/proc/self/exe) that
//   holds data/models, or that is a meson build folder whose source folder
//   (meson-info/meson-info.json) holds it: build/src/pdlab/pdlab finds the
//   checkout it was built in, wherever the build folder lies (pdlab-grade
//   builds in WORK/build from WORK/src); a program copied into a kit folder
//   (beside its data/) finds that one.
#pragma once

#include <filesystem>

namespace pd {

// The kit's folder, or an empty path when neither finds one.
std::filesystem::path kit_root();

// What kit_root() looks for, to name in an error message.
inline constexpr const char* kKitRootHelp =
    "the nearest folder above the program, or the source of the meson build it lies in, holding data/models; "
    "or $PDLAB_KIT";

}  // namespace pd
