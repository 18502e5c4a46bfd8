// How the matrices' weights are stored, as data. A precision is a format and,
// for the quantized formats, a group size G: int8 and int4 are weight-only and
// symmetric, with one f32 scale per G consecutive inputs of an output's row
// (quantize.hpp). The group is part of the precision so that it travels
// wherever a precision does (loading, packing, the floors of the roofline).
//
// Everything the kit asks of a format is one row of the table in
// precision.cpp (FormatTraits): its bits, whether it is quantized, how a panel
// holds it, which decode kernel and which prefill path multiply by it, which
// devices run it. matmul.cpp dispatches on those fields, so a new format is a
// row there plus its packing and kernels (docs/families.md, "Adding a precision").
#pragma once

#include <string>
#include <vector>

namespace pd {

enum class Format { f32, bf16, int8, int4 };

// How one panel of 32 output columns holds a format (the layouts: Linear in matmul.hpp).
enum class Packing { f32_columns, bf16_pairs, quantized_groups };
// The small-M (decode) kernel family of matmul.cpp's linear_small_m.
enum class DecodeKernel { f32_panels, bf16_panels, quantized_panels };
// What oneDNN multiplies by for M > kSmallM (prefill).
enum class PrefillPath { onednn_f32, onednn_bf16, onednn_bf16_dequantized };

struct FormatTraits {
    Format format;
    const char* name;       // "int8": --precision's word
    int bits;               // of one stored value, scales apart: 32, 16, 8 or 4
    int quantized_max;      // q in [-max, max] with a scale per group; 0: not quantized
    int x_quantized_max;    // the decode kernel's x in [-max, max] per group (see below); 0: x stays f32
    Packing packing;
    DecodeKernel decode;
    PrefillPath prefill;
    bool cuda;              // the CUDA backend has kernels for it
};
const FormatTraits& format_traits(Format f);
std::vector<std::string> format_names();  // --precision's words, in Format's order

// {format, group}; Precision::int8_g64 and the like name the ones the kit runs.
struct Precision {
    Format format = Format::f32;
    int group = 0;  // inputs per scale: 32, 64 or 128 for a quantized format, else 0

    const FormatTraits& traits() const { return format_traits(format); }
    friend bool operator==(Precision, Precision) = default;

    static const Precision f32, bf16, int8_g32, int8_g64, int8_g128, int4_g32, int4_g64, int4_g128;
};
inline constexpr Precision Precision::f32{Format::f32, 0};
inline constexpr Precision Precision::bf16{Format::bf16, 0};
inline constexpr Precision Precision::int8_g32{Format::int8, 32};
inline constexpr Precision Precision::int8_g64{Format::int8, 64};
inline constexpr Precision Precision::int8_g128{Format::int8, 128};
inline constexpr Precision Precision::int4_g32{Format::int4, 32};
inline constexpr Precision Precision::int4_g64{Format::int4, 64};
inline constexpr Precision Precision::int4_g128{Format::int4, 128};

const char* precision_name(Precision p);  // "f32", "bf16", "int8-g64", "int4-g32", ...
// "f32" | "bf16" | "int8" | "int4" (with `group` inputs per scale: 32, 64 or 128), else UserError.
Precision parse_precision(const std::string& s, int group = 64);
Precision int8_precision(int group);      // 32, 64 or 128, else UserError
Precision int4_precision(int group);      // the same for int4
bool is_int8(Precision p);
bool is_int4(Precision p);
bool is_quantized(Precision p);           // int8 or int4: integers and per-group scales
int group_size(Precision p);              // G for int8 and int4, 0 otherwise
int quantized_max(Precision p);           // q in [-max, max]: 127 for int8, 7 for int4, 0 otherwise
// The decode kernel's x in [-max, max] per group: 32767 (int16) for int8
// weights, 127 (int8) for int4's, so that AVX-512 VNNI can multiply four
// bytes per lane (panel_quantized_avx512.cpp); 0 for f32 and bf16.
int x_quantized_max(Precision p);
int weight_bits(Precision p);             // of one stored value: 32, 16, 8 or 4
double bytes_per_weight(Precision p);     // the same in bytes: 4, 2, 1 or 0.5 (scales apart)

}  // namespace pd
