#include "tp_generate.hpp"

#include "engine/engine.hpp"
#include "engine/sampler.hpp"

namespace pd::lab16 {

TpRun tp_generate(TpRank& r, TimedComm& comm, std::span<const int> prompt, int n_new) {
    TpRun run;
    const int vocab = r.model->config.vocab_size;
    std::span<const int> in = prompt;
    int next = 0;
    for (int step = 0; step < n_new; step++) {
        PassTimes t;
        const std::span<const float> logits = tp_forward(r, comm, in, &t);
        if (step == 0) run.first_logits.assign(logits.begin(), logits.end());
        run.passes.push_back(t);
        next = comm.broadcast(comm.rank() == 0 ? argmax(logits.data(), vocab) : 0);
        run.tokens.push_back(next);
        in = std::span<const int>(&run.tokens.back(), 1);
    }
    return run;
}

void tp_warm_up(TpRank& r, TimedComm& comm, std::span<const int> prompt) {
    tp_generate(r, comm, prompt, 2);
    r.cache.seq_len[0] = 0;
}

std::vector<int> engine_greedy(std::shared_ptr<const Model> model, std::span<const int> prompt, int n_new,
                               std::vector<float>* first_logits) {
    const int vocab = model->config.vocab_size;
    const auto engine = make_engine(model, {Device::cpu, 1, int(prompt.size()) + n_new});
    std::vector<int> out;
    const float* logits = engine->prefill(0, prompt);
    if (first_logits) first_logits->assign(logits, logits + vocab);
    for (int step = 0; step < n_new; step++) {
        out.push_back(argmax(logits, vocab));
        if (step + 1 < n_new) {
            const int slot = 0;
            logits = engine->decode({&slot, 1}, {&out.back(), 1});
        }
    }
    return out;
}

}  // namespace pd::lab16
