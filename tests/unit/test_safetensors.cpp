// engine.safetensors and engine.config: reading checkpoints and configs, and
// refusing broken ones with a message that says what is wrong.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "check.hpp"
#include "common.hpp"
#include "io/config.hpp"
#include "io/generation_config.hpp"
#include "io/json_checked.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"

using namespace pd;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("pdlab_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

// A safetensors file with the given header JSON and `data_bytes` bytes of data.
void write_st(const fs::path& file, const std::string& header, std::size_t data_bytes,
              std::uint64_t claimed_len = 0) {
    std::ofstream out(file, std::ios::binary);
    std::uint64_t n = claimed_len ? claimed_len : header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header;
    for (std::size_t i = 0; i < data_bytes; i++) out.put(char(i));
}

}  // namespace

TEST_CASE("engine.safetensors.reads_f32_f16_bf16") {
    fs::path d = temp_dir("ok");
    // 2 floats: 1.5, -2 ; 2 halves: 1.0 (0x3c00), -0.5 (0xb800); 2 bf16: 3.0 (0x4040), 0.25 (0x3e80)
    std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]},)"
                         R"("c":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},"__metadata__":{"format":"pt"}})";
    {
        std::ofstream out(d / "model.safetensors", std::ios::binary);
        std::uint64_t n = header.size();
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << header;
        float f[2] = {1.5f, -2.0f};
        std::uint16_t h[2] = {0x3c00, 0xb800}, b[2] = {0x4040, 0x3e80};
        out.write(reinterpret_cast<const char*>(f), 8);
        out.write(reinterpret_cast<const char*>(h), 4);
        out.write(reinterpret_cast<const char*>(b), 4);
    }
    Checkpoint ck = Checkpoint::open(d);
    REQUIRE(ck.find("a"));
    REQUIRE(ck.find("b"));
    CHECK(ck.find("b")->shape_str() == "[1, 2]");
    CHECK(ck.find("__metadata__") == nullptr);
    float out[2];
    convert_to_f32(*ck.find("a"), out);
    CHECK(out[0] == 1.5f);
    CHECK(out[1] == -2.0f);
    convert_to_f32(*ck.find("b"), out);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == -0.5f);
    convert_to_f32(*ck.find("c"), out);
    CHECK(out[0] == 3.0f);
    CHECK(out[1] == 0.25f);
    fs::remove_all(d);
}

