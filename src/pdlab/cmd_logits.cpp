// pdlab logits: the logits of every prompt position from one prefill pass, as .npy.
#include <cstdio>

#include "cli_common.hpp"
#include "commands.hpp"
#include "io/npy.hpp"

namespace pd::cli {

// What `pdlab logits --help` says before the options.
constexpr const char* kLogitsAbout = R"(Run one prefill pass and save the float32 logits of every prompt position, shape [P, V],
as a NumPy .npy file (np.load reads it). Row i predicts the token after prompt token i.
Example: pdlab logits --prompt-ids 1,2,3 --out logits.npy)";

Command add_logits(CLI::App& app) {
    struct Opts {
        CommonOptions common;
        PromptOptions prompt;
        std::string out;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("logits", kLogitsAbout);
    add_common(sub, o->common, false);
    add_prompt(sub, o->prompt);
    sub->add_option("--out,-o", o->out, "the .npy file to write")->required();
    return {sub, [o]() {
        Session s = load_session(o->common);
        std::vector<int> ids = prompt_ids(o->prompt, s.loaded.tokenizer);
        start_engine(s, o->common, 1, std::int64_t(ids.size()));
        if (long(ids.size()) > s.engine->max_seq())
            fail("the prompt has {} tokens, more than the context length of {}", ids.size(), s.engine->max_seq());
        const float* logits = s.engine->prefill(0, ids, Keep::all);
        write_npy(o->out, logits, {long(ids.size()), long(s.engine->config().vocab_size)});
        std::fprintf(stderr, "wrote %s: float32 [%zu, %d]\n", o->out.c_str(), ids.size(),
                     s.engine->config().vocab_size);
        return 0;
    }};
}

}  // namespace pd::cli
