// libFuzzer target: a chat_template's source, compiled and rendered with a
// fixed conversation, with and without the generation prompt. Templates come
// from downloaded checkpoints: one outside the kit's subset must end in a
// UserError at load, one that fails while rendering in a RenderError; a crash
// (Qwen3's "- loop.index0" once divided by zero: SIGFPE), a hang, a sanitizer
// report or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common.hpp"
#include "io/chat_template.hpp"

namespace {

const pd::tok::tmpl::Json& conversation() {
    static const pd::tok::tmpl::Json m = pd::tok::tmpl::Json::parse(R"([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi \u00e9 \u65e5"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": ""}])");
    return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const pd::tok::ChatTemplate t(std::string_view(reinterpret_cast<const char*>(data), size),
                                      {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
        for (bool generation_prompt : {true, false}) {
            try {
                (void)t.render(conversation(), generation_prompt);
            } catch (const pd::tok::tmpl::RenderError&) {
            }
        }
    } catch (const pd::UserError&) {
    }
    return 0;
}
