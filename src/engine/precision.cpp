#include "engine/precision.hpp"

#include <array>

#include "common.hpp"
#include "engine/quantize.hpp"

namespace pd {

namespace {

// One row per format, in Format's order: the only place a format's facts live.
constexpr std::array<FormatTraits, 4> kFormats = {{
    //  format        name    bits quantized_max x_quantized_max packing                decode kernel                   prefill path                            cuda
    {Format::f32,  "f32",  32, 0,        0,         Packing::f32_columns,      DecodeKernel::f32_panels,       PrefillPath::onednn_f32,              true},
    {Format::bf16, "bf16", 16, 0,        0,         Packing::bf16_pairs,       DecodeKernel::bf16_panels,      PrefillPath::onednn_bf16,             true},
    {Format::int8, "int8",  8, kInt8Max, kInt16Max, Packing::quantized_groups, DecodeKernel::quantized_panels, PrefillPath::onednn_bf16_dequantized, true},
    {Format::int4, "int4",  4, kInt4Max, kInt8Max,  Packing::quantized_groups, DecodeKernel::quantized_panels, PrefillPath::onednn_bf16_dequantized, false},
}};

constexpr std::array<int, 3> kGroups = {32, 64, 128};

constexpr bool rows_in_order() {
    for (std::size_t i = 0; i < kFormats.size(); i++)
        if (kFormats[i].format != Format(i)) return false;
    return true;
}
static_assert(rows_in_order(), "kFormats must list the formats in Format's order");

Precision quantized_precision(Format f, int group) {
    bool known = false;
    for (int g : kGroups) known |= g == group;
    if (!known)
        fail("--group-size {} is not supported: use 32, 64 or 128 (inputs per {} scale)", group,
             format_traits(f).name);
    return {f, group};
}

}  // namespace

const FormatTraits& format_traits(Format f) { return kFormats[std::size_t(f)]; }

std::vector<std::string> format_names() {
    std::vector<std::string> names;
    for (const FormatTraits& t : kFormats) names.emplace_back(t.name);
    return names;
}

const char* precision_name(Precision p) {
    // "int8-g64" for every quantized format and group, made once.
    static const auto names = [] {
        std::array<std::array<std::string, kGroups.size()>, kFormats.size()> n;
        for (const FormatTraits& t : kFormats)
            for (std::size_t g = 0; g < kGroups.size(); g++)
                n[std::size_t(t.format)][g] = fmt::format("{}-g{}", t.name, kGroups[g]);
        return n;
    }();
    if (!is_quantized(p)) return p.traits().name;
    for (std::size_t g = 0; g < kGroups.size(); g++)
        if (kGroups[g] == p.group) return names[std::size_t(p.format)][g].c_str();
    return "?";
}

Precision int8_precision(int group) { return quantized_precision(Format::int8, group); }
Precision int4_precision(int group) { return quantized_precision(Format::int4, group); }

Precision parse_precision(const std::string& s, int group) {
    if (s == "fp32" || s == "float32") return Precision::f32;
    if (s == "bfloat16") return Precision::bf16;
    for (const FormatTraits& t : kFormats)
        if (s == t.name) return t.quantized_max ? quantized_precision(t.format, group) : Precision{t.format, 0};
    fail("unknown precision \"{}\": use f32, bf16, int8 or int4", s);
}

bool is_int8(Precision p) { return p.format == Format::int8; }
bool is_int4(Precision p) { return p.format == Format::int4; }
bool is_quantized(Precision p) { return p.traits().quantized_max > 0; }
int group_size(Precision p) { return is_quantized(p) ? p.group : 0; }
int quantized_max(Precision p) { return p.traits().quantized_max; }
int x_quantized_max(Precision p) { return p.traits().x_quantized_max; }
int weight_bits(Precision p) { return p.traits().bits; }
double bytes_per_weight(Precision p) { return weight_bits(p) / 8.0; }

}  // namespace pd
