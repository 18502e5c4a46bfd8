// pdlab info: what a model is, and what it costs in memory.
#include <cstdio>

#include <fmt/ranges.h>

#include "checkpoint_notes.hpp"
#include "cli_common.hpp"
#include "commands.hpp"

namespace pd::cli {

// What the family computes, from the config's traits: the norm, the MLP,
// the positions (and their scaling), the biases, the attention window.
static std::string family_traits_line(const Config& c) {
    const FamilyTraits& t = c.traits();
    std::string s = t.norm == Norm::rmsnorm ? "RMSNorm" : "LayerNorm";
    s += t.mlp == Mlp::swiglu ? ", SwiGLU MLP" : ", GELU (tanh) MLP";
    if (t.positions == Positions::learned) {
        s += ", learned positions";
    } else {
        s += fmt::format(", rotary positions (theta {:g}", c.rope_theta);
        if (c.rope_scaling.llama3)
            s += fmt::format(", llama3 scaling x{:g} of {} positions", c.rope_scaling.factor,
                             c.rope_scaling.original_max_positions);
        s += ")";
    }
    s += t.linear_bias ? ", biases everywhere" : c.qkv_bias ? ", q/k/v biases" : ", no biases";
    s += c.sliding_window > 0 ? fmt::format(", sliding window of {} positions", c.sliding_window)
                              : ", full causal attention";
    return s;
}

// The ids any of which ends a sequence (config.json's, or generation_config.json's where it lists them).
static std::string eos_line(const Config& c) {
    if (c.eos_ids.empty()) return "none: a run ends at its length";
    return fmt::format("{} {}", c.eos_ids.size() == 1 ? "id" : "any of ids", fmt::join(c.eos_ids, ", "));
}

// What `pdlab info --help` says before the options.
constexpr const char* kInfoAbout = R"(Load a model and print its family, shapes, parameter count, weight bytes and KV-cache
bytes per token (2 x layers x KV heads x head_dim x bytes per element).
Example: pdlab info --model synthetic:bench-llama-125m)";

Command add_info(CLI::App& app) {
    auto o = std::make_shared<CommonOptions>();
    auto* sub = app.add_subcommand("info", kInfoAbout);
    add_common(sub, *o, false);
    return {sub, [o]() {
        Session s = load_session(*o);
        start_engine(s, *o, 1, 1);  // info runs nothing: a one-position cache, whatever the context
        const Config& c = s.engine->config();
        const Model& m = s.engine->host_model();
        std::size_t kv_token = c.kv_elems_per_token() * sizeof(float);
        std::printf("model            %s\n", o->model.c_str());
        std::printf("family           %s (%s skeleton)\n", c.model_type.c_str(), family_name(c.family));
        std::printf("traits           %s\n", family_traits_line(c).c_str());
        std::printf("layers           %d\n", c.n_layers);
        std::printf("hidden size      %d (MLP %d)\n", c.dim, c.hidden_dim);
        std::printf("attention        %d query heads, %d KV heads (%s, group %d), head_dim %d\n", c.n_heads,
                    c.n_kv_heads,
                    c.n_kv_heads == c.n_heads ? "MHA" : c.n_kv_heads == 1 ? "MQA" : "GQA", c.group_size(),
                    c.head_dim);
        std::printf("vocabulary       %d (%s)\n", c.vocab_size, s.loaded.tokenizer.kind().c_str());
        std::printf("context          %d positions\n", c.max_seq_len);
        std::printf("end of sequence  %s\n", eos_line(c).c_str());
        std::printf("output head      %s\n", c.tied_head ? "tied to the token embedding" : "separate");
        std::printf("parameters       %.2f M\n", double(c.n_params()) / 1e6);
        std::printf("matrix weights   %.1f MB in %s (read once per decode step)\n",
                    double(matmul_weight_bytes(m.w)) / 1e6, precision_name(m.precision));
        std::printf("KV cache         %zu bytes per token (f32), %.1f MB at the full context\n", kv_token,
                    double(kv_token) * c.max_seq_len / 1e6);
        std::printf("KV cache here    %d position(s) allocated (generate/bench size it to the request)\n",
                    s.engine->max_seq());
        std::printf("device           %s (%s)\n", device_name(s.engine->device()), s.engine->hardware().c_str());
        if (s.engine->device() == Device::cpu)
            std::printf("kernels          %s\n", describe_kernels(cpu_weights(m).layers[0].qkv).c_str());
        if (s.loaded.file_bytes)
            std::printf("loaded           %.1f MB of checkpoint in %.0f ms\n", double(s.loaded.file_bytes) / 1e6,
                        s.loaded.load_ms);
        else
            std::printf("made             synthetic weights in %.0f ms\n", s.loaded.load_ms);
        print_keys_not_acted_on(s.loaded);
        return 0;
    }};
}

}  // namespace pd::cli
