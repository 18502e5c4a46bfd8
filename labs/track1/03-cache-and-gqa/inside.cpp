// Lab 03, sections 1 to 4: the cache seen from inside, with your
// kv_head_for_query, kv_cache_bytes, append_kv/commit_kv and attend_one_head.
// Sections 3 and 4 run the engine's CPU copy of the model (host_model()).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/attention.hpp"
#include "exercise.hpp"
#include "engine/sampler.hpp"
#include "lab03.hpp"
#include "load/model_source.hpp"
#include "print.hpp"

namespace pd::lab03 {

using lab::human_bytes;
namespace ex = pd::lab03;

const char* kind_of(const Config& c) {
    return c.n_kv_heads == c.n_heads ? "MHA" : c.n_kv_heads == 1 ? "MQA" : "GQA";
}

namespace {

// "q0-3 -> kv0, q4-7 -> kv1" from the student's head map (abbreviated when long).
std::string head_map_str(const Config& c) {
    std::vector<std::string> parts;
    int start = 0;
    for (int h = 1; h <= c.n_heads; h++) {
        if (h < c.n_heads && ex::kv_head_for_query(h, c.n_heads, c.n_kv_heads) ==
                                 ex::kv_head_for_query(start, c.n_heads, c.n_kv_heads))
            continue;
        int kv = ex::kv_head_for_query(start, c.n_heads, c.n_kv_heads);
        parts.push_back(h - 1 == start ? fmt::format("q{}->kv{}", start, kv) : fmt::format("q{}-{}->kv{}", start, h - 1, kv));
        start = h;
    }
    if (parts.size() > 2) return fmt::format("{} ... {}", parts[0], parts.back());
    return fmt::format("{}", fmt::join(parts, ", "));
}

// Whether positions [from, to) of every layer and head hold data and [to, max) is untouched (zero).
int layers_with_new_columns(const KVCache& c, int from, int to) {
    int ok_layers = 0;
    const int D = c.head_dim;
    for (int l = 0; l < c.n_layers; l++) {
        bool ok = true;
        for (int h = 0; h < c.n_kv_heads && ok; h++) {
            for (int p = from; p < to && ok; p++) {
                const float* k = kv_key(c, l, 0, h, p);
                ok = std::any_of(k, k + D, [](float x) { return x != 0.0f; });
            }
            for (int p = to; p < std::min(c.max_seq, to + 4) && ok; p++) {
                const float* k = kv_key(c, l, 0, h, p);
                ok = std::all_of(k, k + D, [](float x) { return x == 0.0f; });
            }
        }
        ok_layers += ok;
    }
    return ok_layers;
}

// Copies the engine cache's positions [from, to) into `mine` with the student's append_kv/commit_kv.
void mirror(KVCache& mine, const KVCache& eng, int from, int to) {
    const int H = eng.n_kv_heads, D = eng.head_dim;
    std::vector<float> k(std::size_t(H) * D), v(std::size_t(H) * D);
    for (int pos = from; pos < to; pos++) {
        for (int l = 0; l < eng.n_layers; l++) {
            for (int h = 0; h < H; h++) {
                std::memcpy(k.data() + std::size_t(h) * D, kv_key(eng, l, 0, h, pos), sizeof(float) * D);
                std::memcpy(v.data() + std::size_t(h) * D, kv_value(eng, l, 0, h, pos), sizeof(float) * D);
            }
            ex::append_kv(mine, l, 0, k.data(), v.data());
        }
        ex::commit_kv(mine, 0);
    }
}
// Largest |student - engine| over `rows` query rows of the last layer's attention.
double attention_diff(const Config& c, const KVCache& cache, const std::vector<float>& q,
                      const std::vector<float>& att, int rows, int first_pos) {
    const int Q = c.q_dim(), D = c.head_dim, l = c.n_layers - 1;
    std::vector<float> out(static_cast<std::size_t>(D));
    double worst = 0;  // the largest |diff| / (1e-4 + 1e-3 |engine|): at most 1 means they agree
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < c.n_heads; h++) {
            int kvh = ex::kv_head_for_query(h, c.n_heads, c.n_kv_heads);
            ex::attend_one_head(out.data(), q.data() + std::size_t(r) * Q + std::size_t(h) * D, cache, l, 0, kvh,
                                first_pos + r + 1);
            for (int i = 0; i < D; i++) {
                double ref = att[std::size_t(r) * Q + std::size_t(h) * D + std::size_t(i)];
                double diff = std::fabs(double(out[std::size_t(i)]) - ref);
                worst = std::max(worst, diff / (1e-4 + 1e-3 * std::fabs(ref)));
            }
        }
    return worst;
}

}  // namespace

