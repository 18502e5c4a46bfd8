// Tokenizer tests on hand-built fixtures in tests/data/tokenizers/. In both
// fixtures the 256 byte tokens have id == byte value, so the id of an unmerged
// byte is the byte itself; merged tokens have the ids listed below, and every
// expected id was worked out by hand from the merge ranks.
//
// gpt2_tiny.json (GPT-2 regex, merges as "a b" strings), rank: merge -> id
//    0 Ġ t -> Ġt 256     4 e l -> el 260       8 o r -> or 264         12 Ċ Ċ -> ĊĊ 268
//    1 h e -> he 257     5 ll o -> llo 261     9 Ġw or -> Ġwor 265     13 Ġ Ġ -> ĠĠ 269
//    2 Ġt he -> Ġthe 258 6 he llo -> hello 262 10 l d -> ld 266        14 1 2 -> 12 270
//    3 l l -> ll 259     7 Ġ w -> Ġw 263       11 Ġwor ld -> Ġworld 267 15 ¥ æ -> ¥æ 271
//   added token <|endoftext|> 272.  (Ġ is a space, Ċ a newline, ¥æ the bytes A5 E6.)
//
// llama3_style.json (Split with Llama 3's regex + ByteLevel, ["a","b"] merges,
// ignore_merges: true), rank: merge -> id
//    0 h e -> he 256   2 1 2 -> 12 258   4 3 4 -> 34 260   6 Ġ w -> Ġw 262
//    1 l l -> ll 257   3 4 5 -> 45 259   5 ' T -> 'T 261
//   vocabulary only (no merge builds them): hello 263, Ġworld 264;
//   added tokens <|begin_of_text|> 300, <|eot_id|> 301; ids 265..299 unused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "io/tokenizer.hpp"

#ifndef PDLAB_SOURCE_ROOT
#define PDLAB_SOURCE_ROOT "/work/main"
#endif

