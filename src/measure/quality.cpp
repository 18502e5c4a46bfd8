#include "measure/quality.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/sampler.hpp"
#include "load/model_source.hpp"

namespace pd {

std::vector<std::string> read_paragraphs(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) fail("cannot read the text file {}: check the path", path.string());
    std::vector<std::string> out;
    std::string line, para;
    auto flush = [&] {
        if (!para.empty()) out.push_back(para);
        para.clear();
    };
    while (std::getline(in, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) flush();
        else para += (para.empty() ? "" : "\n") + line;
    }
    flush();
    if (out.empty()) fail("the text file {} is empty: it needs paragraphs separated by blank lines", path.string());
    return out;
}

namespace {

// -log softmax(logits)[target], in double.
double nll(const float* logits, int vocab, int target) {
    double max = logits[0];
    for (int i = 1; i < vocab; i++) max = std::max(max, double(logits[i]));
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += std::exp(double(logits[i]) - max);
    return std::log(sum) + max - double(logits[target]);
}

}  // namespace

Perplexity perplexity(Engine& e, const std::vector<std::vector<int>>& texts) {
    const int vocab = e.config().vocab_size;
    const int slot[1] = {0};
    double total = 0;
    Perplexity r;
    for (const auto& ids : texts) {
        if (ids.size() > std::size_t(e.max_seq()))
            fail("a text of {} tokens does not fit the cache of {} positions: split it into shorter paragraphs",
                 ids.size(), e.max_seq());
        if (ids.size() < 2) continue;  // nothing to predict
        e.reset(0);
        const float* logits = e.prefill(0, std::span(ids.data(), 1));
        for (std::size_t t = 1; t < ids.size(); t++) {
            total += nll(logits, vocab, ids[t]);
            r.tokens++;
            if (t + 1 < ids.size()) logits = e.decode(slot, std::span(&ids[t], 1));
        }
    }
    if (r.tokens == 0) fail("the texts hold no token to predict (each needs at least 2 tokens)");
    r.mean_nll = total / double(r.tokens);
    r.perplexity = std::exp(r.mean_nll);
    return r;
}

Agreement greedy_agreement(Engine& ref, Engine& test, const std::vector<std::vector<int>>& prompts, int steps) {
    const int vocab = ref.config().vocab_size;
    const int slot[1] = {0};
    Agreement a;
    for (const auto& prompt : prompts) {
        ref.reset(0);
        test.reset(0);
        const float* lr = ref.prefill(0, prompt);
        const float* lt = test.prefill(0, prompt);
        for (int s = 0; s < steps; s++) {
            const int next = argmax(lr, vocab);
            a.matched += argmax(lt, vocab) == next;
            a.total++;
            if (s + 1 == steps) break;
            lr = ref.decode(slot, std::span(&next, 1));
            lt = test.decode(slot, std::span(&next, 1));
        }
    }
    return a;
}

std::filesystem::path heldout_text(const std::string& model_spec) {
    const auto path = data_dir() / "models" / model_spec / "heldout.txt";
    return model_spec.find_first_of("/:") == std::string::npos && std::filesystem::exists(path) ? path : "";
}

}  // namespace pd
