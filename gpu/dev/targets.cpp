// targets: judges measured GPU numbers against the two targets of the GPU
// track (see gpu/dev/targets.hpp). Host arithmetic only: built with or without
// the CUDA backend, so it is tested everywhere (the gpu.targets test).
//
//   targets --model synthetic:llama-1b --precision bf16 --bench bench.json
//            --bandwidth-gbs 4300 --gemm-tflops 600 [--json out.json]
//
// bench.json is what `pdlab bench --device cuda --json` wrote (batch 1);
// bandwidth and GEMM rate come from gpu/dev/bandwidth and gpu/dev/gemm on
// the same card. Prints one table; exits 0 whether or not the targets are
// met (--strict: exit 1 when one is missed), 2 on bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "io/config.hpp"
#include "load/model_source.hpp"
#include "targets.hpp"

namespace {

pd::Config config_of(const std::string& spec) {
    const std::string prefix = "synthetic:";
    if (spec.rfind(prefix, 0) == 0) {
        unsigned long long seed = 0;
        return pd::synthetic_config(spec.substr(prefix.size()), seed);
    }
    std::filesystem::path dir = spec;
    if (!std::filesystem::exists(dir / "config.json")) dir = pd::data_dir() / "models" / spec;
    if (!std::filesystem::exists(dir / "config.json"))
        pd::fail("no config.json for model \"{}\" (give synthetic:SPEC or a checkpoint folder)", spec);
    return pd::load_hf_config(dir / "config.json");
}

double number(const nlohmann::json& j, const char* key, const std::string& file) {
    if (!j.contains(key) || !j[key].is_number())
        pd::fail("{} has no number \"{}\": is it the --json output of pdlab bench?", file, key);
    return j[key].get<double>();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"targets: judge GPU prefill/decode timings against the card's measured bandwidth "
                 "and cuBLAS bf16 GEMM rate"};
    std::string model, precision = "bf16", bench, json_out;
    double bandwidth = 0, gemm = 0;
    bool strict = false;
    app.add_option("--model,-m", model, "the benchmarked model (synthetic:SPEC or a folder)")->required();
    app.add_option("--precision", precision, "its weight precision")->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
    app.add_option("--bench", bench, "JSON written by pdlab bench --json (batch 1)")->required();
    app.add_option("--bandwidth-gbs", bandwidth, "measured copy bandwidth, GB/s (gpu/dev/bandwidth)")->required();
    app.add_option("--gemm-tflops", gemm, "measured cuBLAS bf16 GEMM rate, TFLOP/s (gpu/dev/gemm)")->required();
    app.add_option("--json", json_out, "also write the verdict as JSON");
    app.add_flag("--strict", strict, "exit 1 when a target is missed");
    CLI11_PARSE(app, argc, argv);
    try {
        const pd::Config c = config_of(model);
        const pd::Precision p = pd::parse_precision(precision);
        std::ifstream in(bench);
        if (!in) pd::fail("cannot read {}", bench);
        nlohmann::json j;
        try {
            in >> j;
        } catch (const nlohmann::json::exception& e) {
            pd::fail("{} is not JSON: {}", bench, e.what());
        }
        const int P = int(number(j, "prompt_len", bench));
        const double batch = number(j, "batch", bench);
        const double prefill_ms = number(j, "prefill_ms_median", bench);
        const double decode_ms = number(j, "decode_ms_per_token_median", bench);
        if (batch != 1) pd::fail("{} was measured at batch {}; the targets are for batch 1", bench, batch);
        if (bandwidth <= 0 || gemm <= 0) pd::fail("--bandwidth-gbs and --gemm-tflops must be positive");
        const auto v = pd::targets::judge(c, p, P, prefill_ms, decode_ms, bandwidth, gemm);
        std::printf("GPU targets for %s (%s), prompt %d\n", model.c_str(), precision.c_str(), P);
        std::printf("  decode   %8.3f ms/token; floor %.3f ms = %.1f MB of weights / %.0f GB/s; "
                    "ratio %.2f (target <= %.1f): %s\n",
                    decode_ms, v.decode_floor_ms, v.weight_bytes / 1e6, bandwidth, v.decode_ratio,
                    pd::targets::kDecodeTarget, v.decode_ok ? "MET" : "MISSED");
        std::printf("  prefill  %8.3f ms; %.2f TFLOP of useful work -> %.1f TFLOP/s vs cuBLAS bf16 "
                    "%.1f TFLOP/s; ratio %.2f (target >= %.1f): %s\n",
                    prefill_ms, v.prefill_flops / 1e12, v.prefill_tflops, gemm,
                    v.prefill_ratio, pd::targets::kPrefillTarget, v.prefill_ok ? "MET" : "MISSED");
        if (!json_out.empty()) {
            nlohmann::json o;
            o["model"] = model;
            o["precision"] = precision;
            o["prompt_len"] = P;
            o["weight_bytes"] = v.weight_bytes;
            o["bandwidth_gbs"] = bandwidth;
            o["gemm_tflops"] = gemm;
            o["decode_ms_per_token"] = decode_ms;
            o["decode_floor_ms"] = v.decode_floor_ms;
            o["decode_ratio"] = v.decode_ratio;
            o["decode_target_max"] = pd::targets::kDecodeTarget;
            o["decode_met"] = v.decode_ok;
            o["prefill_ms"] = prefill_ms;
            o["prefill_flops"] = v.prefill_flops;
            o["prefill_tflops"] = v.prefill_tflops;
            o["prefill_ratio"] = v.prefill_ratio;
            o["prefill_target_min"] = pd::targets::kPrefillTarget;
            o["prefill_met"] = v.prefill_ok;
            std::ofstream out(json_out);
            if (!out) pd::fail("cannot write {}", json_out);
            out << o.dump(2) << "\n";
        }
        return strict && !(v.decode_ok && v.prefill_ok) ? 1 : 0;
    } catch (const pd::UserError& e) {
        std::fprintf(stderr, "targets: error: %s\n", e.what());
        return 2;
    }
}