namespace {

using pd::StreamDecoder;
using pd::Tokenizer;
using json = nlohmann::json;
using Ids = std::vector<int>;

std::filesystem::path fixture(const std::string& name) {
    return std::filesystem::path(PDLAB_SOURCE_ROOT) / "tests/data/tokenizers" / name;
}

json read_json(const std::string& name) {
    std::ifstream in(fixture(name));
    return json::parse(in);
}

// Loads `j` through a temporary file, for variants of the fixtures.
Tokenizer load_variant(const json& j) {
    static int counter = 0;
    auto path = std::filesystem::temp_directory_path() /
                ("pdlab_tokenizer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".json");
    std::ofstream(path) << j.dump();
    struct Remove {
        std::filesystem::path p;
        ~Remove() { std::filesystem::remove(p); }
    } remove{path};
    return Tokenizer::from_json(path);
}

// The message of the UserError that loading `j` throws ("" if none).
std::string load_error(const json& j) {
    try {
        load_variant(j);
    } catch (const pd::UserError& e) {
        return e.what();
    }
    return "";
}

const std::vector<std::string> kRoundTripTexts = {
    "",
    "hello world",
    "Hello, World! 123 + 4.56e-7 = ?",
    "héllo wörld 日本語 🙂",
    "  leading and trailing  ",
    "tabs\tand\nnewlines\r\n\n\nend\n",
    "a   b    c\u00a0d",
    "I'm sure they'll say WE'VE done it; don't",
    "x<|endoftext|>y<|endoftext|><|endoftext|>",
    "<|endoftext",
};

}  // namespace

TEST_CASE("engine.tokenizer.merges_by_rank") {
    Tokenizer tok = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    CHECK(tok.kind() == "byte-level BPE (16 merges)");
    CHECK(tok.vocab_size() == 273);

    // h e l l o: he (rank 1), ll (3), llo (5), hello (6); " world": Ġw (7),
    // or (8), Ġwor (9), ld (10), Ġworld (11).
    CHECK(tok.encode("hello world") == Ids{262, 267});
    // Ġt (0) is applied before he (1), then Ġthe (2).
    CHECK(tok.encode(" the") == Ids{258});
    CHECK(tok.encode("the") == Ids{'t', 257});
    // e l (rank 4) loses to l l (rank 3) although it is further left.
    CHECK(tok.encode("ell") == Ids{'e', 259});
    // y e l l o w: ll (3) first, then llo (5); e l never gets its chance.
    CHECK(tok.encode("yellow") == Ids{'y', 'e', 261, 'w'});
    // Equal ranks: the leftmost pair wins.
    CHECK(tok.encode("lll") == Ids{259, 'l'});
    // he (1) takes the e, so e l (4) has nothing left to merge.
    CHECK(tok.encode("helo") == Ids{257, 'l', 'o'});
    // GPT-2's regex keeps all digits in one piece: 12 (14) then no more merges.
    CHECK(tok.encode("12345") == Ids{270, '3', '4', '5'});
}

TEST_CASE("engine.tokenizer.gpt2_pre_tokenizer") {
    Tokenizer tok = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    // \s+(?!\S) leaves the last whitespace character for the next word, so two
    // newlines before a letter are two pieces (ĊĊ cannot merge) and three
    // newlines are "\n\n" + "\n".
    CHECK(tok.encode("a\n\nb") == Ids{'a', '\n', '\n', 'b'});
    CHECK(tok.encode("a\n\n\nb") == Ids{'a', 268, '\n', 'b'});
    // Three spaces before a letter: "  " (ĠĠ, 13) + " b" (no merge for Ġ b).
    CHECK(tok.encode("a   b") == Ids{'a', 269, ' ', 'b'});
    // Two spaces then a word: " " + " the".
    CHECK(tok.encode("  the") == Ids{' ', 258});
    // Contractions are pieces of their own: "I" "'m".
    CHECK(tok.encode("I'm") == Ids{'I', '\'', 'm'});
}

TEST_CASE("engine.tokenizer.split_sequence_and_ignore_merges") {
    Tokenizer tok = Tokenizer::from_json(fixture("llama3_style.json"));
    CHECK(tok.kind() == "byte-level BPE (7 merges)");
    CHECK(tok.vocab_size() == 302);
    // ignore_merges: a piece that is a vocabulary entry is emitted as is,
    // although no merge builds it.
    CHECK(tok.encode("hello") == Ids{263});
    CHECK(tok.encode(" world") == Ids{264});
    CHECK(tok.encode("hello world") == Ids{263, 264});
    // Pieces outside the vocabulary still go through the merges.
    CHECK(tok.encode("hellx") == Ids{256, 257, 'x'});
    CHECK(tok.encode(" wor") == Ids{262, 'o', 'r'});
    // \p{N}{1,3}: "1234" is "123" + "4" (GPT-2's regex would give 12 34).
    CHECK(tok.encode("1234") == Ids{258, '3', '4'});
    // (?i:'t) makes "'T" one piece, which is in the vocabulary.
    CHECK(tok.encode("DON'T") == Ids{'D', 'O', 'N', 261});
    // Unused ids below vocab_size decode to a placeholder.
    CHECK(tok.token_bytes(280) == "<|280|>");
}

TEST_CASE("engine.tokenizer.special_tokens") {
    Tokenizer gpt2 = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    CHECK(gpt2.encode("<|endoftext|>") == Ids{272});
    CHECK(gpt2.encode("hello<|endoftext|> world") == Ids{262, 272, 267});
    CHECK(gpt2.encode("a<|endoftext|><|endoftext|>b") == Ids{'a', 272, 272, 'b'});
    // Not the whole token: plain text ("<|" "endoftext" "|" pieces, no merges).
    CHECK(gpt2.encode("<|endoftext|") == Ids{'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|'});
    CHECK(gpt2.decode(Ids{272}) == "<|endoftext|>");
    CHECK(gpt2.token_bytes(272) == "<|endoftext|>");
    CHECK(gpt2.token_id("<|endoftext|>") == 272);
    CHECK(gpt2.token_id(" the") == 258);
    CHECK(gpt2.token_id("Ġthe") == -1);  // lookups use raw text, not the file's spelling
    CHECK(gpt2.token_id("absent") == -1);

    Tokenizer llama = Tokenizer::from_json(fixture("llama3_style.json"));
    CHECK(llama.encode("<|begin_of_text|>hello<|eot_id|>") == Ids{300, 263, 301});
    CHECK(llama.decode(Ids{300, 263, 301}) == "<|begin_of_text|>hello<|eot_id|>");
    CHECK(llama.token_id("<|eot_id|>") == 301);
}

TEST_CASE("engine.tokenizer.added_token_options") {
    json j = read_json("gpt2_tiny.json");
    json mask = {{"id", 273},       {"content", "<mask>"}, {"single_word", false}, {"lstrip", false},
                 {"rstrip", false}, {"normalized", true},  {"special", false}};
    j["added_tokens"].push_back(mask);
    CHECK(load_variant(j).encode("a <mask> b") == Ids{'a', ' ', 273, ' ', 'b'});

    // lstrip/rstrip: the token swallows the whitespace around it.
    j["added_tokens"][1]["lstrip"] = true;
    j["added_tokens"][1]["rstrip"] = true;
    Tokenizer strip = load_variant(j);
    CHECK(strip.encode("a <mask> b") == Ids{'a', 273, 'b'});
    CHECK(strip.encode("a\t\u3000<mask>") == Ids{'a', 273});  // any Unicode white space

    // single_word: only where no word character touches it. The first <mask>
    // follows 'x', so it stays text: "x" "<" "mask" ">" " " (GPT-2 regex).
    j["added_tokens"][1]["lstrip"] = false;
    j["added_tokens"][1]["rstrip"] = false;
    j["added_tokens"][1]["single_word"] = true;
    Tokenizer single = load_variant(j);
    CHECK(single.encode("x<mask> <mask>") == Ids{'x', '<', 'm', 'a', 's', 'k', '>', ' ', 273});
    // From HF's own tests: punctuation is not a word character, a combining
    // mark (U+0330) is. Plain text: "," " " and "-" " ◌̰<" "mask" ">".
    CHECK(single.encode("<mask>, <mask>- \u25cc\u0330<mask>") ==
          Ids{273, ',', ' ', 273, '-', ' ', 0xE2, 0x97, 0x8C, 0xCC, 0xB0, '<', 'm', 'a', 's', 'k', '>'});

    // All three options, also from HF's tests: the tab after the second
    // <mask> already belongs to it, so the third cannot strip it again.
    j["added_tokens"][1]["lstrip"] = true;
    j["added_tokens"][1]["rstrip"] = true;
    CHECK(load_variant(j).encode("Hi <mask> there\t<mask>\t<mask>\u2000") ==
          Ids{'H', 'i', 273, 't', 257, 'r', 'e', 273, 273});
}

TEST_CASE("engine.tokenizer.pre_tokenizer_variants") {
    json base = read_json("gpt2_tiny.json");

    SUBCASE("add_prefix_space adds a space to each segment that lacks one") {
        json j = base;
        j["pre_tokenizer"]["add_prefix_space"] = true;
        Tokenizer tok = load_variant(j);
        CHECK(tok.encode("the") == Ids{258});
        CHECK(tok.encode(" the") == Ids{258});
        CHECK(tok.encode("the<|endoftext|>the") == Ids{258, 272, 258});
        CHECK(tok.decode(tok.encode("the")) == " the");  // as in Hugging Face
    }
    SUBCASE("Digits before ByteLevel") {
        json j = base;
        json byte_level = j["pre_tokenizer"];
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
        CHECK(load_variant(j).encode("x12345") == Ids{'x', '1', '2', '3', '4', '5'});
        j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false;
        CHECK(load_variant(j).encode("x12345") == Ids{'x', 270, '3', '4', '5'});
    }
    SUBCASE("Split with a String pattern, behavior Removed") {
        json j = base;
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
        // "hello" "world": w o r l d -> or (8), ld (10); no merge joins w or ld.
        CHECK(load_variant(j).encode("hello world") == Ids{262, 'w', 264, 266});
    }
}

TEST_CASE("engine.tokenizer.unk_token") {
    json j = read_json("gpt2_tiny.json");
    // Take bytes C3 and A9 ('é' in UTF-8) out of the vocabulary.
    j["model"]["vocab"].erase("Ã");
    j["model"]["vocab"].erase("©");
    std::string msg;
    try {
        load_variant(j).encode("café");
    } catch (const pd::UserError& e) {
        msg = e.what();
    }
    CHECK(msg.find("0xC3") != std::string::npos);

    j["model"]["vocab"]["<unk>"] = 273;
    j["model"]["unk_token"] = "<unk>";
    CHECK(load_variant(j).encode("café") == Ids{'c', 'a', 'f', 273, 273});
    j["model"]["fuse_unk"] = true;
    CHECK(load_variant(j).encode("café") == Ids{'c', 'a', 'f', 273});
}

TEST_CASE("engine.tokenizer.round_trip") {
    for (const char* name : {"gpt2_tiny.json", "llama3_style.json"}) {
        Tokenizer tok = Tokenizer::from_json(fixture(name));
        for (const std::string& text : kRoundTripTexts) {
            CAPTURE(name);
            CAPTURE(text);
            CHECK(tok.decode(tok.encode(text)) == text);
        }
    }
    CHECK(Tokenizer::from_json(fixture("gpt2_tiny.json")).encode("").empty());
}

TEST_CASE("engine.tokenizer.invalid_utf8") {
    // Each byte outside a valid character is a piece of its own, so it is
    // encoded as its byte token and decodes back unchanged.
    Tokenizer tok = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    const std::string bad = "\xff" "abc \xc3(x \xe6\x97 \xed\xa0\x80 hello\xc3";
    CHECK(tok.encode("\xffhello") == Ids{0xFF, 262});
    CHECK(tok.decode(tok.encode(bad)) == bad);
    Tokenizer llama = Tokenizer::from_json(fixture("llama3_style.json"));
    CHECK(llama.decode(llama.encode(bad)) == bad);
}

TEST_CASE("engine.tokenizer.stream_decoder_utf8") {
    Tokenizer tok = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    // 日本語 is E6 97 A5 | E6 9C AC | E8 AA 9E; merge 15 joins A5 E6 across
    // the first two characters.
    Ids ids = tok.encode("日本語");
    REQUIRE(ids == Ids{0xE6, 0x97, 271, 0x9C, 0xAC, 0xE8, 0xAA, 0x9E});
    StreamDecoder stream(tok);
    std::vector<std::string> out;
    for (int id : ids) out.push_back(stream.push(id));
    CHECK(out == std::vector<std::string>{"", "", "日", "", "本", "", "", "語"});
    CHECK(stream.flush() == "");

    for (const std::string& text : kRoundTripTexts) {
        StreamDecoder s(tok);
        std::string joined;
        for (int id : tok.encode(text)) joined += s.push(id);
        joined += s.flush();
        CHECK(joined == text);
    }

    // Bytes that can never be a character become U+FFFD at once; an
    // incomplete character waits, and becomes U+FFFD if the stream ends.
    Tokenizer bytes = Tokenizer::bytes(256);
    StreamDecoder b(bytes);
    CHECK(b.push(0xFF) == "\uFFFD");
    CHECK(b.push(0xE6) == "");
    CHECK(b.push('a') == "\uFFFDa");
    CHECK(b.push(0xF0) == "");
    CHECK(b.push(0x9F) == "");
    CHECK(b.flush() == "\uFFFD");
    CHECK(b.push('z') == "z");
}

TEST_CASE("engine.tokenizer.bytes") {
    Tokenizer tok = Tokenizer::bytes(300);
    CHECK(tok.kind() == "bytes");
    CHECK(tok.vocab_size() == 300);
    CHECK(tok.encode("hi é") == Ids{'h', 'i', ' ', 0xC3, 0xA9});
    CHECK(tok.decode(Ids{'h', 'i', 256, 299}) == "hi<|256|><|299|>");
    CHECK(tok.token_bytes(0) == std::string(1, '\0'));
    CHECK(tok.token_id("a") == 'a');
    for (const std::string& text : kRoundTripTexts) CHECK(tok.decode(tok.encode(text)) == text);

    Tokenizer ascii = Tokenizer::bytes(128);
    CHECK(ascii.encode("ok") == Ids{'o', 'k'});
    CHECK_THROWS_AS(ascii.encode("é"), pd::UserError);
    CHECK_THROWS_AS(Tokenizer::bytes(0), pd::UserError);
}

TEST_CASE("engine.tokenizer.id_out_of_range") {
    Tokenizer tok = Tokenizer::from_json(fixture("gpt2_tiny.json"));
    for (int id : {-1, 273, 1 << 30}) {
        CAPTURE(id);
        CHECK_THROWS_WITH_AS(tok.decode(Ids{id}), doctest::Contains("out of range"), pd::UserError);
        CHECK_THROWS_AS(tok.token_bytes(id), pd::UserError);
        StreamDecoder s(tok);
        CHECK_THROWS_AS(s.push(id), pd::UserError);
    }
    CHECK_THROWS_AS(Tokenizer::bytes(10).decode(Ids{10}), pd::UserError);
}

TEST_CASE("engine.tokenizer.bad_json") {
    auto contains = [](const std::string& msg, const std::string& part) {
        CAPTURE(msg);
        CHECK(msg.find(part) != std::string::npos);
    };
    auto open_error = [](const std::filesystem::path& p) {
        try {
            Tokenizer::from_json(p);
        } catch (const pd::UserError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    contains(open_error(fixture("no_such_tokenizer.json")), "cannot open");
    contains(open_error(fixture("")), "is a folder");
    contains(open_error(fixture("broken.json")), "not valid JSON");

    const json good = read_json("gpt2_tiny.json");
    auto variant = [&](auto edit) {
        json j = good;
        edit(j);
        return load_error(j);
    };
    contains(variant([](json& j) { j["model"]["type"] = "Unigram"; }), "\"Unigram\" is not supported");
    contains(variant([](json& j) { j["model"]["type"] = "WordPiece"; }), "byte-level BPE");
    contains(variant([](json& j) { j["model"]["byte_fallback"] = true; }), "SentencePiece");
    contains(variant([](json& j) { j["model"]["dropout"] = 0.1; }), "dropout");
    contains(variant([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), "\"Lowercase\"");
    contains(variant([](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }), "decoder \"Metaspace\"");
    contains(variant([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }), "\"Whitespace\"");
    contains(variant([](json& j) { j["pre_tokenizer"] = nullptr; }), "no ByteLevel");
    contains(variant([](json& j) {
                 j["pre_tokenizer"] = {{"type", "Sequence"},
                                       {"pretokenizers", {j["pre_tokenizer"], {{"type", "Digits"}}}}};
             }),
             "must be the last");
    contains(variant([](json& j) {
                 j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                       {"behavior", "Isolated"}, {"invert", false}};
             }),
             "cannot compile the regex");
    contains(variant([](json& j) {
                 j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}},
                                       {"behavior", "MergedWithPrevious"}, {"invert", false}};
             }),
             "MergedWithPrevious");
    contains(variant([](json& j) { j["model"]["merges"].push_back("q zz"); }), "\"zz\", which is not in model.vocab");
    contains(variant([](json& j) { j["model"]["merges"].push_back("a b c"); }), "merge #16");
    contains(variant([](json& j) { j["model"]["vocab"]["x"] = -3; }), "must be an integer in 0..16777215, got the number -3");
    contains(variant([](json& j) { j.erase("model"); }), "model is missing");
    contains(variant([](json& j) { j["model"]["vocab"] = json::array(); }), "model.vocab");
    // Wrong types name the key and the type found, never the value (issue #19).
    contains(variant([](json& j) { j["model"]["vocab"]["x"] = "7"; }), "got a string");
    contains(variant([](json& j) { j["model"]["merges"].push_back(7); }), "merge #16 is the number 7");
    contains(variant([](json& j) { j["model"]["unk_token"] = 5; }), "model.unk_token must be a string");
    contains(variant([](json& j) { j["model"]["vocab"]["x"] = 5555255; }), "token ids reach 5555255");
    contains(variant([](json& j) { j["added_tokens"][0]["special"] = "yes"; }), "added_tokens[0].special must be");
    json deep = json::array();
    for (int i = 0; i < 100; i++) deep = json::array({deep});
    std::string deep_error = variant([&](json& j) { j["model"]["vocab"]["x"] = deep; });
    contains(deep_error, "nested deeper than 64 levels");
    CHECK_MESSAGE(deep_error.size() < 300, "the message echoes the input: ", deep_error.substr(0, 300));

