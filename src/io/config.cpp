#include "io/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "common.hpp"
#include "io/json_checked.hpp"
#include "io/model_file.hpp"

namespace pd {

const FamilyTraits& family_traits(Family f) {
    static const FamilyTraits gpt2{"gpt2", Norm::layernorm, Mlp::gelu_tanh, Positions::learned, true};
    static const FamilyTraits llama{"llama", Norm::rmsnorm, Mlp::swiglu, Positions::rotary, false};
    return f == Family::gpt2 ? gpt2 : llama;
}

const char* family_name(Family f) { return family_traits(f).name; }

std::size_t Config::n_params() const {
    const FamilyTraits& t = traits();
    std::size_t D = dim, V = vocab_size;
    std::size_t per_layer = D * q_dim() + 2 * D * kv_dim() + q_dim() * D;  // attention
    per_layer += std::size_t(mlp_in_rows()) * D + std::size_t(hidden_dim) * D;  // MLP
    per_layer += 2 * D * (t.norm == Norm::layernorm ? 2 : 1);               // two norms
    if (t.linear_bias) per_layer += q_dim() + 2 * kv_dim() + D + mlp_in_rows() + D;
    else if (qkv_bias) per_layer += q_dim() + 2 * kv_dim();
    std::size_t total = per_layer * n_layers + V * D + (tied_head ? 0 : V * D);
    total += t.positions == Positions::learned ? std::size_t(max_seq_len) * D : 0;
    total += D * (t.norm == Norm::layernorm ? 2 : 1);  // final norm
    return total;
}

std::size_t Config::n_matmul_params() const {
    std::size_t D = dim;
    std::size_t mlp = std::size_t(mlp_in_rows()) * D + std::size_t(hidden_dim) * D;
    std::size_t attn = D * q_dim() + 2 * D * kv_dim() + q_dim() * D;
    return (attn + mlp) * n_layers + std::size_t(vocab_size) * D;
}

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
    if (c.head_dim % 2 != 0 && c.traits().positions == Positions::rotary)
        fail("{}: rotary embeddings need an even head_dim, got {}", origin, c.head_dim);
    if (c.family == Family::gpt2 && c.n_heads * c.head_dim != c.dim)
        fail("{}: GPT-2 needs n_embd ({}) divisible by n_head ({})", origin, c.dim, c.n_heads);
    if (c.sliding_window < 0) fail("{}: sliding_window must be positive, got {}", origin, c.sliding_window);
    if (c.bos_id >= c.vocab_size)
        fail("{}: bos_token_id {} is outside the vocabulary of {}", origin, c.bos_id, c.vocab_size);
    for (int id : c.eos_ids)
        if (id >= c.vocab_size) fail("{}: eos_token_id {} is outside the vocabulary of {}", origin, id, c.vocab_size);
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

// eos_token_id and the like: an id, a list of ids, or absent or null (none).
std::vector<int> token_ids(const JsonObject& j, const char* key) {
    const Json* v = j.find(key);
    if (!v) return {};
    if (!v->is_array()) return {int(json_integer(*v, j.where(key), 0, kMaxConfigInt))};
    std::vector<int> ids;
    for (const Json& id : *v) ids.push_back(int(json_integer(id, j.where(key), 0, kMaxConfigInt)));
    return ids;
}

// bos: an id, or absent (-1). A list keeps its first: bos_id is only checked
// against the vocabulary, nothing prepends it.
int token_id(const JsonObject& j, const char* key) {
    const std::vector<int> ids = token_ids(j, key);
    return ids.empty() ? -1 : ids[0];
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

// Keys of config.json that change the math but that the kit does not
// implement, each with the value under which the math is what the kit
// computes. Another value is refused, naming the key (exit 2): a config
// is run as written or not at all. The keys the kit implements are read by
// read_gpt2, read_llama and read_rope_scaling below; this table and those
// functions are the whole list (docs/families.md).
struct Unimplemented {
    const char* model_types;  // the model_types the key belongs to
    const char* key;
    Json harmless;            // absent, null or this value: nothing to do
    const char* what;         // what the key would ask for
};

const std::vector<Unimplemented>& unimplemented_keys() {
    static const std::vector<Unimplemented> keys = {
        {"llama mistral qwen2", "hidden_act", "silu", "an MLP activation other than SiLU"},
        {"llama mistral qwen2", "partial_rotary_factor", 1.0, "rotary embeddings on part of each head"},
        {"llama mistral", "attention_bias", false, "biases on the attention projections"},
        {"llama", "mlp_bias", false, "biases on the MLP projections"},
        {"qwen2", "use_sliding_window", false, "Qwen2's per-layer sliding window (max_window_layers)"},
        {"gpt2", "scale_attn_weights", true, "attention scores without the 1/sqrt(head_dim) scale"},
        {"gpt2", "scale_attn_by_inverse_layer_idx", false, "attention scores scaled by 1/(layer+1)"},
        {"llama mistral qwen2 gpt2", "attn_logit_softcapping", nullptr, "soft-capped attention scores"},
        {"llama mistral qwen2 gpt2", "final_logit_softcapping", nullptr, "soft-capped logits"},
    };
    return keys;
}

void refuse_unimplemented(const JsonObject& j, const std::string& type) {
    for (const Unimplemented& u : unimplemented_keys()) {
        const Json* v = j.find(u.key);
        std::string types = std::string(" ") + u.model_types + " ";
        if (!v || types.find(" " + type + " ") == std::string::npos || *v == u.harmless) continue;
        fail("{}: {} asks for {}, which the kit does not implement (it runs {} with {} = {} only), so this "
             "checkpoint's logits would be wrong", j.origin(), u.key, u.what, type, u.key,
             u.harmless.is_null() ? "null" : u.harmless.dump());
    }
}

// The keys read_gpt2 and read_llama read, for each model_type (and
// parse_hf_config's own: model_type, bos/eos).
const std::vector<std::string_view>& read_keys(const std::string& type) {
    static const std::vector<std::string_view> gpt2 = {
        "n_embd", "n_layer", "n_head", "n_inner", "vocab_size", "n_positions", "n_ctx", "layer_norm_epsilon",
        "activation_function"};
    static const std::vector<std::string_view> llama = {
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
        "tie_word_embeddings", "rope_scaling", "sliding_window"};
    return type == "gpt2" ? gpt2 : llama;
}

// Keys that name, document or train a checkpoint, or tune memory and speed,
// and leave the logits of a forward pass as they are.
bool bookkeeping_key(std::string_view key) {
    static const std::vector<std::string_view> keys = {
        "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "architectures", "torch_dtype", "dtype",
        "transformers_version", "_name_or_path", "use_cache", "initializer_range", "attention_dropout",
        "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
        "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "task_specific_params",
        "id2label", "label2id", "tokenizer_class", "pretraining_tp", "max_window_layers",
        "reorder_and_upcast_attn", "n_special", "predict_special_tokens", "output_attentions",
        "output_hidden_states", "return_dict", "is_decoder", "is_encoder_decoder", "tie_encoder_decoder",
        "chunk_size_feed_forward", "problem_type"};
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// rope_scaling: absent, null, "default" (none) or Llama 3's; any other rope_type is refused by name.
RopeScaling read_rope_scaling(const JsonObject& j) {
    RopeScaling r;
    if (!j.find("rope_scaling")) return r;
    JsonObject s = j.object("rope_scaling");
    std::string type = s.string_or("rope_type", s.string_or("type", "default"));
    if (type == "default") return r;
    if (type != "llama3")
        fail("{}: rope_scaling.rope_type {} is not supported; the kit implements \"llama3\" (Llama 3.1/3.2) "
             "and plain rotary embeddings, so this checkpoint's logits would be wrong", j.origin(),
             clipped_quote(type));
    r.llama3 = true;
    r.factor = float(s.number_or("factor", 0.0, 0.0, 1e6));
    r.low_freq_factor = float(s.number_or("low_freq_factor", 1.0, 0.0, 1e6));
    r.high_freq_factor = float(s.number_or("high_freq_factor", 4.0, 0.0, 1e6));
    r.original_max_positions = int(s.integer("original_max_position_embeddings", 1, kMaxConfigInt));
    if (!(r.factor >= 1.0f))
        fail("{}: rope_scaling.factor must be at least 1, got {}", j.origin(), r.factor);
    if (!(r.low_freq_factor > 0.0f && r.high_freq_factor > r.low_freq_factor))
        fail("{}: rope_scaling needs 0 < low_freq_factor < high_freq_factor, got {} and {}", j.origin(),
             r.low_freq_factor, r.high_freq_factor);
    return r;
}

// Mistral's sliding_window (null: none). Qwen2 states one it does not use
// unless use_sliding_window is true, which refuse_unimplemented refuses.
int read_sliding_window(const JsonObject& j, const std::string& type) {
    if (type != "mistral" || !j.find("sliding_window")) return 0;
    long long w = j.integer("sliding_window", -kMaxConfigInt, kMaxConfigInt);
    if (w <= 0)
        fail("{}: sliding_window must be a positive number of positions (or null for none), got {}", j.origin(), w);
    return int(w);
}

// The llama skeleton and its relatives: mistral (a sliding window) and qwen2
// (q/k/v biases, always).
void read_llama(const JsonObject& j, Config& c, const std::string& type) {
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
    c.rope_scaling = read_rope_scaling(j);
    c.sliding_window = read_sliding_window(j, type);
    c.qkv_bias = type == "qwen2";
}

}  // namespace

Config parse_hf_config(std::string_view text, const std::string& origin) {
    Json root = parse_json(text, origin);
    JsonObject j(root, origin);
    std::string type = j.string_or("model_type", "");
    Config c;
    if (type == "gpt2") {
        read_gpt2(j, c);
    } else if (type == "llama" || type == "mistral" || type == "qwen2") {
        read_llama(j, c, type);
    } else {
        fail("{}: model_type {} is not supported; the kit runs \"gpt2\", \"llama\", \"mistral\" and \"qwen2\" "
             "checkpoints", origin, clipped_quote(type));
    }
    refuse_unimplemented(j, type);
    c.model_type = type;
    c.bos_id = token_id(j, "bos_token_id");
    c.eos_ids = token_ids(j, "eos_token_id");
    validate(c, origin);
    return c;
}

std::vector<std::string> unknown_config_keys(std::string_view text, const std::string& origin) {
    Json root = parse_json(text, origin);
    JsonObject j(root, origin);
    const std::string type = j.string_or("model_type", "");
    const std::vector<std::string_view>& read = read_keys(type);
    std::vector<std::string> unknown;
    for (const auto& item : j.json().items()) {
        // Not a structured binding: clang before 16 (the fuzz build on Debian 12)
        // cannot capture one in the lambda below.
        const std::string& key = item.key();
        const bool refused_when_it_matters =
            std::any_of(unimplemented_keys().begin(), unimplemented_keys().end(),
                        [&](const Unimplemented& u) { return key == u.key; });
        if (std::find(read.begin(), read.end(), key) == read.end() && !refused_when_it_matters &&
            !bookkeeping_key(key))
            unknown.push_back(key);
    }
    return unknown;
}

namespace {

// generation_config.json's eos_token_id replaces config.json's where that file
// gives one, as transformers' generate() does (absent or null: config.json's
// stand). Llama 3.x lists its end-of-turn ids there. The file's other keys are
// not applied but named (io/generation_config.hpp).
void apply_generation_eos(const std::filesystem::path& folder, Config& c) {
    const std::filesystem::path path = folder / "generation_config.json";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return;
    const Json root = parse_json(read_regular_file(path, kMaxJsonFileBytes, ""), path.string());
    const JsonObject j(root, path.string());
    if (!j.find("eos_token_id")) return;
    c.eos_ids = token_ids(j, "eos_token_id");
    validate(c, path.string());
}

}  // namespace

Config load_hf_config(const std::filesystem::path& path) {
    std::string text = read_regular_file(path, kMaxJsonFileBytes, "; a Hugging Face model folder needs a config.json");
    Config c = parse_hf_config(text, path.string());
    c.name = path.parent_path().string();
    apply_generation_eos(path.parent_path(), c);
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
           "window (a sliding window of that many positions, as Mistral's), seed.";
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
        else if (key == "window") c.sliding_window = int(v);
        else if (key == "seed") seed = static_cast<unsigned long long>(v);
        else fail("synthetic:{}: unknown key \"{}\". {}", spec, key, synthetic_presets_help());
    }
    if (!head_dim_given && c.n_heads > 0) c.head_dim = c.dim / c.n_heads;
    if (c.family == Family::gpt2) c.n_kv_heads = c.n_heads, c.tied_head = true;
    if (c.family == Family::gpt2 && c.sliding_window != 0)
        fail("synthetic:{}: window is for the llama family (GPT-2 has no sliding window)", spec);
    c.model_type = c.sliding_window > 0 ? "mistral" : family_name(c.family);
    c.name = "synthetic:" + spec;
    validate(c, c.name);
    return c;
}

}  // namespace pd
