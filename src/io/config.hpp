// The model's shape: everything needed to size weights, activations and cache.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pd {

// Two decoder skeletons, with the semantics of their Hugging Face classes.
//   gpt2 : learned positions, LayerNorm with bias, GELU (tanh) MLP, biases everywhere.
//   llama: rotary positions ("rotate half"), RMSNorm, SwiGLU MLP, no biases, GQA.
// Mistral and Qwen2 are the llama skeleton with a checkpoint's own traits
// (a sliding window, q/k/v biases): Config::model_type names them, and the
// code reads the traits (Config::traits(), the fields below), never the name.
enum class Family { gpt2, llama };

enum class Norm { layernorm, rmsnorm };        // LayerNorm has a bias, RMSNorm none
enum class Mlp { gelu_tanh, swiglu };          // fc -> gelu -> proj | [gate | up] -> silu(gate) * up -> down
enum class Positions { learned, rotary };      // a position embedding added to x | RoPE on q and k

// What a skeleton computes, as data: one row per Family (family_traits()).
struct FamilyTraits {
    const char* name;
    Norm norm;
    Mlp mlp;
    Positions positions;
    bool linear_bias;  // every linear layer and norm has a bias (GPT-2)
};
const FamilyTraits& family_traits(Family f);

// Rotary frequency scaling. Only Llama 3's ("llama3") is implemented: the
// frequencies whose wavelength exceeds original_max_positions / low_freq_factor
// are divided by `factor`, those under .. / high_freq_factor kept, those
// between blended (see rope_inv_freq()).
struct RopeScaling {
    bool llama3 = false;  // false: plain rotary embeddings
    float factor = 1.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f;
    int original_max_positions = 8192;
};

// Bytes of K and V for `tokens` cached positions, every layer:
// 2 * layers * kv heads * head_dim * bytes_per_elem * tokens. The one formula
// for cache sizes (Config, KVCache, the GPU's memory check).
constexpr std::size_t kv_bytes(int n_layers, int n_kv_heads, int head_dim, std::size_t tokens,
                               std::size_t bytes_per_elem) {
    return 2ull * n_layers * n_kv_heads * head_dim * bytes_per_elem * tokens;
}

struct Config {
    std::string name;       // "tiny", "synthetic:bench-llama-125m", a folder path ...
    Family family = Family::llama;
    int dim = 0;            // hidden size (d_model)
    int hidden_dim = 0;     // MLP intermediate size
    int n_layers = 0;
    int n_heads = 0;        // query heads
    int n_kv_heads = 0;     // key/value heads: == n_heads is MHA, 1 is MQA, between is GQA
    int head_dim = 0;       // usually dim / n_heads, but Llama configs may set it apart
    int vocab_size = 0;
    int max_seq_len = 0;    // context length: positions 0 .. max_seq_len-1
    float norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    bool tied_head = true;  // output head shares the token embedding matrix
    std::string model_type = "llama";  // config.json's model_type: llama, mistral, qwen2, gpt2
    bool qkv_bias = false;  // q/k/v projections have biases (Qwen2; GPT-2 has every bias)
    int sliding_window = 0; // > 0: query i sees keys i-W+1 .. i only (Mistral); 0: every earlier key
    RopeScaling rope_scaling;
    int bos_id = -1;        // -1: the model has none (only checked: nothing prepends it)
    // The end-of-sequence ids: any of them ends a sequence (Llama 3.1 lists
    // 128001, 128008 and 128009). config.json's eos_token_id (an id or a list),
    // replaced by generation_config.json's where that file gives one, as
    // transformers' generate() does (load_hf_config). Empty: none.
    std::vector<int> eos_ids;

    int q_dim() const { return n_heads * head_dim; }
    int kv_dim() const { return n_kv_heads * head_dim; }
    // Query heads that share one KV head (1 for MHA, n_heads for MQA).
    int group_size() const { return n_heads / n_kv_heads; }
    const FamilyTraits& traits() const { return family_traits(family); }
    // Rows of the MLP's input product: [gate | up] for SwiGLU, one hidden layer for GELU.
    int mlp_in_rows() const { return traits().mlp == Mlp::swiglu ? 2 * hidden_dim : hidden_dim; }

    // Parameters, counting a tied head once.
    std::size_t n_params() const;
    // Parameters of the matrix products a decode step streams from memory
    // (every Linear weight plus the head; not embeddings, norms or biases).
    std::size_t n_matmul_params() const;
    // K and V for one token in every layer, in elements: 2 * L * H_kv * D
    // (its bytes at one byte per element).
    std::size_t kv_elems_per_token() const { return kv_bytes(n_layers, n_kv_heads, head_dim, 1, 1); }
};

const char* family_name(Family f);

// Checks the invariants (heads divide evenly, sizes positive, ...); fails with
// a UserError that names the offending field of `origin`.
void validate(const Config& c, const std::string& origin);

// Reads a Hugging Face config.json (model_type gpt2, llama, mistral or qwen2),
// and the eos_token_id of the generation_config.json beside it, if any (it
// replaces config.json's ids); a UserError for a file that is not a regular
// file, bad JSON, a wrong type, an integer field that is fractional or out of
// range, or a key that changes the math in a way the kit does not implement
// (named; see config.cpp's list).
Config load_hf_config(const std::filesystem::path& config_json);
// config.json alone, from the file's text; `origin` names it in messages.
Config parse_hf_config(std::string_view text, const std::string& origin);

// The keys of a config.json (its text) the kit neither reads, nor refuses when
// they would change the math (config.cpp's unimplemented_keys()), nor knows
// to leave the math alone (names, dropout, dtype, ...): pdlab info lists them,
// for the reader to check against the model's own code.
std::vector<std::string> unknown_config_keys(std::string_view text, const std::string& origin);

// Parses "PRESET", "FAMILY,key=value,..." or "PRESET,key=value,..." (the part
// after "synthetic:"). Returns the shape and the seed in `seed`.
Config synthetic_config(const std::string& spec, unsigned long long& seed);

// The preset names, for --help and error messages.
std::string synthetic_presets_help();

}  // namespace pd
