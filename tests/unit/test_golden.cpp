// golden.*: the bundled models reproduce what PyTorch computed when they were
// trained (data/models/*/golden.json): the greedy ids exactly, the top-5 logits
// of the last prompt position within tolerance, in f32 and (looser) bf16.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "engine/engine.hpp"
#include "engine/generate.hpp"
#include "load/model_source.hpp"

using namespace pd;

static void check_golden(const std::string& name, Precision p) {
    auto path = data_dir() / "models" / name / "golden.json";
    INFO("golden file " << path.string() << " (written by tools/train/train.py)");
    REQUIRE(std::filesystem::exists(path));
    nlohmann::json g = nlohmann::json::parse(std::ifstream(path));
    auto lm = load_model(name, p, false);
    auto engine = make_engine(lm.model, {});
    for (auto& pr : g["prompts"]) {
        std::string text = pr["text"];
        INFO(name << " " << precision_name(p) << " prompt \"" << text << "\"");
        auto ids = pr["ids"].get<std::vector<int>>();
        CHECK(lm.tokenizer.encode(text) == ids);
        // Top-5 logits of the last prompt position, from a fresh cache.
        engine->reset(0);
        const float* logits = engine->prefill(0, ids);
        float atol = p == Precision::f32 ? 2e-3f : 0.15f;
        for (auto& t : pr["top5"]) {
            float want = t["logit"], got = logits[t["id"].get<int>()];
            CHECK(std::fabs(got - want) <= atol + 0.01f * std::fabs(want));
        }
        GenerateOptions o;
        o.max_new_tokens = int(pr["greedy_ids"].size());
        o.stop_at_eos = false;
        auto r = generate(*engine, ids, o);
        auto want = pr["greedy_ids"].get<std::vector<int>>();
        if (p == Precision::f32) {
            CHECK(r.generated_ids == want);
        } else {
            // bf16 rounds the weights: the text may drift late, but not at the start.
            int same = 0;
            while (same < int(want.size()) && r.generated_ids[same] == want[same]) same++;
            CHECK(same >= 8);
        }
    }
}

TEST_CASE("golden.tiny_f32") { check_golden("tiny", Precision::f32); }
TEST_CASE("golden.tiny_bf16") { check_golden("tiny", Precision::bf16); }
TEST_CASE("golden.tiny_draft_f32") { check_golden("tiny-draft", Precision::f32); }
