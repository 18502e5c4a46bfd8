// Lab 01: how inference works. Text -> token ids -> embeddings -> one forward
// pass (every shape of one layer) -> logits -> one chosen token -> text.
//
// One function per numbered section of the handout. Sections 1-4 use the engine
// only; sections 5-6 call the functions you write in exercise.cpp (greedy,
// softmax_with_temperature, sample_top_k).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "exercise.hpp"
#include "lab01.hpp"
#include "engine/generate.hpp"
#include "lab_main.hpp"
#include "print.hpp"
#include "engine/sampler.hpp"

using namespace pd;
using namespace pd::lab01;
using lab::quoted;
using lab::quoted_token;
namespace ex = pd::lab01;

namespace {

void check_options(const Options& o) {
    if (o.steps < 1) fail("--steps must be at least 1, got {}", o.steps);
    if (!(o.temperature > 0.0f) || !std::isfinite(o.temperature))
        fail("--temperature must be > 0, got {} (the greedy choice, the T -> 0 limit, is shown anyway)", o.temperature);
    if (o.top_k < 1) fail("--top-k must be at least 1, got {}", o.top_k);
    if (o.show < 1) fail("--show must be at least 1, got {}", o.show);
}

// ---- 1. Text to token ids
void text_to_ids(Lab& L, nlohmann::json& js) {
    L.ids = L.tok.encode(L.o.prompt);
    L.P = int(L.ids.size());
    if (L.P == 0) fail("the prompt is empty: give some text with --prompt");
    if (L.P + L.o.steps > L.engine.max_seq())
        fail("the prompt ({} tokens) plus --steps {} do not fit the context of {} positions", L.P, L.o.steps,
             L.engine.max_seq());
    std::printf("1. Text to token ids (tokenizer: %s)\n", L.tok.kind().c_str());
    std::printf("   %s -> P = %d tokens\n", quoted(L.o.prompt).c_str(), L.P);
    std::printf("   %5s %7s  %s\n", "pos", "id", "token text");
    for (int i = 0; i < L.P; i++) std::printf("   %5d %7d  %s\n", i, L.ids[i], quoted_token(L.tok, L.ids[i]).c_str());
    std::printf("   (the model only ever sees these integers; the text is the tokenizer's business)\n\n");
    js["prompt"] = L.o.prompt;
    js["prompt_ids"] = L.ids;
}

// ---- 5. Choosing a token: the exercise.
// The `shown` best ids of `last`, best first (ties to the lower id, as argmax).
std::vector<int> best_ids(std::span<const float> last, int shown) {
    std::vector<int> order(last.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [&](int a, int b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
    order.resize(std::size_t(shown));
    return order;
}

void choose_token(const Lab& L, std::span<const float> last, nlohmann::json& js) {
    const Options& o = L.o;
    const int V = int(last.size());
    std::printf("5. Choosing the next token from the last row (your exercise)\n");
    int g = ex::greedy(last);
    int engine_g = argmax(last.data(), V);
    std::vector<float> probs = ex::softmax_with_temperature(last, 1.0f);
    std::printf("   greedy():       id %d %s, p = %.3f at T = 1   [engine argmax: %d, %s]\n", g,
                quoted_token(L.tok, g).c_str(), probs[std::size_t(g)], engine_g,
                g == engine_g ? "agrees" : "DISAGREES: check greedy()");
    std::vector<float> pt = ex::softmax_with_temperature(last, o.temperature);
    const int k = std::min(o.top_k, V), shown = std::min(k, 8);
    double in_k = 0;  // the top k's probability at T, which the sampler renormalises to 1
    for (int id : best_ids(last, k)) in_k += pt[std::size_t(id)];
    std::printf("   The %d best candidates: p at T=1, p at T=%.2f, and after keeping the top %d (renormalised)\n",
                shown, o.temperature, k);
    for (int id : best_ids(last, shown))
        std::printf("     id %6d %-16s %.3f   %.3f   %.3f\n", id, quoted_token(L.tok, id).c_str(),
                    probs[std::size_t(id)], pt[std::size_t(id)], pt[std::size_t(id)] / in_k);
    std::mt19937_64 rng(o.seed);
    int sampled = ex::sample_top_k(last, o.temperature, k, rng);
    std::printf("   sample_top_k(T=%.2f, k=%d, seed %llu): id %d %s\n\n", o.temperature, k,
                static_cast<unsigned long long>(o.seed), sampled, quoted_token(L.tok, sampled).c_str());
    js["greedy_id"] = g;
    js["greedy_agrees"] = g == engine_g;
    js["sampled_id"] = sampled;
}

// ---- 6. Back to text, and a few more tokens with the engine's decode steps.
// --steps tokens: the first from prefill's last row, each later one from one decode step.
std::vector<int> generate_with(const Lab& L, const std::function<int(std::span<const float>)>& pick) {
    std::vector<int> out;
    int slot = 0;
    L.engine.reset(slot);
    const float* l = L.engine.prefill(slot, L.ids);
    for (int i = 0; i < L.o.steps; i++) {
        int t = pick(std::span<const float>(l, std::size_t(L.c.vocab_size)));
        out.push_back(t);
        if (i + 1 < L.o.steps) l = L.engine.decode({&slot, 1}, {&t, 1});  // one token in, one row of logits out
    }
    return out;
}

void ids_to_text(const Lab& L, nlohmann::json& js) {
    const Options& o = L.o;
    const int k = std::min(o.top_k, L.c.vocab_size);
    std::printf("6. Ids back to text: one more token per step, each from a decode step over the cache\n");
    std::vector<int> greedy_ids = generate_with(L, [&](std::span<const float> l) { return ex::greedy(l); });
    std::mt19937_64 rng(o.seed);
    std::vector<int> sampled_ids =
        generate_with(L, [&](std::span<const float> l) { return ex::sample_top_k(l, o.temperature, k, rng); });
    GenerateOptions go;
    go.max_new_tokens = o.steps;
    go.stop_at_eos = false;
    std::vector<int> engine_ids = generate(L.engine, L.ids, go).generated_ids;
    std::printf("   greedy  ids [%s]\n", lab::id_list(greedy_ids).c_str());
    std::printf("   greedy  text: %s|%s\n", o.prompt.c_str(), lab::text_of(L.tok, greedy_ids).c_str());
    std::printf("           %s\n", engine_ids == greedy_ids ? "(the same tokens as the engine's own greedy generate())"
                                                            : "(DIFFERS from the engine's greedy generate(): check greedy())");
    std::printf("   sampled text: %s|%s   (T=%.2f, top-k %d, seed %llu)\n", o.prompt.c_str(),
                lab::text_of(L.tok, sampled_ids).c_str(), o.temperature, k, static_cast<unsigned long long>(o.seed));
    std::printf("   ('|' marks where the prompt ends. 1 prefill + %d decode steps made %d tokens: the first\n"
                "   token came from the prefill's last row, each later one from one decode step.)\n",
                o.steps - 1, o.steps);
    js["greedy_continuation_ids"] = greedy_ids;
    js["greedy_continuation_text"] = L.tok.decode(greedy_ids);
    js["sampled_continuation_ids"] = sampled_ids;
    js["sampled_continuation_text"] = L.tok.decode(sampled_ids);
    js["greedy_matches_engine"] = engine_ids == greedy_ids;
}

int run(const Options& o) {
    check_options(o);
    cli::Session s = cli::open_session(o.common);
    const Model& m = s.engine->host_model();
    const Config& c = m.config;
    Lab L{o, *s.engine, m, c, s.loaded.tokenizer, {}, 0};
    nlohmann::json js;
    std::printf("Lab 01: how inference works\n");
    std::printf("model %s (%s): %d layers, dim %d, %d query heads, %d KV heads, head_dim %d, MLP %d, "
                "vocabulary %d, context %d\n\n", o.common.model.c_str(), family_name(c.family), c.n_layers, c.dim,
                c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size, c.max_seq_len);
    text_to_ids(L, js);
    embedding(L);
    Forward f = section_forward(L);
    const std::size_t V = std::size_t(c.vocab_size);
    choose_token(L, std::span<const float>(f.logits.data() + std::size_t(L.P - 1) * V, V), js);
    ids_to_text(L, js);
    const int P = L.P, Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
    js["model"] = o.common.model;
    js["P"] = P;
    js["shapes"] = {{"x", {P, c.dim}}, {"qkv", {P, Q + 2 * KV}}, {"q", {P, c.n_heads, D}},
                    {"kv_cache", {1, c.n_kv_heads, P, D}}, {"scores_per_head", {P, P}}, {"mlp_hidden", {P, c.hidden_dim}},
                    {"logits", {P, c.vocab_size}}};
    lab::write_lab_json(o.common, js);
    std::printf("\n");
    return lab::finish(js.value("greedy_agrees", false) && js.value("greedy_matches_engine", false));
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    lab::CommandLine cl{
        "Lab 01: how inference works.\n"
        "Follows one prompt through the model: text -> token ids -> embedding rows -> the layers\n"
        "(every intermediate shape of one layer, and the causal attention pattern) -> logits\n"
        "[P, vocab] -> one chosen token -> text. The last row of the logits is the only one that\n"
        "picks the next token. Sections 5 and 6 call your greedy(), softmax_with_temperature()\n"
        "and sample_top_k() from exercise.cpp; test them with\n"
        "  meson test -C build --suite track1-01",
        "01-how-inference-works"};
    cl.common(o.common);
    cl.option("--prompt,-p", o.prompt, "the text to run through the model").show_default();
    cl.option("--steps,-n", o.steps, "tokens to generate in section 6 (1 from prefill, the rest from decode steps)")
        .show_default();
    cl.option("--temperature", o.temperature,
              "sampling temperature T > 0: logits are divided by T, so T < 1 sharpens and T > 1 flattens")
        .show_default();
    cl.option("--top-k", o.top_k, "sample among the k most likely tokens only").show_default();
    cl.option("--seed", o.seed, "seed of the sampler: the same seed draws the same tokens").show_default();
    cl.option("--show", o.show, "positions of the attention pattern to print").show_default();
    return lab::run_lab(cl, argc, argv, [&] { return run(o); });
}