// ---- 1. Head map.
void section_head_map(Lab& lab) {
    const Config& c = lab.c;
    std::printf("1. Which KV head serves each query head (your kv_head_for_query)\n");
    std::vector<int> map;
    bool map_ok = true;
    for (int h = 0; h < c.n_heads; h++) {
        map.push_back(ex::kv_head_for_query(h, c.n_heads, c.n_kv_heads));
        map_ok = map_ok && map.back() == kv_head_for(h, c.n_heads, c.n_kv_heads);
    }
    const int shown = std::min(c.n_heads, 16);
    std::printf("   query head ");
    for (int h = 0; h < shown; h++) std::printf(" %3d", h);
    std::printf("%s\n   KV head    ", c.n_heads > shown ? " ..." : "");
    for (int h = 0; h < shown; h++) std::printf(" %3d", map[std::size_t(h)]);
    std::printf("%s\n", c.n_heads > shown ? " ..." : "");
    std::printf("   %s. %d query heads share each KV head, so the cache stores %d heads' K/V instead of %d.\n",
                head_map_str(c).c_str(), c.group_size(), c.n_kv_heads, c.n_heads);
    std::printf("   check against the engine's kv_head_for(): %s\n\n", map_ok ? "same map" : "DIFFERENT");
    lab.all_ok = lab.all_ok && map_ok;
    lab.js["head_map"] = map;
}

namespace {

// One row of section 2's table, and its JSON.
nlohmann::json print_bytes_row(Lab& lab, const std::string& name, const Config& cf) {
    const Options& o = lab.o;
    std::size_t tok1 = ex::kv_cache_bytes(cf, 1, 1, 4);
    std::size_t at32 = ex::kv_cache_bytes(cf, o.batch, o.context, 4);
    std::size_t at16 = ex::kv_cache_bytes(cf, o.batch, o.context, 2);
    bool ok = tok1 == cf.kv_elems_per_token() * 4;
    lab.all_ok = lab.all_ok && ok;
    std::string label = name.size() > 44 ? name.substr(0, 41) + "..." : name;
    std::printf("   %-44s %6d %5d %4d %-4s %-26s %10s %11s %11s %7s%s\n", label.c_str(), cf.n_layers, cf.n_heads,
                cf.n_kv_heads, kind_of(cf), head_map_str(cf).c_str(), human_bytes(double(tok1)).c_str(),
                human_bytes(double(at32)).c_str(), human_bytes(double(at16)).c_str(),
                cf.n_kv_heads == cf.n_heads ? "1" : fmt::format("1/{}", cf.group_size()).c_str(),
                ok ? "" : "  <- differs from the engine's count");
    return {{"model", name}, {"layers", cf.n_layers}, {"heads", cf.n_heads}, {"kv_heads", cf.n_kv_heads},
            {"head_dim", cf.head_dim}, {"bytes_per_token_f32", tok1}, {"bytes_at_context_f32", at32},
            {"bytes_at_context_bf16", at16}};
}

}  // namespace