TEST_CASE("engine.safetensors.refuses_broken_files") {
    fs::path d = temp_dir("bad");
    auto expect = [&](const std::string& what) {
        CHECK_THROWS_WITH_AS(Checkpoint::open(d), doctest::Contains(what.c_str()), UserError);
    };
    expect("has no model.safetensors");
    write_st(d / "model.safetensors", "", 0);
    std::ofstream(d / "model.safetensors", std::ios::binary) << "abc";  // shorter than 8 bytes
    expect("truncated");
    write_st(d / "model.safetensors", "{}", 0, 1000);  // header length past the end
    expect("truncated or corrupt");
    write_st(d / "model.safetensors", "{not json", 0);
    expect("not valid JSON");
    write_st(d / "model.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
    expect("past the end");
    write_st(d / "model.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16);
    expect("should take 12 bytes");
    // the ranges must tile the data: no overlap, no hole, no bytes left over
    write_st(d / "model.safetensors",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
    expect(R"(tensors "a" and "b" overlap)");
    write_st(d / "model.safetensors",
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12);
    expect(R"(bytes [4, 8) of the data belong to no tensor (a hole between tensor "a" and tensor "b"))");
    write_st(d / "model.safetensors", R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
    expect(R"(bytes [0, 4) of the data belong to no tensor (a hole before tensor "b"))");
    write_st(d / "model.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8);
    expect(R"(the last 4 bytes of the data belong to no tensor (after tensor "a"))");
    write_st(d / "model.safetensors", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
    CHECK(Checkpoint::open(d).tensors().size() == 3);  // an empty tensor between two others is fine
    write_st(d / "model.safetensors", R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4);
    Checkpoint ck = Checkpoint::open(d);  // readable, but not convertible
    float out[4];
    CHECK_THROWS_WITH_AS(convert_to_f32(*ck.find("w"), out), doctest::Contains("dtype I8"), UserError);
    fs::remove_all(d);
}

TEST_CASE("engine.config.hf_llama_and_gpt2") {
    fs::path d = temp_dir("cfg");
    std::ofstream(d / "config.json") << R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":16,
        "max_position_embeddings":128,"rms_norm_eps":1e-6,"rope_theta":500000.0,"vocab_size":300,
        "tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":[2,3]})";
    Config c = load_hf_config(d / "config.json");
    CHECK(c.family == Family::llama);
    CHECK(c.head_dim == 16);
    CHECK(c.q_dim() == 128);
    CHECK(c.kv_dim() == 32);
    CHECK(c.group_size() == 4);
    CHECK(c.eos_ids == std::vector<int>{2, 3});  // every id of the list, not the first
    CHECK(c.rope_theta == 500000.0f);
    std::ofstream(d / "config.json") << R"({"model_type":"gpt2","n_embd":48,"n_layer":2,"n_head":4,
        "n_positions":32,"vocab_size":100,"layer_norm_epsilon":1e-5})";
    c = load_hf_config(d / "config.json");
    CHECK(c.family == Family::gpt2);
    CHECK(c.hidden_dim == 192);
    CHECK(c.head_dim == 12);
    CHECK(c.kv_elems_per_token() == 2u * 2 * 4 * 12);
    std::ofstream(d / "config.json") << R"({"model_type":"bert"})";
    CHECK_THROWS_WITH_AS(load_hf_config(d / "config.json"), doctest::Contains("not supported"), UserError);
    std::ofstream(d / "config.json") << R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":4,"vocab_size":300})";
    CHECK_THROWS_WITH_AS(load_hf_config(d / "config.json"), doctest::Contains("multiple of"), UserError);
    fs::remove_all(d);
}

// Keys the kit does not know are named (pdlab info lists them); the ones it
// reads, refuses when they matter, or knows as bookkeeping are not (issue 36).
TEST_CASE("engine.config.unknown_keys_named") {
    const std::string text = R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":300,"torch_dtype":"bfloat16",
        "hidden_act":"silu","architectures":["LlamaForCausalLM"],"qk_norm":true,"logit_scale":0.5})";
    CHECK(unknown_config_keys(text, "config.json") == std::vector<std::string>{"logit_scale", "qk_norm"});
    // The same key is read for one skeleton and unknown to the other.
    CHECK(unknown_config_keys(R"({"model_type":"gpt2","n_embd":48,"hidden_size":48})", "config.json") ==
          std::vector<std::string>{"hidden_size"});
}

// generation_config.json's decoding keys are not applied; every one that
// changes the tokens is named. Its eos_token_id is applied (below), so never named.
TEST_CASE("engine.config.generation_config_named") {
    fs::path d = temp_dir("gen");
    CHECK(generation_keys_not_applied(d).empty());  // no file
    std::ofstream(d / "generation_config.json") << R"({"transformers_version":"4.44","eos_token_id":[2,7],
        "pad_token_id":0,"do_sample":true,"temperature":0.6,"top_p":0.9})";
    std::vector<GenerationKey> keys = generation_keys_not_applied(d);
    REQUIRE(keys.size() == 3);
    CHECK(keys[0].key == "do_sample");
    CHECK(keys[1].key == "temperature");
    CHECK(keys[1].value == "0.6");
    CHECK(keys[2].key == "top_p");
    const std::string line = describe_not_applied(keys);
    CHECK(line.find("temperature 0.6") != std::string::npos);
    CHECK(line.find("not applied") != std::string::npos);
    std::ofstream(d / "generation_config.json") << "[1,2]";
    CHECK_THROWS_AS(generation_keys_not_applied(d), UserError);
    fs::remove_all(d);
}

