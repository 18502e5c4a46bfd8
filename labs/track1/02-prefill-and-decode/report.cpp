// Lab 02, sections 4 and 5: the filled-in report, this device's row of the
// CPU-vs-GPU table, and the JSON.
#include <cstdio>

#include "lab02.hpp"
#include "results.hpp"

namespace pd::lab02 {

void section_report(Lab& lab, const Setup& setup, const Results& r, const GenerateResult* with) {
    const Options& o = lab.o;
    const Config& c = lab.engine.config();
    auto line = [](const char* k, const std::string& v) { std::printf("   %-30s %s\n", k, v.c_str()); };
    std::printf("4. Report\n");
    line("Model", fmt::format("{} ({}, {} layers, {} heads, {} KV heads)", o.common.model, family_name(c.family),
                              c.n_layers, c.n_heads, c.n_kv_heads));
    line("Hardware", setup.hardware);
    line("Software stack", setup.software);
    line("Precision", o.common.precision);
    line("Batch size B", "1");
    line("Prompt length P", std::to_string(lab.P()));
    line("Output length", fmt::format("{} tokens ({} decode steps)", o.steps + 1, o.steps));
    line("Warm-up runs", std::to_string(o.warmup));
    line("Measured runs", std::to_string(o.repeats));
    line("Prefill time (ms)", fmt::format("median {:.3f}, mean {:.3f} +/- {:.3f}", r.prefill.median, r.prefill.mean,
                                          r.prefill.stdev));
    line("Per-step decode (ms, median)", fmt::format("{:.3f} (mean {:.3f} +/- {:.3f}, p90 {:.3f}, n={})",
                                                     r.decode.median, r.decode.mean, r.decode.stdev, r.decode.p90,
                                                     r.decode.n));
    // TTFT and the prefill it contains from the SAME run (section 3's): the
    // median above comes from other runs, and one run's prefill can be faster
    // than their median, so TTFT beside the median can even look smaller.
    if (with)
        line("TTFT from generate() (ms)",
             fmt::format("{:.3f} in one run = its prefill {:.3f} + {:.3f} around it (choosing the token, "
                         "the clock): TTFT != prefill time", with->ttft_ms, with->prefill_ms,
                         with->ttft_ms - with->prefill_ms));
    line("Final cache length", fmt::format("{} (P + steps = {}: {})", r.final_len, lab.P() + o.steps,
                                           r.len_ok ? "ok" : "WRONG"));
    line("Device, sync method", fmt::format("{}: {}", device_name(lab.engine.device()), lab.engine.timing_method()));
    std::printf("   (These are measurements of THIS machine, now: other programs running on it show up as\n"
                "   spread. Report the median and the spread, never one run.)\n\n");
}

void section_device_row(Lab& lab, const Results& r) {
    const bool on_gpu = lab.engine.device() == Device::cuda;
    std::printf("5. Your row of the CPU-vs-GPU table (%s)\n", on_gpu ? "GPU" : "CPU");
    std::printf("   | device | prefill ms (median) | prefill tok/s | decode ms/step (median) | decode tok/s |\n");
    std::printf("   | %s | %.3f | %.0f | %.3f | %.0f |\n", device_name(lab.engine.device()), r.prefill.median,
                1000.0 * lab.P() / r.prefill.median, r.decode.median, 1000.0 / r.decode.median);
    std::string why_not;
    if (on_gpu) std::printf("   The CPU row: the same command with --device cpu, or ./kit compare 02.\n");
    else if (cuda_available(&why_not))
        std::printf("   The GPU row: the same command with --device cuda, or ./kit compare 02 for both.\n");
    else
        std::printf("   The GPU row: no GPU here. On a machine with one, run this command with --device cuda,\n"
                    "   or ./kit compare 02 for both rows. (Why not here: %s)\n", why_not.c_str());
}

void write_json(Lab& lab, const Setup& setup, const Results& r) {
    const Options& o = lab.o;
    nlohmann::json& js = lab.js;
    js["model"] = o.common.model;
    js["hardware"] = setup.hardware;
    js["software"] = setup.software;
    js["precision"] = o.common.precision;
    js["device"] = device_name(lab.engine.device());
    js["batch"] = 1;
    js["prompt_len"] = lab.P();
    js["decode_steps"] = o.steps;
    js["warmup"] = o.warmup;
    js["repeats"] = o.repeats;
    js["prefill_ms_median"] = r.prefill.median;
    js["prefill_ms_mean"] = r.prefill.mean;
    js["prefill_ms_stdev"] = r.prefill.stdev;
    js["decode_ms_median"] = r.decode.median;
    js["decode_ms_mean"] = r.decode.mean;
    js["decode_ms_stdev"] = r.decode.stdev;
    js["decode_ms_p90"] = r.decode.p90;
    js["final_cache_len"] = r.final_len;
    js["final_cache_len_ok"] = r.len_ok;
    js["timing_method"] = lab.engine.timing_method();
    lab::write_lab_json(o.common, js);
}

}  // namespace pd::lab02
