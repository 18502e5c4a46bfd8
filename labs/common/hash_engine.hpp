// A fake serving engine for the track-2 lab tests (labs 06 and 08): the real
// Scheduler drives it like the paged engine, but its "model" hashes each
// sequence's whole cached history into the next token. A token fed twice,
// skipped, cut at the wrong place or fed to the wrong sequence changes every
// later token, so comparing with `alone` (the tokens a request gets when it runs
// by itself) catches any scheduling slip. Memory is unlimited: these tests are
// about which tokens run when, not about blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "serve/serving_engine.hpp"
#include "serve/step_policy.hpp"

namespace pd::lab {

constexpr int kHashVocab = 64;

// The fake model: FNV-1a over (token, position) of the whole history.
inline int hash_next_token(std::span<const int> history) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < history.size(); i++)
        h = (h ^ std::uint64_t(history[i] * 131 + int(i))) * 1099511628211ull;
    return int(h % kHashVocab);
}

// The n tokens the fake model generates after `prompt` when nothing else runs.
inline std::vector<int> alone(std::vector<int> prompt, int n) {
    std::vector<int> out;
    for (int k = 0; k < n; k++) out.push_back(hash_next_token(prompt)), prompt.push_back(out.back());
    return out;
}

class HashEngine final : public pd::serve::ServingEngine {
public:
    HashEngine() { cfg_.vocab_size = kHashVocab; }
    const pd::Config& config() const override { return cfg_; }
    int block_size() const override { return 16; }
    int total_blocks() const override { return 1 << 20; }
    int free_blocks() const override { return 1 << 20; }
    int open(int seq, std::span<const int>) override { return cache_[seq].clear(), 0; }
    bool reserve(int, int) override { return true; }
    void close(int seq) override { cache_.erase(seq); }
    int cached_len(int seq) const override { return int(cache_.at(seq).size()); }
    void truncate(int seq, int len) override { cache_.at(seq).resize(std::size_t(len)); }

    // Appends each item's tokens to its sequence; a row that wants logits gets
    // a one-hot at the hash of its sequence's history up to that row. Records the step.
    const float* step(std::span<const pd::serve::SeqWork> work) override {
        std::size_t rows = 0;
        for (const auto& w : work) rows += std::size_t(w.logit_rows);
        logits_.assign(rows * kHashVocab, 0.0f);
        steps.emplace_back();
        std::size_t row = 0;
        for (const auto& w : work) {
            auto& c = cache_.at(w.seq);
            c.insert(c.end(), w.tokens.begin(), w.tokens.end());
            steps.back().push_back({w.seq, int(w.tokens.size())});
            for (int j = w.logit_rows - 1; j >= 0; j--)  // row j from the end sees the history less j tokens
                logits_[row++ * kHashVocab + std::size_t(hash_next_token(std::span(c).first(c.size() - j)))] = 1.0f;
        }
        return logits_.data();
    }

    // The most sequences, and the most tokens, any one step ran.
    std::size_t most_items() const {
        std::size_t most = 0;
        for (const auto& s : steps) most = std::max(most, s.size());
        return most;
    }
    std::size_t most_tokens() const {
        std::size_t most = 0;
        for (const auto& s : steps) {
            std::size_t n = 0;
            for (const auto& item : s) n += std::size_t(item.n);
            most = std::max(most, n);
        }
        return most;
    }

    std::vector<std::vector<pd::serve::BatchItem>> steps;  // (steps, items) what each step ran

private:
    pd::Config cfg_;
    std::map<int, std::vector<int>> cache_;  // seq -> its tokens so far
    std::vector<float> logits_;               // (rows, kHashVocab)
};

}  // namespace pd::lab
