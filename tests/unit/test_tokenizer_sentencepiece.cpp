// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama) and the normalizers,
// on a small tokenizer.json built here. Ids: <unk> 0, <s> 1, </s> 2, <0xNN>
// 3 + NN, then ▁ 259, h 260, e 261, l 262, o 263, x 269 and the merges
//    0 ▁ h -> ▁h 264    2 ▁h el -> ▁hel 266    4 ▁hel lo -> ▁hello 268
//    1 e l -> el 265    3 l o -> lo 267
// Every expected id below was worked out by hand from these ranks; the real
// files are checked against transformers.js in tests/tokenizers/.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "common.hpp"
#include "io/normalizer.hpp"
#include "io/tokenizer.hpp"

namespace {

using pd::StreamDecoder;
using pd::Tokenizer;
using json = nlohmann::json;
using Ids = std::vector<int>;

const json kReplaceDecoder = {
    {"type", "Sequence"},
    {"decoders",
     {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
      {{"type", "ByteFallback"}},
      {{"type", "Fuse"}},
      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};

// Llama 2's layout: the Prepend and Replace normalizers, no pre-tokenizer.
json llama2_style() {
    json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
    int id = 259;
    for (const char* key : {"\u2581", "h", "e", "l", "o", "\u2581h", "el", "\u2581hel", "lo", "\u2581hello", "x"})
        vocab[key] = id++;
    json added = json::array();
    for (int i = 0; i < 3; ++i)
        added.push_back({{"id", i}, {"content", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>"}, {"single_word", false},
                         {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
    return {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer",
             {{"type", "Sequence"},
              {"normalizers",
               {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
            {"pre_tokenizer", nullptr},
            {"post_processor", nullptr},
            {"decoder", kReplaceDecoder},
            {"model",
             {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true}, {"vocab", vocab},
              {"merges", {"\u2581 h", "e l", "\u2581h el", "l o", "\u2581hel lo"}}}}};
}

// Mistral v0.3's layout: no normalizer, the Metaspace pre-tokenizer.
json metaspace_style(const std::string& scheme) {
    json j = llama2_style();
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", false}};
    return j;
}

Tokenizer load(const json& j) { return Tokenizer::from_json_text(j.dump(), "test.json"); }

std::string spm_load_error(const json& j) { return pd::test::user_error_of([&] { load(j); }); }

std::vector<std::string> stream(const Tokenizer& tok, const Ids& ids) {
    StreamDecoder d(tok);
    std::vector<std::string> out;
    for (int id : ids) out.push_back(d.push(id));
    out.push_back(d.flush());
    return out;
}

}  // namespace

TEST_CASE("engine.tokenizer.sentencepiece_llama2_style") {
    Tokenizer tok = load(llama2_style());
    CHECK(tok.kind() == "SentencePiece-style BPE (5 merges)");
    CHECK(tok.encode("hello") == Ids{268});
    // é is not in the vocabulary: its two UTF-8 bytes fall back to <0xC3> <0xA9>.
    CHECK(tok.encode("hello \u00e9") == Ids{268, 259, 3 + 0xC3, 3 + 0xA9});
    CHECK(tok.decode(Ids{268, 259, 3 + 0xC3, 3 + 0xA9}) == "hello \u00e9");
    // Prepend applies to each stretch of text between added tokens, and the
    // Strip decoder only to the start of the whole text.
    CHECK(tok.encode("<s>hello") == Ids{1, 268});
    CHECK(tok.decode(Ids{1, 268}) == "<s> hello");
    CHECK(tok.encode("") == Ids{});
    CHECK(tok.encode("  hello") == Ids{259, 259, 268});
    CHECK(tok.decode(Ids{259, 259, 268}) == "  hello");
    CHECK(tok.token_id("\u2581hello") == 268);
    // Streamed piece by piece: the leading space goes, a split é waits for its end.
    CHECK(stream(tok, {268, 259, 3 + 0xC3, 3 + 0xA9}) == std::vector<std::string>{"hello", " ", "", "\u00e9", ""});
    CHECK(stream(tok, {259, 268}) == std::vector<std::string>{"", " hello", ""});
}

TEST_CASE("engine.tokenizer.sentencepiece_unk") {
    json j = llama2_style();
    j["model"]["byte_fallback"] = false;
    CHECK(load(j).encode("qq") == Ids{259, 0});  // fuse_unk: one <unk> for the run
    j["model"]["fuse_unk"] = false;
    CHECK(load(j).encode("qq") == Ids{259, 0, 0});
    j["model"]["unk_token"] = nullptr;
    CHECK_THROWS_AS(load(j).encode("q"), pd::UserError);
}

TEST_CASE("engine.tokenizer.metaspace") {
    Tokenizer first = load(metaspace_style("first"));
    CHECK(first.encode("hello") == Ids{268});
    CHECK(first.encode("<s>hello") == Ids{1, 260, 265, 267});  // not at the start: no ▁
    CHECK(first.encode("hello hello") == Ids{268, 268});
    CHECK(load(metaspace_style("always")).encode("<s>hello") == Ids{1, 268});
    CHECK(load(metaspace_style("never")).encode("hello") == Ids{260, 265, 267});
    json split = metaspace_style("first");
    split["pre_tokenizer"]["split"] = true;
    CHECK(load(split).encode("hello hello") == Ids{268, 268});

    // The Metaspace decoder: the first token loses its ▁, the others turn it into a space.
    json j = metaspace_style("first");
    j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
    Tokenizer tok = load(j);
    CHECK(tok.decode(Ids{268, 268}) == "hello hello");
    CHECK(tok.decode(Ids{259, 268}) == " hello");
    CHECK(stream(tok, {268, 268}) == std::vector<std::string>{"hello", " hello", ""});
}

TEST_CASE("engine.tokenizer.sentencepiece_refusals") {
    auto contains = [](const std::string& msg, const std::string& part) {
        CAPTURE(msg);
        CHECK(msg.find(part) != std::string::npos);
    };
    json j = llama2_style();
    j["decoder"]["decoders"][3]["stop"] = 1;
    contains(spm_load_error(j), "decoder Strip is supported only after Fuse");
    j = llama2_style();
    j["decoder"]["decoders"].push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "b"}});
    contains(spm_load_error(j), "decoder \"Replace\" after Fuse");
    j = llama2_style();
    j["decoder"] = {{"type", "ByteLevel"}};
    contains(spm_load_error(j), "the decoder is ByteLevel but the pre-tokenizer is not");
    j = llama2_style();
    j["decoder"] = nullptr;
    contains(spm_load_error(j), "without a decoder");
    j = metaspace_style("sometimes");
    contains(spm_load_error(j), "prepend_scheme \"sometimes\"");
    j = llama2_style();
    j["normalizer"]["normalizers"].push_back({{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}});
    contains(spm_load_error(j), "normalizer \"Precompiled\" is not supported");
}

TEST_CASE("engine.tokenizer.normalizers") {
    using Kind = pd::tok::NormalizerStep::Kind;
    auto run = [](pd::tok::NormalizerStep step, std::string text) {
        std::vector<pd::tok::NormalizerStep> steps;
        steps.push_back(std::move(step));
        pd::tok::MatchData md = pd::tok::new_match_data();
        pd::tok::normalize(steps, text, md);
        return text;
    };
    auto of = [](Kind k) {
        pd::tok::NormalizerStep s{};
        s.kind = k;
        return s;
    };
    CHECK(run(of(Kind::nfc), "e\u0301t\u00e9") == "\u00e9t\u00e9");
    CHECK(run(of(Kind::nfd), "\u00e9") == "e\u0301");
    CHECK(run(of(Kind::nfkc), "\ufb01 \u2460") == "fi 1");
    CHECK(run(of(Kind::nfkd), "\ufb01\u00e9") == "fie\u0301");
    // Bytes that are not UTF-8 stay; the text around them is normalized.
    CHECK(run(of(Kind::nfc), "\xff" "e\u0301") == "\xff\u00e9");
    CHECK(run(of(Kind::lowercase), "\u00c0B\u0130\u03a3") == "\u00e0bi\u0307\u03c3");
    pd::tok::NormalizerStep strip = of(Kind::strip);
    strip.strip_left = true;
    CHECK(run(strip, "\u3000 a b \t") == "a b \t");
    strip.strip_right = true;
    CHECK(run(strip, "\u3000 a b \t") == "a b");
    pd::tok::NormalizerStep replace = of(Kind::replace);
    replace.pattern.emplace(" +", "test");
    replace.content = "_";
    CHECK(run(std::move(replace), "a  b c") == "a_b_c");
    pd::tok::NormalizerStep prepend = of(Kind::prepend);
    prepend.content = "\u2581";
    CHECK(run(prepend, "") == "");
    CHECK(run(prepend, "a") == "\u2581a");

    // In a tokenizer: Qwen's NFC makes e + U+0301 the one character é.
    json j = llama2_style();
    j["normalizer"]["normalizers"].push_back({{"type", "NFC"}});
    CHECK(load(j).encode("e\u0301") == Ids{259, 3 + 0xC3, 3 + 0xA9});
}
