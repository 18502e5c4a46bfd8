#include "io/config.hpp"

#include <cmath>
#include <cstdint>
#include <sstream>

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd {

std::size_t Config::n_params() const {
    std::size_t D = dim, F = hidden_dim, V = vocab_size;
    std::size_t per_layer = D * q_dim() + 2 * D * kv_dim() + q_dim() * D;  // attention
    if (family == Family::gpt2) {
        per_layer += 2 * D * F + F + D;                     // MLP fc, proj + biases
        per_layer += q_dim() + 2 * kv_dim() + D + 4 * D;    // attention biases, two LayerNorms
    } else {
        per_layer += 3 * D * F + 2 * D;                     // gate, up, down + two RMSNorms
    }
    std::size_t total = per_layer * n_layers + V * D + (tied_head ? 0 : V * D);
    total += family == Family::gpt2 ? std::size_t(max_seq_len) * D + 2 * D : D;
    return total;
}

std::size_t Config::n_matmul_params() const {
    std::size_t D = dim, F = hidden_dim, V = vocab_size;
    std::size_t mlp = (family == Family::gpt2 ? 2 : 3) * D * F;
    std::size_t attn = D * q_dim() + 2 * D * kv_dim() + q_dim() * D;
    return (attn + mlp) * n_layers + V * D;
}

const char* family_name(Family f) { return f == Family::gpt2 ? "gpt2" : "llama"; }

void validate(const Config& c, const std::string& origin) {
    auto need_positive = [&](int v, const char* what) {
        if (v <= 0) fail("{}: {} must be positive, got {}", origin, what, v);
    };
    need_positive(c.dim, "hidden size");
    need_positive(c.hidden_dim, "intermediate size");
    need_positive(c.n_layers, "number of layers");
    need_positive(c.n_heads, "number of attention heads");
    need_positive(c.n_kv_heads, "number of key/value heads");
    need_positive(c.head_dim, "head_dim");
    need_positive(c.vocab_size, "vocab_size");
    need_positive(c.max_seq_len, "context length");
    // q_dim() and kv_dim() are ints; 2^24 is far above any real model's width.
    if (std::int64_t(c.n_heads) * c.head_dim > (1 << 24))
        fail("{}: {} heads of {} make a query width beyond 2^24; no real model is this wide", origin,
             c.n_heads, c.head_dim);
    if (c.n_heads % c.n_kv_heads != 0)
        fail("{}: {} attention heads cannot be shared evenly by {} key/value heads "
             "(num_attention_heads must be a multiple of num_key_value_heads)",
             origin, c.n_heads, c.n_kv_heads);
    if (c.head_dim % 2 != 0 && c.family == Family::llama)
        fail("{}: rotary embeddings need an even head_dim, got {}", origin, c.head_dim);
    if (c.family == Family::gpt2 && c.n_heads * c.head_dim != c.dim)
        fail("{}: GPT-2 needs n_embd ({}) divisible by n_head ({})", origin, c.dim, c.n_heads);
    if (c.bos_id >= c.vocab_size || c.eos_id >= c.vocab_size)
        fail("{}: bos/eos token id is outside the vocabulary of {}", origin, c.vocab_size);
}

namespace {

// Every size a config gives (widths, layers, heads, vocabulary, context) is an
// integer in 0..2^24: the largest real ones are ~10M (Llama 4's context), and
// products of two of them still fit in 64 bits.
constexpr long long kMaxConfigInt = 1 << 24;

int config_int(const JsonObject& j, const char* key) { return int(j.integer(key, 0, kMaxConfigInt)); }

int config_int_or(const JsonObject& j, const char* key, int fallback) {
    return int(j.integer_or(key, fallback, 0, kMaxConfigInt));
}

float config_float_or(const JsonObject& j, const char* key, float fallback) {
    return float(j.number_or(key, fallback, 0.0, 1e30));
}

// bos/eos: an id, a list of ids (Llama 3 lists several eos; the first is
// used), or absent (-1).
int token_id(const JsonObject& j, const char* key) {
    const Json* v = j.find(key);
    if (!v) return -1;
    if (v->is_array()) return v->empty() ? -1 : int(json_integer((*v)[0], j.where(key), 0, kMaxConfigInt));
    return int(json_integer(*v, j.where(key), 0, kMaxConfigInt));
}

void read_gpt2(const JsonObject& j, Config& c) {
    c.family = Family::gpt2;
    c.dim = config_int(j, "n_embd");
    c.n_layers = config_int(j, "n_layer");
    c.n_heads = config_int(j, "n_head");
    c.n_kv_heads = c.n_heads;
    c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
    c.hidden_dim = config_int_or(j, "n_inner", 4 * c.dim);
    c.vocab_size = config_int(j, "vocab_size");
    c.max_seq_len = config_int_or(j, "n_positions", config_int_or(j, "n_ctx", 1024));
    c.norm_eps = config_float_or(j, "layer_norm_epsilon", 1e-5f);
    c.tied_head = true;
    std::string act = j.string_or("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
        fail("{}: activation_function {} is not supported (the kit implements GPT-2's gelu_new, the "
             "tanh approximation)", j.origin(), clipped_quote(act));
}

void read_llama(const JsonObject& j, Config& c) {
    c.family = Family::llama;
    c.dim = config_int(j, "hidden_size");
    c.hidden_dim = config_int(j, "intermediate_size");
    c.n_layers = config_int(j, "num_hidden_layers");
    c.n_heads = config_int(j, "num_attention_heads");
    c.n_kv_heads = config_int_or(j, "num_key_value_heads", c.n_heads);
    c.head_dim = config_int_or(j, "head_dim", c.n_heads > 0 ? c.dim / c.n_heads : 0);
    c.vocab_size = config_int(j, "vocab_size");
    c.max_seq_len = config_int_or(j, "max_position_embeddings", 2048);
    c.norm_eps = config_float_or(j, "rms_norm_eps", 1e-6f);
    c.rope_theta = config_float_or(j, "rope_theta", 10000.0f);
    c.tied_head = j.bool_or("tie_word_embeddings", false);
    if (j.find("rope_scaling"))
        fail("{}: rope_scaling is set; the kit implements plain rotary embeddings only, "
             "so this checkpoint's logits would be wrong", j.origin());
    if (j.bool_or("attention_bias", false) || j.bool_or("mlp_bias", false))
        fail("{}: attention_bias/mlp_bias are not supported for the llama family", j.origin());
}

}  // namespace

Config parse_hf_config(std::string_view text, const std::string& origin) {
    Json root = parse_json(text, origin);
    JsonObject j(root, origin);
    std::string type = j.string_or("model_type", "");
    Config c;
    if (type == "gpt2") {
        read_gpt2(j, c);
    } else if (type == "llama" || type == "mistral") {
        read_llama(j, c);
    } else {
        fail("{}: model_type {} is not supported; the kit runs \"gpt2\" and \"llama\" checkpoints", origin,
             clipped_quote(type));
    }
    c.bos_id = token_id(j, "bos_token_id");
    c.eos_id = token_id(j, "eos_token_id");
    validate(c, origin);
    return c;
}

Config load_hf_config(const std::filesystem::path& path) {
    std::string text = read_regular_file(path, kMaxJsonFileBytes, "; a Hugging Face model folder needs a config.json");
    Config c = parse_hf_config(text, path.string());
    c.name = path.parent_path().string();
    return c;
}

namespace {

Config preset(const std::string& name) {
    Config c;
    c.name = "synthetic:" + name;
    if (name == "gpt2-124m") {  // GPT-2 small
        c.family = Family::gpt2;
        c.dim = 768, c.hidden_dim = 3072, c.n_layers = 12, c.n_heads = 12, c.n_kv_heads = 12;
        c.head_dim = 64, c.vocab_size = 50257, c.max_seq_len = 1024, c.tied_head = true;
    } else if (name == "mha-h8-d64") {  // small MHA model whose cache is [B, 8, S, 64]
        c.family = Family::gpt2;
        c.dim = 512, c.hidden_dim = 2048, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 8;
        c.head_dim = 64, c.vocab_size = 512, c.max_seq_len = 512, c.tied_head = true;
    } else if (name == "bench-llama-125m") {  // the kit's performance yardstick: keep exactly so
        c.family = Family::llama;
        c.dim = 768, c.hidden_dim = 2048, c.n_layers = 12, c.n_heads = 12, c.n_kv_heads = 4;
        c.head_dim = 64, c.vocab_size = 32000, c.max_seq_len = 1024, c.tied_head = false;
        c.norm_eps = 1e-5f, c.rope_theta = 10000.0f;
    } else if (name == "llama-1b") {  // the shape of a 1B Llama (Llama 3.2 1B-like)
        c.family = Family::llama;
        c.dim = 2048, c.hidden_dim = 8192, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8;
        c.head_dim = 64, c.vocab_size = 128256, c.max_seq_len = 4096, c.tied_head = true;
        c.norm_eps = 1e-5f, c.rope_theta = 500000.0f;
    } else if (name == "llama" || name == "gpt2") {  // a small default of the family, then key=value
        c.family = name == "gpt2" ? Family::gpt2 : Family::llama;
        c.dim = 256, c.hidden_dim = 768, c.n_layers = 2, c.n_heads = 4;
        c.n_kv_heads = c.family == Family::gpt2 ? 4 : 2;
        c.head_dim = 64, c.vocab_size = 512, c.max_seq_len = 512;
        c.tied_head = c.family == Family::gpt2;
    } else {
        fail("unknown synthetic preset \"{}\". {}", name, synthetic_presets_help());
    }
    return c;
}

}  // namespace

std::string synthetic_presets_help() {
    return "Presets: gpt2-124m, mha-h8-d64, bench-llama-125m, llama-1b; or a family (llama, gpt2) "
           "followed by key=value pairs, e.g. synthetic:llama,dim=512,layers=4,heads=8,kv_heads=2. "
           "Keys: dim, ffn, layers, heads, kv_heads, head_dim, vocab, ctx, tied (0/1), eps, theta, "
           "seed.";
}

Config synthetic_config(const std::string& spec, unsigned long long& seed) {
    std::stringstream ss(spec);
    std::string part;
    std::getline(ss, part, ',');
    Config c = preset(part);
    bool head_dim_given = false;
    seed = 1234;
    while (std::getline(ss, part, ',')) {
        auto eq = part.find('=');
        if (eq == std::string::npos) fail("synthetic:{}: expected key=value, got \"{}\"", spec, part);
        std::string key = part.substr(0, eq), val = part.substr(eq + 1);
        long long v = 0;
        double fv = 0;
        try {
            std::size_t used = 0;
            fv = std::stod(val, &used);
            if (used != val.size()) throw std::invalid_argument(val);
            v = static_cast<long long>(fv);
        } catch (const std::exception&) {
            fail("synthetic:{}: value of {} must be a number, got \"{}\"", spec, key, val);
        }
        bool integer_key = key != "eps" && key != "theta" && key != "seed";
        if (integer_key && (fv != std::trunc(fv) || std::fabs(fv) > double(kMaxConfigInt)))
            fail("synthetic:{}: {} must be a whole number up to 2^24, got {}", spec, key, val);
        if (key == "dim") c.dim = int(v);
        else if (key == "ffn") c.hidden_dim = int(v);
        else if (key == "layers") c.n_layers = int(v);
        else if (key == "heads") c.n_heads = int(v);
        else if (key == "kv_heads") c.n_kv_heads = int(v);
        else if (key == "head_dim") c.head_dim = int(v), head_dim_given = true;
        else if (key == "vocab") c.vocab_size = int(v);
        else if (key == "ctx") c.max_seq_len = int(v);
        else if (key == "tied") c.tied_head = v != 0;
        else if (key == "eps") c.norm_eps = float(fv);
        else if (key == "theta") c.rope_theta = float(fv);
        else if (key == "seed") seed = static_cast<unsigned long long>(v);
        else fail("synthetic:{}: unknown key \"{}\". {}", spec, key, synthetic_presets_help());
    }
    if (!head_dim_given && c.n_heads > 0) c.head_dim = c.dim / c.n_heads;
    if (c.family == Family::gpt2) c.n_kv_heads = c.n_heads, c.tied_head = true;
    c.name = "synthetic:" + spec;
    validate(c, c.name);
    return c;
}

}  // namespace pd