// ---- 2. MHA / GQA / MQA bytes.
void section_bytes(Lab& lab) {
    const Options& o = lab.o;
    std::printf("2. MHA, GQA and MQA: what the cache costs (your kv_cache_bytes)\n");
    std::printf("   bytes = 2 (K and V) x layers x B x H_kv x S x D x bytes per element, B = %d, S = %d (--context)\n",
                o.batch, o.context);
    std::printf("   %-44s %6s %5s %4s %-4s %-26s %10s %11s %11s %7s\n", "model", "layers", "heads", "H_kv", "kind",
                "head map", "per token", "S (f32)", "S (bf16)", "vs MHA");
    nlohmann::json jb = nlohmann::json::array();
    jb.push_back(print_bytes_row(lab, o.common.model, lab.c));
    for (const std::string& spec : o.shapes) {
        std::string body = lab::synthetic_body(spec);
        unsigned long long seed = 0;
        jb.push_back(print_bytes_row(lab, "synthetic:" + body, synthetic_config(body, seed)));  // the shape only
    }
    std::printf("   The query side is untouched: MHA, GQA and MQA of the same width all have the same query heads.\n"
                "   Only the K/V heads shrink, and with them the cache and the bytes every decode step reads.\n\n");
    lab.js["bytes"] = jb;
    lab.js["context"] = o.context;
}

namespace {

// One row of section 3: positions [before, after) mirrored with the student's append/commit.
void print_growth_row(Lab& lab, Growth& g, const std::string& pass, int tokens_in, int before, int after) {
    mirror(g.mine, g.cache, before, after);
    const int layers = layers_with_new_columns(g.cache, before, after);
    const bool same = g.mine.seq_len == g.cache.seq_len && g.mine.k == g.cache.k && g.mine.v == g.cache.v;
    lab.all_ok = lab.all_ok && layers == lab.c.n_layers && same && after == before + tokens_in;
    std::string positions = tokens_in == 1 ? fmt::format("{}", before) : fmt::format("{}..{}", before, after - 1);
    std::printf("   %-10s %9d  %-13s %-24s %-24s %s\n", pass.c_str(), tokens_in,
                fmt::format("{} -> {}", before, after).c_str(), kv_shape_str(g.cache, 0).c_str(),
                fmt::format("{} in {}/{} layers", positions, layers, lab.c.n_layers).c_str(),
                same ? "identical" : "DIFFERENT");
}

// ---- 3, the lesson's shapes: the same growth on an MHA model whose cache is
// [B, 8, S, 64] (8 KV heads of 64 dimensions), for a 4-token prompt and two
// decode steps, as the lesson draws it. The bundled model's shapes above are
// smaller ([1, 2, S, 32]: it has 2 KV heads of 32); the rule is the same.
void section_lesson_shapes(Lab& lab) {
    const char* spec = "synthetic:mha-h8-d64";
    const LoadedModel lesson = load_model(spec, Precision::f32, false);
    const Model& m = *lesson.model;
    const std::vector<int> ids = lesson.tokenizer.encode("One ");  // 4 byte tokens: "O" "n" "e" " "
    KVCache cache = make_kv_cache(m, 1, int(ids.size()) + 2);
    RunState st = make_run_state(m.config, int(ids.size()));
    std::printf("   The lesson's shapes: %s (8 KV heads, head_dim 64), B = 1, the %zu-token prompt \"One \"\n",
                spec, ids.size());
    const float* lg = prefill(m, cache, st, 0, ids);
    std::vector<std::string> shapes = {kv_shape_str(cache, 0)};
    int slot = 0;
    for (int i = 0; i < 2; i++) {
        int t = argmax(lg, m.config.vocab_size);
        lg = decode(m, cache, st, {&slot, 1}, {&t, 1});
        shapes.push_back(kv_shape_str(cache, 0));
    }
    const bool ok = shapes == std::vector<std::string>{"[1, 8, 4, 64]", "[1, 8, 5, 64]", "[1, 8, 6, 64]"};
    lab.all_ok = lab.all_ok && ok;
    std::printf("   prefill: %s -> decode 1: %s -> decode 2: %s%s\n\n", shapes[0].c_str(), shapes[1].c_str(),
                shapes[2].c_str(), ok ? "" : "  <- not the lesson's [1, 8, 4, 64] -> [1, 8, 5, 64] -> [1, 8, 6, 64]");
    lab.js["lesson_shapes"] = shapes;
}

}  // namespace