// The end-of-sequence ids: config.json's (an id or a list), replaced by
// generation_config.json's where it gives them, as transformers does.
TEST_CASE("engine.config.eos_ids_from_generation_config") {
    fs::path d = temp_dir("eos");
    const std::string config = R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":300,"eos_token_id":)";
    auto eos_with = [&](const std::string& config_eos, const std::string& generation) {
        std::ofstream(d / "config.json") << config << config_eos << "}";
        if (generation.empty()) fs::remove(d / "generation_config.json");
        else std::ofstream(d / "generation_config.json") << generation;
        return load_hf_config(d / "config.json").eos_ids;
    };
    using Ids = std::vector<int>;
    CHECK(eos_with("[5,6,7]", "") == Ids{5, 6, 7});
    CHECK(eos_with("5", "") == Ids{5});
    CHECK(eos_with("null", "") == Ids{});
    // Llama 3.1: config.json and generation_config.json both list three; 3.0 Instruct one and three.
    CHECK(eos_with("5", R"({"eos_token_id":[5,8,9]})") == Ids{5, 8, 9});
    CHECK(eos_with("[5,6]", R"({"eos_token_id":9})") == Ids{9});
    CHECK(eos_with("null", R"({"eos_token_id":[8,9]})") == Ids{8, 9});
    // Absent or null there: config.json's stand. An empty list: none.
    CHECK(eos_with("[5,6]", R"({"temperature":0.6})") == Ids{5, 6});
    CHECK(eos_with("[5,6]", R"({"eos_token_id":null})") == Ids{5, 6});
    CHECK(eos_with("[5,6]", R"({"eos_token_id":[]})") == Ids{});
    // Bad ids are refused naming the file and the key.
    CHECK_THROWS_WITH_AS(eos_with("[5,6]", R"({"eos_token_id":[5,300]})"),
                         doctest::Contains("generation_config.json: eos_token_id 300 is outside the vocabulary"),
                         UserError);
    CHECK_THROWS_WITH_AS(eos_with("[5,6]", R"({"eos_token_id":["5"]})"),
                         doctest::Contains("generation_config.json: eos_token_id"), UserError);
    CHECK_THROWS_WITH_AS(eos_with("[5,\"x\"]", ""), doctest::Contains("config.json: eos_token_id"), UserError);
    CHECK_THROWS_WITH_AS(eos_with("[5,900]", ""), doctest::Contains("eos_token_id 900 is outside"), UserError);
    fs::remove_all(d);
}

// A small llama config.json with `extra` spliced in last (a later key wins in
// nlohmann's parser, so `extra` overrides a field).
std::string llama_config(const std::string& extra) {
    return R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
        "num_attention_heads":4,"vocab_size":300)" + extra + "}";
}

TEST_CASE("engine.config.refuses_wrong_types_and_narrowing") {
    auto expect = [](const std::string& extra, const char* what) {
        INFO("config extra: " << extra);
        CHECK_THROWS_WITH_AS(parse_hf_config(llama_config(extra), "cfg.json"), doctest::Contains(what), UserError);
    };
    CHECK(parse_hf_config(llama_config(""), "cfg.json").dim == 64);  // the base is valid
    // 2^32 + 256 would be 256 after a cast to 32 bits; 2.5 would be 2.
    expect(R"(,"hidden_size":4294967552)", "cfg.json: hidden_size must be an integer in 0..16777216");
    expect(R"(,"num_key_value_heads":2.5)", "num_key_value_heads must be an integer");
    expect(R"(,"model_type":5)", "model_type must be a string, got the number 5");
    expect(R"(,"vocab_size":"300")", "vocab_size must be an integer in 0..16777216, got a string");
    expect(R"(,"tie_word_embeddings":"yes")", "tie_word_embeddings must be true or false");
    expect(R"(,"eos_token_id":{"id":2})", "eos_token_id must be an integer");
    expect(R"(,"rms_norm_eps":-1)", "rms_norm_eps must be a number in 0");
    // A whole number written as a float is that integer.
    CHECK(parse_hf_config(llama_config(R"(,"hidden_size":64.0)"), "cfg.json").dim == 64);
}

TEST_CASE("engine.safetensors.json_depth_limit_and_no_echo") {
    auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    CHECK_NOTHROW(parse_json(nested(kMaxJsonDepth), "f.json"));
    CHECK_THROWS_WITH_AS(parse_json(nested(kMaxJsonDepth + 1), "f.json"), doctest::Contains("nested deeper"),
                         UserError);
    CHECK_THROWS_WITH_AS(parse_json(nested(1000000), "f.json"), doctest::Contains("nested deeper"), UserError);
    // The message names the type of a wrong value, never its content.
    std::string secret(100000, 'x');
    try {
        parse_hf_config(llama_config(R"(,"hidden_size":")" + secret + R"(")"), "cfg.json");
        FAIL("a string hidden_size was accepted");
    } catch (const UserError& e) {
        CHECK_MESSAGE(std::string(e.what()).find("xxxx") == std::string::npos, "message echoes the value: ",
                      std::string(e.what()).substr(0, 200));
    }
    CHECK(clipped_quote(secret, 4) == "\"xxxx\"...");
}