    // Accepted: NFC (as the identity) and a BPE without merges.
    CHECK(variant([](json& j) { j["normalizer"] = {{"type", "NFC"}}; }) == "");
    CHECK(variant([](json& j) {
              j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
          }) == "");
    CHECK(variant([](json& j) { j["model"].erase("merges"); }) == "");
}

// Long inputs of three kinds (ordinary text, one 100 kB word, 100 kB of
// spaces) round-trip, alone and from several threads at once. How fast they
// encode is timed by bench/run, never asserted here.
TEST_CASE("engine.tokenizer.long_inputs_and_threads") {
    Tokenizer tok = Tokenizer::from_json(fixture("llama3_style.json"));
    const std::string paragraph =
        "The quick brown fox jumps over the lazy dog. In 1984, 42 engineers wrote 3.14159 lines "
        "of code; they'll say it's \"fine\" -- won't they?\n\n";
    std::string text;
    while (text.size() < 100'000) text += paragraph;
    for (const std::string& input : {text, std::string(100'000, 'l'), std::string(100'000, ' ')}) {
        Ids ids = tok.encode(input);
        CHECK(tok.decode(ids) == input);
    }

    // Concurrent const use gives the same ids as a single thread.
    const Ids expected = tok.encode(text);
    std::vector<Ids> results(4);
    std::vector<std::thread> threads;
    for (Ids& r : results) threads.emplace_back([&] { r = tok.encode(text); });
    for (std::thread& t : threads) t.join();
    for (const Ids& r : results) CHECK(r == expected);
}

TEST_CASE("engine.tokenizer.tiny_model") {
    auto path = std::filesystem::path(PDLAB_SOURCE_ROOT) / "data/models/tiny/tokenizer.json";
    REQUIRE_MESSAGE(std::filesystem::exists(path),
                    path.string() << " does not exist: the bundled tiny model is part of the kit");
    Tokenizer tok = Tokenizer::from_json(path);
    MESSAGE("tiny model tokenizer: " << tok.kind() << ", vocab_size " << tok.vocab_size());
    // Texts start with a space, so a tokenizer with add_prefix_space still
    // round-trips exactly.
    std::vector<std::string> texts = {" Once upon a time, there was a little robot.",
                                      " \"Hello!\" she said.\n\nThe end.  42 + 17 = 59\n"};
    bool all_bytes = true;
    for (int b = 0; b < 256; ++b) all_bytes = all_bytes && tok.token_id(std::string(1, char(b))) >= 0;
    if (all_bytes)
        texts.push_back(" héllo wörld 日本語 🙂\t\r\n");
    else
        MESSAGE("tiny tokenizer lacks some byte tokens; skipping the non-ASCII round trip");
    for (const std::string& text : texts) {
        CAPTURE(text);
        Ids ids = tok.encode(text);
        CHECK(ids.size() < text.size());  // merges shorten ordinary text
        CHECK(tok.decode(ids) == text);
        for (int id : ids) CHECK(id < tok.vocab_size());
    }
}