// ---- 3. Growth, on our own cache of the CPU model, mirrored by the student's append/commit.
Growth section_growth(Lab& lab) {
    const Options& o = lab.o;
    const Config& c = lab.c;
    std::vector<int> ids = lab.tok.encode(o.prompt);
    if (ids.empty()) fail("the prompt is empty: give some text with --prompt");
    const int P = int(ids.size());
    if (P + o.steps > c.max_seq_len)
        fail("the prompt ({} tokens) plus --steps {} do not fit the context of {}", P, o.steps, c.max_seq_len);
    Growth g{make_kv_cache(lab.m, 1, P + o.steps), make_kv_cache(lab.m, 1, P + o.steps), make_run_state(c, P), {}, {},
             ids, {}};
    std::printf("3. The cache grows one position per token, in every layer (your append_kv + commit_kv copy it;\n"
                "   this pass runs the engine's CPU copy of the model, host_model(), to look inside its cache)\n");
    std::printf("   prompt: %d tokens; then %d greedy decode steps\n", P, o.steps);
    std::printf("   %-10s %9s  %-13s %-24s %-24s %s\n", "pass", "tokens in", "cache length", "K/V shape, every layer",
                "new positions written", "your copy of the cache");
    const float* lg = prefill(lab.m, g.cache, g.st, 0, ids);
    g.q_prefill.assign(g.st.q.begin(), g.st.q.begin() + std::ptrdiff_t(P) * c.q_dim());
    g.att_prefill.assign(g.st.att.begin(), g.st.att.begin() + std::ptrdiff_t(P) * c.q_dim());
    print_growth_row(lab, g, "prefill", P, 0, P);
    int slot = 0;
    for (int i = 1; i <= o.steps; i++) {
        int t = argmax(lg, c.vocab_size);
        g.out_ids.push_back(t);
        int before = g.cache.seq_len[0];
        lg = decode(lab.m, g.cache, g.st, {&slot, 1}, {&t, 1});
        print_growth_row(lab, g, fmt::format("decode {}", i), 1, before, g.cache.seq_len[0]);
    }
    std::printf("   Per token, every layer keeps one K row and one V row per KV head: %d x 2 x %d x %d floats = %s.\n"
                "   Decode step i reads all %d + i cached positions of every layer. (Lab 02's trace is the same\n"
                "   growth seen from outside: P, P+1, P+2.)\n",
                c.n_layers, c.n_kv_heads, c.head_dim, human_bytes(double(c.kv_elems_per_token() * 4)).c_str(), P);
    lab.js["growth"] = {{"prompt_len", P}, {"steps", o.steps}, {"final_len", g.cache.seq_len[0]}};
    section_lesson_shapes(lab);
    return g;
}

// ---- 4. The student's attention on the real (CPU) cache.
void section_attention(Lab& lab, const Growth& g) {
    const Config& c = lab.c;
    const int P = int(g.ids.size()), len = g.cache.seq_len[0];
    std::printf("4. Your attend_one_head on the CPU pass's cache, against the engine's attention output (last layer)\n");
    double d_pre = attention_diff(c, g.cache, g.q_prefill, g.att_prefill, P, 0);
    // After the last decode the run state holds that step's query and attention output (one row).
    double d_dec = attention_diff(c, g.cache, g.st.q, g.st.att, 1, len - 1);
    const double tol = 1.0;
    std::printf("   Every output element is compared with |yours - engine| <= 1e-4 + 1e-3 |engine|; the column\n"
                "   shows the worst ratio of the difference to that tolerance (at most 1: they agree).\n");
    std::printf("   prefill: %d positions x %d query heads, each over its 1..%d keys: worst %.3f  %s\n", P, c.n_heads,
                P, d_pre, d_pre <= tol ? "match" : "MISMATCH");
    std::printf("   decode %d: 1 position x %d query heads over %d keys:            worst %.3f  %s\n\n", lab.o.steps,
                c.n_heads, len, d_dec, d_dec <= tol ? "match" : "MISMATCH");
    lab.all_ok = lab.all_ok && d_pre <= tol && d_dec <= tol;
    lab.js["attention_worst_vs_tolerance"] = {{"prefill", d_pre}, {"decode", d_dec}};
}

}  // namespace pd::lab03