TEST_CASE("engine.safetensors.refuses_fifo_folder_and_escaping_shards") {
    fs::path d = temp_dir("hostile");
    REQUIRE(::mkfifo((d / "model.safetensors").c_str(), 0600) == 0);
    // Opened without O_NONBLOCK, a FIFO with no writer would block here forever.
    CHECK_THROWS_WITH_AS(Checkpoint::open(d), doctest::Contains("FIFO"), UserError);
    fs::remove(d / "model.safetensors");
    fs::create_directory(d / "model.safetensors");
    CHECK_THROWS_WITH_AS(Checkpoint::open(d), doctest::Contains("is a folder"), UserError);
    fs::remove(d / "model.safetensors");
    // A valid shard, but outside the folder: refused by name and through a symlink.
    fs::path other = temp_dir("hostile_outside");
    write_st(other / "x.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
    auto index_naming = [&](const std::string& shard) {
        std::ofstream(d / "model.safetensors.index.json") << R"({"weight_map":{"w":)" << pd::Json(shard).dump() << "}}";
    };
    for (const std::string& shard : {"../" + other.filename().string() + "/x.safetensors",
                                     (other / "x.safetensors").string()}) {
        index_naming(shard);
        CHECK_THROWS_WITH_AS(Checkpoint::open(d), doctest::Contains("not a file name inside"), UserError);
    }
    fs::create_symlink(other / "x.safetensors", d / "link.safetensors");
    index_naming("link.safetensors");
    CHECK_THROWS_WITH_AS(Checkpoint::open(d), doctest::Contains("leads outside the model folder"), UserError);
    fs::copy_file(other / "x.safetensors", d / "inside.safetensors");
    index_naming("inside.safetensors");
    CHECK(Checkpoint::open(d).find("w") != nullptr);  // the same shard inside is read
    fs::remove_all(d);
    fs::remove_all(other);
}

TEST_CASE("engine.config.synthetic_presets") {
    unsigned long long seed = 0;
    Config c = synthetic_config("bench-llama-125m", seed);
    CHECK(c.dim == 768);
    CHECK(c.n_layers == 12);
    CHECK(c.n_heads == 12);
    CHECK(c.n_kv_heads == 4);
    CHECK(c.head_dim == 64);
    CHECK(c.hidden_dim == 2048);
    CHECK(c.vocab_size == 32000);
    CHECK(c.max_seq_len == 1024);
    CHECK_FALSE(c.tied_head);
    c = synthetic_config("mha-h8-d64", seed);
    CHECK(c.n_kv_heads == 8);
    CHECK(c.head_dim == 64);
    c = synthetic_config("llama,dim=128,heads=4,kv_heads=2,seed=9", seed);
    CHECK(c.head_dim == 32);
    CHECK(seed == 9);
    CHECK_THROWS_WITH_AS(synthetic_config("nope", seed), doctest::Contains("unknown synthetic preset"), UserError);
    CHECK_THROWS_WITH_AS(synthetic_config("llama,colour=3", seed), doctest::Contains("unknown key"), UserError);
    CHECK_THROWS_WITH_AS(synthetic_config("llama,dim=abc", seed), doctest::Contains("must be a number"), UserError);
}

TEST_CASE("engine.safetensors.npy_header") {
    fs::path d = temp_dir("npy");
    float v[6] = {1, 2, 3, 4, 5, 6};
    write_npy(d / "a.npy", v, {2, 3});
    std::ifstream in(d / "a.npy", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    CHECK(all.substr(1, 5) == "NUMPY");
    std::uint16_t hl;
    std::memcpy(&hl, all.data() + 8, 2);
    CHECK((10 + hl) % 64 == 0);
    CHECK(all.find("'shape': (2, 3)") != std::string::npos);
    CHECK(all.size() == 10 + hl + 24u);
    fs::remove_all(d);
}
